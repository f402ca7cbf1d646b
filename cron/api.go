// Package cron is schedulerd's cron engine: it parses cron expressions,
// splits them into LaunchExpression-classified children and enumerates, for
// a timezone and a UTC window, the child keys that fire in it.
//
// THIS FILE IS THE FIXED EXPORTED API. Implementations live in other files.
package cron

import "time"

// MaxChildren is the default limit on the children of one schedule.
const MaxChildren = 10000

// Fields is the seed's field form of an expression. Each field holds the same
// syntax as the corresponding field of the 5-field form; an empty field means "*".
type Fields struct {
	Minute     string `json:"minute"`
	Hour       string `json:"hour"`
	DayOfMonth string `json:"dayOfMonth"`
	Month      string `json:"month"`
	DayOfWeek  string `json:"dayOfWeek"`
}

// Class is the LaunchExpression class of a child.
type Class uint8

const (
	ClassH  Class = iota + 1 // hour (or every hour)
	ClassW                   // day of week (incl. nth weekday)
	ClassM                   // day of month (incl. L)
	ClassMO                  // month only
	ClassMM                  // month + day of month
	ClassMW                  // month + day of week
)

// Key is a child key in compact, comparable form: a LaunchExpression plus a
// Minute. Fields that the class does not use are zero. Hour is -1 for
// "every hour".
type Key struct {
	Class  Class
	Month  int8 // 1-12 (MO, MM, MW)
	Day    int8 // day of month 1-31 or 32 for L (M, MM); weekday 0-6 (W, MW)
	Nth    int8 // 1-5 for the nth weekday, 0 otherwise (W, MW)
	Hour   int8 // 0-23, or -1 for every hour
	Minute int8 // 0-59
}

// Slot is an eligible key and the UTC instant at which its children fire.
type Slot struct {
	Key Key
	At  time.Time
}

// The exported functions below are implemented in the other files of the
// package. Their signatures are fixed:
//
//   func Parse(expr string) (*Expr, error)
//   func ParseFields(f Fields) (*Expr, error)
//   func (e *Expr) String() string                       // canonical 5-field form
//   func (e *Expr) Children(limit int) ([]Key, error)     // *TooManyChildrenError over limit
//   func (k Key) LaunchExpression() string                // e.g. "MW:01:0#3:09"
//   func (k Key) String() string                          // LaunchExpression + "@" + minute
//   func ParseKey(launchExpression string, minute int) (Key, error)
//   func AppendEligible(dst []Slot, loc *time.Location, t0, t1 time.Time) []Slot
//   func NextFireTimes(e *Expr, loc *time.Location, after time.Time, k int) []time.Time
//   func LoadLocation(name string) (*time.Location, error)
//
// Parse errors are *Error values whose message names the field and the token,
// for example "hour: 24 is out of range 0-23".
