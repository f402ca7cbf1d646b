// Package jsonappend appends JSON values byte for byte as encoding/json's
// Marshal writes them, without its reflection, for the encoder on the
// delivery hot path (one message an event). What it cannot write as Marshal
// would, it reports (or hands to Marshal), so callers fall back to Marshal.
package jsonappend

import (
	"bytes"
	"encoding/json"
	"time"
)

// Plain reports whether Marshal writes s as it is between quotes: printable
// ASCII without the characters it escapes (", \, and <, > and &, which it
// escapes for HTML).
func Plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// String appends s quoted as Marshal quotes it.
func String(b []byte, s string) []byte {
	if !Plain(s) {
		m, _ := json.Marshal(s) // a string always marshals
		return append(b, m...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Time appends t as time.Time's MarshalJSON does and returns ok; false for
// the times MarshalJSON refuses (a year outside 0-9999, an offset of a day
// or more).
func Time(b []byte, t time.Time, ok bool) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), ok
}

// Raw appends p as Marshal writes a json.RawMessage (compacted) and returns
// ok; false when p is not JSON or holds what Marshal escapes for HTML (<,
// >, &, U+2028, U+2029).
func Raw(b, p []byte, ok bool) ([]byte, bool) {
	if bytes.ContainsAny(p, "<>&\u2028\u2029") {
		return b, false
	}
	if !bytes.ContainsAny(p, " \t\r\n") {
		if !json.Valid(p) {
			return b, false
		}
		return append(b, p...), ok
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, p); err != nil {
		return b, false
	}
	return buf.Bytes(), ok
}
