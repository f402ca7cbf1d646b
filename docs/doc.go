// Package docs holds the project's documentation (README.md at the
// repository root and the Markdown files beside this one). It has no code:
// its test checks that every relative link, heading anchor and backquoted
// repository path in those files resolves.
package docs
