// Package schedule holds the rules of a schedule's definition: what a valid
// definition is, how it compiles into a model.Schedule, and how a stored
// schedule splits into the children the emitter scans.
//
// It knows nothing of HTTP, JSON bodies or stores: the master maps its API
// types to a Spec, calls Compile, and maps the *Errors it may return to its
// problem answers; checks that need the store (does the policy exist?) stay
// with the caller.
package schedule
