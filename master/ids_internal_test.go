package master

import (
	"regexp"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestNewIDsSortInCreationOrder checks the ids of new objects: the
// documented format, no repeats, and text that sorts in creation order,
// within a second and across seconds, so that a store keeps the rows of a
// batch together.
func TestNewIDsSortInCreationOrder(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	g := idSource{clock: clock}
	format := regexp.MustCompile(`^sch_[a-z2-7]{16}$`)
	seen := map[string]bool{}
	prev := ""
	for sec := range 40 {
		for range 300 {
			id := g.newID(prefixSchedule)
			if !format.MatchString(id) {
				t.Fatalf("id %q does not match %s", id, format)
			}
			if seen[id] {
				t.Fatalf("id %q made twice", id)
			}
			seen[id] = true
			if id <= prev {
				t.Fatalf("second %d: id %q sorts before the previous one %q", sec, id, prev)
			}
			prev = id
		}
		// Whole seconds and fractions: the counter restarts each second.
		clock.Advance(700 * time.Millisecond)
	}
}

// TestNewIDsOfTwoSources checks that two sources (two instances, or a
// restart) in the same second do not make the same ids.
func TestNewIDsOfTwoSources(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a, b := idSource{clock: clock}, idSource{clock: clock}
	seen := map[string]bool{}
	for range 1000 {
		for _, g := range []*idSource{&a, &b} {
			id := g.newID(prefixPolicy)
			if seen[id] {
				t.Fatalf("id %q made by both sources", id)
			}
			seen[id] = true
		}
	}
}

// TestNewIDsOfInterleavedBatches checks ids made at the times two batches
// read, one a second after the other, in turns: none made twice, and
// each sorts after the one made before it.
func TestNewIDsOfInterleavedBatches(t *testing.T) {
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	g := idSource{clock: clockwork.NewFakeClockAt(start)}
	seen := map[string]bool{}
	prev := ""
	for i := range 2000 {
		at := start.Add(time.Duration(i%2) * time.Second) // batch A's second, then B's
		id := g.newIDAt(prefixSchedule, at)
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
		if id <= prev {
			t.Fatalf("id %d, %q, sorts before the previous one %q", i, id, prev)
		}
		prev = id
	}
}
