package cron

import (
	"math"
	"time"
	_ "time/tzdata" // embedded IANA database: same answers on every host
)

// LoadLocation loads an IANA time zone such as "Europe/London". It rejects
// "" and "Local" because a schedule must not depend on the host's zone.
func LoadLocation(name string) (*time.Location, error) {
	switch name {
	case "":
		return nil, &Error{Field: "timezone", Token: name, Reason: "is empty; want an IANA name such as Europe/London"}
	case "Local":
		return nil, &Error{Field: "timezone", Token: name, Reason: "is not allowed; want an IANA name such as Europe/London"}
	}
	if len(name) > 128 {
		return nil, &Error{Field: "timezone", Token: name, Reason: "is too long to be an IANA name"}
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, &Error{Field: "timezone", Token: name, Reason: "is not a known IANA time zone", err: err}
	}
	return loc, nil
}

// zoneSpan is the stretch of time during which one zone offset applies.
type zoneSpan struct {
	off     int64 // seconds east of UTC
	prevOff int64 // offset just before start (== off when there is none)
	start   int64 // first instant, unix seconds (math.MinInt64: since ever)
	end     int64 // first instant of the next span (math.MaxInt64: forever)
}

// zoneAt finds the span containing sec with two zone lookups.
func zoneAt(loc *time.Location, sec int64) zoneSpan {
	t := time.Unix(sec, 0).In(loc)
	_, off := t.Zone()
	s, e := t.ZoneBounds()
	z := zoneSpan{off: int64(off), prevOff: int64(off), start: math.MinInt64, end: math.MaxInt64}
	if !s.IsZero() {
		z.start = s.Unix()
		_, p := s.Add(-time.Second).Zone()
		z.prevOff = int64(p)
	}
	if !e.IsZero() {
		z.end = e.Unix()
	}
	return z
}

// repeated reports whether instant m shows a wall clock that an earlier
// instant already showed (the repeated span after a fall-back).
func (z *zoneSpan) repeated(m int64) bool {
	return z.prevOff > z.off && m < z.start+(z.prevOff-z.off)
}

// gapAt reports whether m is the first minute instant after a spring-forward
// gap, i.e. the one at which the skipped wall minutes fire.
func (z *zoneSpan) gapAt(m int64) bool {
	return z.prevOff < z.off && m < z.start+60
}

// ceilMinute returns the first minute-aligned unix second at or after t.
func ceilMinute(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return -floorDiv(-s, 60) * 60
}
