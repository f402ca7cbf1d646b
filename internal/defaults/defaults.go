// Package defaults is the one idiom every Config uses to fill in its
// defaults: a zero field takes the default, anything else is kept (and then
// validated by the Config's validate method).
package defaults

// Set stores def in *p when *p is the zero value.
func Set[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
