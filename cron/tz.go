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

// zoneAt returns the span containing sec. Go's ZoneBounds is only a hint:
// past a zone's last explicit transition (the rule-based extension after
// 2037) it ends the last span of a leap year a day early, before instants it
// should contain. So each bound is checked against the offsets on both sides
// of it, and a bound that fails is searched for instead.
func zoneAt(loc *time.Location, sec int64) zoneSpan {
	t := time.Unix(sec, 0).In(loc)
	_, o := t.Zone()
	off := int64(o)
	s, e := t.ZoneBounds()
	z := zoneSpan{off: off, prevOff: off, start: math.MinInt64, end: math.MaxInt64}
	if !s.IsZero() {
		z.start = s.Unix()
		if z.start > sec || offsetAt(loc, z.start) != off {
			z.start = searchStart(loc, sec, off)
		}
		z.prevOff = offsetAt(loc, z.start-1)
	}
	if !e.IsZero() {
		z.end = e.Unix()
		if z.end <= sec || offsetAt(loc, z.end-1) != off {
			z.end = searchEnd(loc, sec, off)
		}
	}
	return z
}

// probeStep is how far searchStart and searchEnd look from sec. No zone has
// changed its offset twice within four days since 1900, so one probe a day
// away cannot step over a transition and back.
const probeStep = secondsPerDay

// searchEnd returns the first instant after sec whose offset is not off,
// if there is one within probeStep, else sec+probeStep: an end that holds
// even if it is not a transition (the next span then starts there).
func searchEnd(loc *time.Location, sec, off int64) int64 {
	lo, hi := sec, sec+probeStep // offset(lo) == off
	if offsetAt(loc, hi) == off {
		return hi
	}
	for hi-lo > 1 { // offset(hi) != off
		mid := lo + (hi-lo)/2
		if offsetAt(loc, mid) == off {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// searchStart is searchEnd backwards: the first instant of the run of off
// that contains sec, or sec-probeStep if the run started earlier.
func searchStart(loc *time.Location, sec, off int64) int64 {
	lo, hi := sec-probeStep, sec // offset(hi) == off
	if offsetAt(loc, lo) == off {
		return lo
	}
	for hi-lo > 1 { // offset(lo) != off
		mid := lo + (hi-lo)/2
		if offsetAt(loc, mid) == off {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

func offsetAt(loc *time.Location, sec int64) int64 {
	_, off := time.Unix(sec, 0).In(loc).Zone()
	return int64(off)
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
