// Package layout has no code: its test checks the module's import rules
// (which package may import which) against `go list`.
package layout
