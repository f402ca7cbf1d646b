// Package docs holds the project's documentation (README.md at the
// repository root and the Markdown files beside this one). It has no code.
// Its tests check that every relative link, heading anchor and backquoted
// repository path in those files resolves, that every API path they name is
// in openapi.yaml, and run the walk-throughs of docs/api.md and README.md
// against the real server.
package docs
