package cron

import (
	"strings"
	"testing"
	"time"
)

func TestNextFireTimesEdges(t *testing.T) {
	// Its speed is BenchmarkNextFireTimesFeb29's.
	e := mustParse(t, "0 0 29 2 *")
	got := NextFireTimes(e, time.UTC, utc(2026, 1, 1, 0, 0), 3)
	want := []time.Time{utc(2028, 2, 29, 0, 0), utc(2032, 2, 29, 0, 0), utc(2036, 2, 29, 0, 0)}
	if !sameTimes(got, want) {
		t.Errorf("Feb 29: %v, want %v", got, want)
	}
	cases := []struct {
		name  string
		e     *Expr
		after time.Time
		k     int
		want  []time.Time
	}{
		{"k zero", mustParse(t, "* * * * *"), utc(2026, 1, 1, 0, 0), 0, nil},
		{"nil expr", nil, utc(2026, 1, 1, 0, 0), 5, nil},
		{"strictly after", mustParse(t, "0 * * * *"), utc(2026, 1, 1, 1, 0), 2,
			[]time.Time{utc(2026, 1, 1, 2, 0), utc(2026, 1, 1, 3, 0)}},
		{"sub-second after", mustParse(t, "0 * * * *"), utc(2026, 1, 1, 0, 59).Add(59*time.Second + 999*time.Millisecond), 1,
			[]time.Time{utc(2026, 1, 1, 1, 0)}},
		{"bounded search returns fewer", mustParse(t, "0 0 29 2 *"), utc(2080, 1, 1, 0, 0), 100, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := NextFireTimes(c.e, time.UTC, c.after, c.k)
			if c.name == "bounded search returns fewer" {
				if len(got) == 0 || len(got) >= 100 || got[len(got)-1].After(c.after.AddDate(31, 0, 0)) {
					t.Errorf("got %d times up to %v", len(got), got[len(got)-1])
				}
				return
			}
			if !sameTimes(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestAppendEligibleWindow(t *testing.T) {
	cases := []struct {
		name   string
		t0, t1 time.Time
		want   int // distinct instants
	}{
		{"one minute", utc(2026, 5, 1, 0, 0), utc(2026, 5, 1, 0, 1), 1},
		{"empty", utc(2026, 5, 1, 0, 0), utc(2026, 5, 1, 0, 0), 0},
		{"reversed", utc(2026, 5, 1, 0, 1), utc(2026, 5, 1, 0, 0), 0},
		{"unaligned start rounds up", utc(2026, 5, 1, 0, 0).Add(time.Nanosecond), utc(2026, 5, 1, 0, 2), 1},
		{"unaligned end includes its minute", utc(2026, 5, 1, 0, 0), utc(2026, 5, 1, 0, 1).Add(time.Nanosecond), 2},
		{"an hour", utc(2026, 5, 1, 0, 0), utc(2026, 5, 1, 1, 0), 60},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := AppendEligible(nil, time.UTC, c.t0, c.t1)
			seen := map[time.Time]bool{}
			for _, s := range got {
				if s.At.Location() != time.UTC || s.At.Second() != 0 {
					t.Fatalf("slot %v not a UTC minute", s)
				}
				seen[s.At] = true
			}
			if len(seen) != c.want {
				t.Errorf("%d instants, want %d", len(seen), c.want)
			}
		})
	}
	// 2026-05-01 is a Friday: check the exact key list of one minute.
	got := AppendEligible(nil, time.UTC, utc(2026, 5, 1, 7, 5), utc(2026, 5, 1, 7, 6))
	var ks []string
	for _, s := range got {
		ks = append(ks, s.Key.String())
	}
	want := "[H:07@05 H:*@05 W:5:07@05 W:5:*@05 W:5#1:07@05 W:5#1:*@05 M:01:07@05 M:01:*@05 MO:05:07@05 MO:05:*@05 " +
		"MM:05:01:07@05 MM:05:01:*@05 MW:05:5:07@05 MW:05:5:*@05 MW:05:5#1:07@05 MW:05:5#1:*@05]"
	if s := "[" + strings.Join(ks, " ") + "]"; s != want {
		t.Errorf("keys = %s\nwant   %s", s, want)
	}
}

func TestAppendEligibleNoAllocs(t *testing.T) {
	loc := mustLoc(t, "Australia/Lord_Howe")
	dst := make([]Slot, 0, 64)
	w := utc(2026, 10, 3, 15, 30) // the gap end: the heaviest minute
	allocs := testing.AllocsPerRun(100, func() {
		dst = AppendEligible(dst[:0], loc, w, w.Add(time.Minute))
	})
	if allocs != 0 {
		t.Errorf("AppendEligible allocates %v times per call", allocs)
	}
}
