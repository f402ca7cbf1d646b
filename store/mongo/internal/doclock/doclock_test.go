package doclock

import (
	"runtime"
	"sync"
	"testing"
)

// TestConflictingWritesTakeTurns runs read-modify-write cycles on shared
// counters, yielding between the read and the write as FerretDB does
// between its find and its write. Under the locks no increment is lost;
// whole-collection writes (ids unknown) take part too.
func TestConflictingWritesTakeTurns(t *testing.T) {
	var s Set
	counters := map[string]int{"a": 0, "b": 0}
	var mu sync.Mutex // guards the map itself, not the cycle
	get := func(id string) int { mu.Lock(); defer mu.Unlock(); return counters[id] }
	set := func(id string, v int) { mu.Lock(); defer mu.Unlock(); counters[id] = v }
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				id := []string{"a", "b"}[(w+r)%2]
				var h *Held
				if r%10 == 0 {
					h = s.Lock("events") // e.g. an updateMany
				} else {
					h = s.Lock("events", id)
				}
				v := get(id)
				runtime.Gosched()
				set(id, v+1)
				s.Unlock(h)
			}
		})
	}
	wg.Wait()
	if got := counters["a"] + counters["b"]; got != workers*rounds {
		t.Fatalf("%d increments counted of %d: the locks let conflicting writes overlap", got, workers*rounds)
	}
}

// TestUnrelatedWritesDoNotWait holds one document's lock and takes others
// in the same goroutine: if any waited for the first, the test would hang.
func TestUnrelatedWritesDoNotWait(t *testing.T) {
	var s Set
	held := s.Lock("events", "a")
	s.Unlock(s.Lock("leases", "a")) // same _id, other collection
	id := "b"
	for stripe("events", id) == stripe("events", "a") {
		id += "b"
	}
	s.Unlock(s.Lock("events", id)) // same collection, other document
	s.Unlock(held)
	s.Unlock(s.Lock("events")) // the whole collection, once it is free
}
