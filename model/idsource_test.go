package model

import (
	"encoding/binary"
	"regexp"
	"slices"
	"strings"
	"sync"
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
	g := &IDSource{}
	format := regexp.MustCompile(`^sch_[a-z2-7]{16}$`)
	seen := map[string]bool{}
	prev := ""
	for sec := range 40 {
		for range 300 {
			id := g.New("ten_a", PrefixSchedule, clock.Now())
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
	a, b := &IDSource{}, &IDSource{}
	seen := map[string]bool{}
	for range 1000 {
		for _, g := range []*IDSource{a, b} {
			id := g.New("ten_a", PrefixPolicy, clock.Now())
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
	g := &IDSource{}
	seen := map[string]bool{}
	prev := ""
	for i := range 2000 {
		at := start.Add(time.Duration(i%2) * time.Second) // batch A's second, then B's
		id := g.New("ten_a", PrefixSchedule, at)
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

// TestNewIDsOfConcurrentBatches checks the ids that batches reserve at
// once while others do: each batch's ids are consecutive (no id of
// another batch sorts between its first and last), none is made twice,
// and each batch's sort in the order they were made.
func TestNewIDsOfConcurrentBatches(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	g := &IDSource{}
	const batches, size = 8, 500
	got := make([][]string, batches)
	var wg sync.WaitGroup
	for b := range batches {
		wg.Go(func() {
			for range size / 50 {
				got[b] = append(got[b], g.NewN("ten_a", PrefixSchedule, now, 50)...)
			}
		})
	}
	wg.Wait()
	owner := map[string]int{}
	var all []string
	for b, ids := range got {
		if !slices.IsSorted(ids) {
			t.Fatalf("batch %d: ids not in the order made", b)
		}
		for _, id := range ids {
			if _, dup := owner[id]; dup {
				t.Fatalf("id %q made twice", id)
			}
			owner[id] = b
			all = append(all, id)
		}
	}
	slices.Sort(all)
	// Reservations of 50: every run of one batch's ids is a multiple of 50.
	run := 1
	for i := 1; i <= len(all); i++ {
		if i < len(all) && owner[all[i]] == owner[all[i-1]] {
			run++
			continue
		}
		if run%50 != 0 {
			t.Fatalf("a run of %d ids of batch %d ends at %q: a reservation was split", run, owner[all[i-1]], all[i-1])
		}
		run = 1
	}
}

// TestNewIDsRevealNoOtherTenant: the ids a tenant gets in one second step
// by one from each other however many ids other tenants took in between,
// so that two of its consecutive ids do not count the others' creates; and
// the tenants' ids are distinct.
func TestNewIDsRevealNoOtherTenant(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	g := &IDSource{}
	counter := func(id string) uint64 {
		t.Helper()
		b, err := IDText.DecodeString(strings.TrimPrefix(id, PrefixSchedule))
		if err != nil || len(b) != 10 {
			t.Fatalf("id %q: %v", id, err)
		}
		return uint64(b[4])<<40 | uint64(b[5])<<32 | uint64(binary.BigEndian.Uint32(b[6:]))
	}
	seen := map[string]bool{}
	take := func(id string) string {
		t.Helper()
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
		return id
	}
	prev := take(g.New("ten_a", PrefixSchedule, clock.Now()))
	for _, others := range []int{0, 1, 7, 500} {
		for i := range others {
			take(g.New("ten_b", PrefixSchedule, clock.Now()))
			if i%2 == 0 {
				for _, id := range g.NewN("ten_c", PrefixSchedule, clock.Now(), 3) {
					take(id)
				}
			}
		}
		id := take(g.New("ten_a", PrefixSchedule, clock.Now()))
		if d := counter(id) - counter(prev); d != 1 {
			t.Fatalf("after %d ids of other tenants, tenant a's next id is %d after its previous one, want 1", others, d)
		}
		if id <= prev {
			t.Fatalf("tenant a's id %q sorts before its previous one %q", id, prev)
		}
		prev = id
	}
}
