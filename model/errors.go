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
	ErrUnavailable = errors.New("store unavailable")
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
