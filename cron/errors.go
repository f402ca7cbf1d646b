package cron

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Error is a parse or validation error. Field is one of minute, hour,
// dayOfMonth, month, dayOfWeek, cron (the whole expression) or timezone; Token
// is the offending input (possibly empty) and Reason says what is wrong with it.
type Error struct {
	Field  string
	Token  string
	Reason string
	err    error // underlying cause, if any (see Unwrap)
}

// Error renders "field: token reason", e.g. "hour: 24 is out of range 0-23".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Field)
	b.WriteString(": ")
	if e.Token != "" {
		b.WriteString(quoteToken(e.Token))
		b.WriteByte(' ')
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns the underlying cause (for example from time.LoadLocation).
func (e *Error) Unwrap() error { return e.err }

// quoteToken leaves plain tokens readable ("24") and quotes odd ones so that
// empty strings, spaces and control bytes stay visible in the message.
func quoteToken(s string) string {
	const maxShown = 64
	if len(s) > maxShown {
		s = s[:maxShown] + "..."
	}
	for _, r := range s {
		if r == utf8.RuneError || r == ' ' || r == '"' || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// TooManyChildrenError reports that splitting a schedule would exceed the
// children limit; Count is computed before any child is built.
type TooManyChildrenError struct {
	Count int
	Limit int
}

func (e *TooManyChildrenError) Error() string {
	return "cron: schedule would make " + strconv.Itoa(e.Count) +
		" children; the limit is " + strconv.Itoa(e.Limit)
}
