package cron

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

// spanZones are the zones of the oracle test plus Berlin: every kind of
// transition, both hemispheres, half hours and none at all.
var spanZones = []string{"America/New_York", "Europe/London", "Europe/Berlin", "Australia/Lord_Howe",
	"Asia/Kolkata", "Pacific/Chatham", "America/Sao_Paulo", "UTC"}

// TestZoneSpans checks every span zoneAt returns against time.Time offsets:
// it contains the instant, the offset holds at both of its ends, and prevOff
// is the offset just before it. Past 2037 Go's own ZoneBounds breaks the
// first two on the last day of leap years.
func TestZoneSpans(t *testing.T) {
	for _, name := range spanZones {
		loc := mustLoc(t, name)
		for y := 2030; y <= 2100; y++ {
			// Every 10 minutes around the turn of the year, every 7h13m elsewhere.
			for sec := utc(y, 12, 29, 0, 0).Unix(); sec < utc(y+1, 1, 3, 0, 0).Unix(); sec += 600 {
				checkSpan(t, name, loc, sec)
			}
			for sec := utc(y, 1, 3, 0, 0).Unix(); sec < utc(y, 12, 29, 0, 0).Unix(); sec += 7*3600 + 13*60 {
				checkSpan(t, name, loc, sec)
			}
		}
	}
}

// FuzzZoneSpans is TestZoneSpans at any second from 1900 to 2200.
func FuzzZoneSpans(f *testing.F) {
	f.Add(uint8(0), utc(2040, 12, 31, 12, 0).Unix())
	f.Add(uint8(2), utc(2041, 1, 1, 0, 0).Unix()-1)
	f.Add(uint8(3), utc(2026, 10, 3, 15, 30).Unix())
	locs := make([]*time.Location, len(spanZones))
	for i, name := range spanZones {
		locs[i] = mustLoc(f, name)
	}
	lo, hi := utc(1900, 1, 1, 0, 0).Unix(), utc(2200, 1, 1, 0, 0).Unix()
	f.Fuzz(func(t *testing.T, zone uint8, sec int64) {
		i := int(zone) % len(spanZones)
		checkSpan(t, spanZones[i], locs[i], lo+((sec%(hi-lo))+(hi-lo))%(hi-lo))
	})
}

func checkSpan(t *testing.T, name string, loc *time.Location, sec int64) {
	t.Helper()
	offset := func(sec int64) int64 {
		_, o := time.Unix(sec, 0).In(loc).Zone()
		return int64(o)
	}
	z := zoneAt(loc, sec)
	at := time.Unix(sec, 0).UTC()
	if z.start > sec || z.end <= sec {
		t.Fatalf("%s at %v: span [%v, %v) does not contain it", name, at,
			time.Unix(z.start, 0).UTC(), time.Unix(z.end, 0).UTC())
	}
	if want := offset(sec); z.off != want {
		t.Fatalf("%s at %v: offset %d, want %d", name, at, z.off, want)
	}
	if z.start != math.MinInt64 {
		if got := offset(z.start); got != z.off {
			t.Fatalf("%s at %v: offset at span start %v is %d, span says %d", name, at, time.Unix(z.start, 0).UTC(), got, z.off)
		}
		if want := offset(z.start - 1); z.prevOff != want {
			t.Fatalf("%s at %v: prevOff %d, want %d", name, at, z.prevOff, want)
		}
	}
	if z.end != math.MaxInt64 {
		if got := offset(z.end - 1); got != z.off {
			t.Fatalf("%s at %v: offset just before span end %v is %d, span says %d", name, at, time.Unix(z.end, 0).UTC(), got, z.off)
		}
	}
}

// TestNextFireTimesPast2037 covers fires that were lost where Go's zone
// bounds end a span a day early (the last day of leap years past 2037).
func TestNextFireTimesPast2037(t *testing.T) {
	hourly := func(from time.Time, n int) []time.Time {
		var out []time.Time
		for i := range n {
			out = append(out, from.Add(time.Duration(i)*time.Hour))
		}
		return out
	}
	cases := []struct {
		name, zone, expr string
		after            time.Time
		want             []time.Time
	}{
		// 12:00 EST is 17:00Z; 12:00 CET is 11:00Z.
		{"Dec 31 in New York", "America/New_York", "0 12 31 12 *", utc(2040, 6, 1, 0, 0),
			[]time.Time{utc(2040, 12, 31, 17, 0), utc(2041, 12, 31, 17, 0), utc(2042, 12, 31, 17, 0)}},
		{"Jan 1 in Berlin", "Europe/Berlin", "0 12 1 1 *", utc(2040, 6, 1, 0, 0),
			[]time.Time{utc(2041, 1, 1, 11, 0), utc(2042, 1, 1, 11, 0), utc(2043, 1, 1, 11, 0)}},
		{"hourly over the turn of 2041 in New York", "America/New_York", "0 * * * *", utc(2040, 12, 30, 22, 30),
			hourly(utc(2040, 12, 30, 23, 0), 24*5)},
		{"Feb 29 in New York", "America/New_York", "30 23 29 2 *", utc(2040, 1, 1, 0, 0),
			[]time.Time{utc(2040, 3, 1, 4, 30), utc(2044, 3, 1, 4, 30), utc(2048, 3, 1, 4, 30)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loc := mustLoc(t, c.zone)
			got := NextFireTimes(mustParse(t, c.expr), loc, c.after, len(c.want))
			if !sameTimes(got, c.want) {
				t.Errorf("NextFireTimes(%q, %s, %v) = %v\nwant %v", c.expr, c.zone, c.after, got, c.want)
			}
			kids, err := mustParse(t, c.expr).Children(1 << 20)
			if err != nil {
				t.Fatal(err)
			}
			last := c.want[len(c.want)-1]
			if last.Sub(c.after) > 8*24*time.Hour {
				return // AppendEligible is checked on the windows with dense fires
			}
			slots := boundedEligible(t, loc, c.after, last.Add(time.Minute))
			if fires := firesOf(kids, slots); !sameTimes(fires, c.want) {
				t.Errorf("AppendEligible fires of %q in %s: %v\nwant %v", c.expr, c.zone, fires, c.want)
			}
		})
	}
	for _, c := range cases[:2] { // yearly: check a window around the one fire
		t.Run(c.name+" eligible", func(t *testing.T) {
			loc := mustLoc(t, c.zone)
			kids, err := mustParse(t, c.expr).Children(1 << 20)
			if err != nil {
				t.Fatal(err)
			}
			fire := c.want[0]
			slots := boundedEligible(t, loc, fire.Add(-72*time.Hour), fire.Add(72*time.Hour))
			if fires := firesOf(kids, slots); !sameTimes(fires, c.want[:1]) {
				t.Errorf("AppendEligible fires of %q in %s: %v, want %v", c.expr, c.zone, fires, c.want[:1])
			}
		})
	}
}

