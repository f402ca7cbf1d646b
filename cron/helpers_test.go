package cron

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func mustParse(t testing.TB, s string) *Expr {
	t.Helper()
	e, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return e
}

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// eligibleFires is the emitter's view: the instants in [t0, t1) at which any
// child of e is among the eligible keys, scanning in day-long windows.
func eligibleFires(t testing.TB, e *Expr, loc *time.Location, t0, t1 time.Time) []time.Time {
	t.Helper()
	kids, err := e.Children(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	set := make(map[Key]bool, len(kids))
	var minutes uint64 // cheap pre-filter before the map lookup
	for _, k := range kids {
		set[k] = true
		minutes |= 1 << k.Minute
	}
	var out []time.Time
	var buf []Slot
	for w := t0; w.Before(t1); w = w.Add(24 * time.Hour) {
		end := w.Add(24 * time.Hour)
		if end.After(t1) {
			end = t1
		}
		buf = AppendEligible(buf[:0], loc, w, end)
		for _, s := range buf {
			if minutes&(1<<s.Key.Minute) != 0 && set[s.Key] && (len(out) == 0 || !out[len(out)-1].Equal(s.At)) {
				out = append(out, s.At)
			}
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(out, func(a, b time.Time) bool { return a.Equal(b) })
}

func utc(y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
}

func sameTimes(a, b []time.Time) bool {
	return slices.EqualFunc(a, b, func(x, y time.Time) bool { return x.Equal(y) })
}

func asError(err error, target **Error) bool { return errors.As(err, target) }
