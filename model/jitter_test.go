package model_test

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

func TestJitterOffset(t *testing.T) {
	at := time.Date(2027, 1, 4, 9, 0, 0, 0, time.UTC)
	const j = 15 * time.Minute
	t.Run("Deterministic", func(t *testing.T) {
		if a, b := model.JitterOffset("sch_a", at, j), model.JitterOffset("sch_a", at.In(time.FixedZone("x", 3600)), j); a != b {
			t.Fatalf("%v then %v", a, b)
		}
	})
	t.Run("NoneWithoutJitter", func(t *testing.T) {
		for _, d := range []time.Duration{0, -time.Minute, time.Millisecond - 1} {
			if got := model.JitterOffset("sch_a", at, d); got != 0 {
				t.Fatalf("jitter %v: offset %v", d, got)
			}
		}
	})
	// A thousand schedules on one cron: offsets are whole milliseconds in
	// [0, j), spread over the whole range (each quarter gets about a
	// quarter), and differ between schedules.
	t.Run("BoundedAndSpread", func(t *testing.T) {
		var quarters [4]int
		seen := map[time.Duration]bool{}
		for i := range 1000 {
			id := "sch_" + time.Duration(i).String()
			off := model.JitterOffset(id, at, j)
			if off < 0 || off >= j || off%time.Millisecond != 0 {
				t.Fatalf("%s: offset %v", id, off)
			}
			quarters[off*4/j]++
			seen[off] = true
		}
		for q, n := range quarters {
			if n < 200 || n > 300 {
				t.Fatalf("quarter %d has %d of 1000 offsets: %v", q, n, quarters)
			}
		}
		if len(seen) < 990 {
			t.Fatalf("only %d distinct offsets of 1000 schedules", len(seen))
		}
	})
}