// TestAppendEligibleLeapYearEnd is the spin: on the last day of a leap year
// past 2037 AppendEligible used to loop forever on a span that ended before
// the minute it was asked about. A day has 1440 minutes and, in December,
// no transition.
func TestAppendEligibleLeapYearEnd(t *testing.T) {
	for _, zone := range []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe"} {
		t.Run(zone, func(t *testing.T) {
			loc := mustLoc(t, zone)
			t0 := utc(2040, 12, 31, 0, 0)
			slots := boundedEligible(t, loc, t0, t0.Add(24*time.Hour))
			seen := map[time.Time]bool{}
			for _, s := range slots {
				if s.Key.Class == ClassH && s.Key.Hour == -1 {
					if seen[s.At] {
						t.Fatalf("H:* listed twice at %v", s.At)
					}
					seen[s.At] = true
				}
			}
			if len(seen) != 1440 {
				t.Fatalf("H:* listed at %d instants, want 1440", len(seen))
			}
		})
	}
}

// boundedEligible runs AppendEligible over [t0, t1) in day windows, as the
// emitter does, and fails the test if it does not return: a bug there spins
// rather than errs. The deadline is a hang detector, not a speed bound.
func boundedEligible(t *testing.T, loc *time.Location, t0, t1 time.Time) []Slot {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	done := make(chan []Slot, 1)
	go func() {
		var out []Slot
		for w := t0; w.Before(t1); w = w.Add(24 * time.Hour) {
			end := w.Add(24 * time.Hour)
			if end.After(t1) {
				end = t1
			}
			out = AppendEligible(out, loc, w, end)
		}
		done <- out
	}()
	select {
	case out := <-done:
		return out
	case <-ctx.Done():
		t.Fatalf("AppendEligible(%s, %v, %v) did not return", loc, t0, t1)
		return nil
	}
}

// firesOf returns the distinct instants, ascending, at which a key of kids
// is among slots.
func firesOf(kids []Key, slots []Slot) []time.Time {
	set := make(map[Key]bool, len(kids))
	for _, k := range kids {
		set[k] = true
	}
	var out []time.Time
	for _, s := range slots {
		if set[s.Key] {
			out = append(out, s.At)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return slices.CompactFunc(out, time.Time.Equal)
}

// TestSearchBounds checks the searches zoneAt falls back on against New
// York's 2026 transitions: 2026-03-08 07:00Z (EST to EDT) and 2026-11-01
// 06:00Z (EDT to EST).
func TestSearchBounds(t *testing.T) {
	loc := mustLoc(t, "America/New_York")
	const est, edt = -5 * 3600, -4 * 3600
	spring, fall := utc(2026, 3, 8, 7, 0).Unix(), utc(2026, 11, 1, 6, 0).Unix()
	cases := []struct {
		name      string
		got, want int64
	}{
		{"end before fall-back", searchEnd(loc, fall-3*3600-17, edt), fall},
		{"end one second before fall-back", searchEnd(loc, fall-1, edt), fall},
		{"end before spring-forward", searchEnd(loc, spring-20*3600, est), spring},
		{"end without a transition within a day", searchEnd(loc, fall+3600, est), fall + 3600 + secondsPerDay},
		{"start after fall-back", searchStart(loc, fall+5*3600+3, est), fall},
		{"start at fall-back", searchStart(loc, fall, est), fall},
		{"start after spring-forward", searchStart(loc, spring+23*3600, edt), spring},
		{"start without a transition within a day", searchStart(loc, spring-3600, est), spring - 3600 - secondsPerDay},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, time.Unix(c.got, 0).UTC(), time.Unix(c.want, 0).UTC())
		}
	}
}
