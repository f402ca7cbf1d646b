package model

import "errors"

// Sentinel errors returned by the store drivers and services. Callers test
// them with errors.Is; the master maps them to HTTP statuses in one place.
var (
	// ErrNotFound: the object does not exist (or belongs to another tenant,
	// which callers must not be able to tell apart).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a compare-and-set lost (stale version, status or fence),
	// or an object with that id already exists.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable: the store cannot be reached; the operation may be retried.
	// A write that failed so may still have been applied (its reply was
	// lost), unless the error also wraps ErrNotApplied.
	ErrUnavailable = errors.New("store unavailable")
	// ErrNotApplied, wrapped with ErrUnavailable, says that the operation
	// certainly did not take effect (it never reached the server, or its
	// transaction did not commit), so that even a write that is not
	// idempotent (give back n tokens) may be sent again.
	ErrNotApplied = errors.New("not applied")
	// ErrInvalid: input failed validation. Wrap it in a *FieldError to name
	// the field.
	ErrInvalid = errors.New("invalid input")
)

// FieldError names the input field that failed validation and why.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true for every FieldError.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }
