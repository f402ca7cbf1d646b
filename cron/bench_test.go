package cron

import (
	"testing"
	"time"
)

// BenchmarkAppendEligibleOneMinute is the emitter's per-zone, per-minute call
// in steady state (dst has capacity): the goal is <= 2 µs and 0 allocs.
func BenchmarkAppendEligibleOneMinute(b *testing.B) {
	loc := mustLoc(b, "America/New_York")
	t0 := utc(2026, 6, 15, 12, 0)
	dst := make([]Slot, 0, 64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w := t0.Add(time.Duration(i%10000) * time.Minute)
		dst = AppendEligible(dst[:0], loc, w, w.Add(time.Minute))
		i++
	}
	if len(dst) == 0 {
		b.Fatal("no slots")
	}
}

func BenchmarkChildrenTypical(b *testing.B) {
	e := mustParse(b, "0 3 * * 1-5")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Children(MaxChildren); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextFireTimes100(b *testing.B) {
	loc := mustLoc(b, "Europe/London")
	e := mustParse(b, "*/15 9-17 * * MON-FRI")
	after := utc(2026, 3, 20, 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		if got := NextFireTimes(e, loc, after, 100); len(got) != 100 {
			b.Fatal(len(got))
		}
	}
}

// BenchmarkNextFireTimesFeb29: the next 3 fires of a schedule due only on
// 29 February, a search over ten years.
func BenchmarkNextFireTimesFeb29(b *testing.B) {
	e := mustParse(b, "0 0 29 2 *")
	after := utc(2026, 1, 1, 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		if got := NextFireTimes(e, time.UTC, after, 3); len(got) != 3 {
			b.Fatal(len(got))
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("*/15 1-3,23 1,L JAN-MAR MON-FRI"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMinGapMinutelyFourYears is the jitter check of a minutely
// schedule in a DST zone: four years of fires, every one a candidate.
func BenchmarkMinGapMinutelyFourYears(b *testing.B) {
	loc := mustLoc(b, "Europe/Berlin")
	e := mustParse(b, "* * * * *")
	from := utc(2026, 12, 2, 0, 0)
	to := from.AddDate(4, 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		if g, _ := MinGap(e, loc, from, to); g != time.Minute {
			b.Fatal(g)
		}
	}
}
