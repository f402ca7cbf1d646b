package emitter

import (
	"testing"
	"time"
)

func TestRate(t *testing.T) {
	m0 := time.Date(2025, 6, 2, 10, 0, 0, 0, time.UTC)
	due := m0.Add(-time.Hour)

	t.Run("CountsPerTenantAndMinute", func(t *testing.T) {
		r := newRate(2 * time.Minute)
		if !r.take("a", "", due, 60, 100, m0) || r.take("a", "", due, 41, 100, m0.Add(59*time.Second)) {
			t.Fatal("60 then 41 of 100 in one minute: want the first in, the second out")
		}
		if !r.take("b", "", due, 100, 100, m0) {
			t.Fatal("another tenant's count was charged")
		}
		if !r.take("a", "", due, 100, 100, m0.Add(time.Minute)) {
			t.Fatal("the count did not start over in the next minute")
		}
	})
	t.Run("OnlyTheHeadTakesRoom", func(t *testing.T) {
		r := newRate(2 * time.Minute)
		r.enqueue("a", "first", due, m0)
		r.enqueue("a", "second", due, m0) // same fire time: arrival decides
		r.enqueue("a", "earlier", due.Add(-time.Second), m0)
		if r.take("a", "", due, 1, 100, m0) {
			t.Fatal("a new fire passed a tenant with deferred fires")
		}
		for _, id := range []string{"first", "second"} {
			if r.take("a", id, due, 1, 100, m0) {
				t.Fatalf("%s took room before the earlier fire", id)
			}
		}
		if !r.take("a", "earlier", due, 1, 100, m0) {
			t.Fatal("the head was refused")
		}
		if next := r.done("a", "earlier"); next != "first" {
			t.Fatalf("after the head: %q, want first", next)
		}
		if r.take("a", "second", due, 1, 100, m0) || !r.take("a", "first", due, 1, 100, m0) {
			t.Fatal("arrival order not kept for fires due at the same time")
		}
	})
	t.Run("RefusedChunkJoinsQueue", func(t *testing.T) {
		r := newRate(2 * time.Minute)
		if !r.take("a", "big", due, 100, 100, m0) || r.take("a", "big", due, 100, 100, m0) {
			t.Fatal("want one chunk of 100 in, the next out")
		}
		if r.take("a", "", due, 1, 100, m0.Add(time.Minute)) {
			t.Fatal("a new fire passed a fire waiting for room")
		}
	})
	t.Run("StaleHeadIsDropped", func(t *testing.T) {
		r := newRate(2 * time.Minute)
		r.enqueue("a", "gone", due, m0)
		r.enqueue("a", "live", due, m0)
		if r.take("a", "live", due, 1, 100, m0.Add(2*time.Minute)) {
			t.Fatal("the head was dropped before it went stale")
		}
		if !r.take("a", "live", due, 1, 100, m0.Add(2*time.Minute+time.Second)) {
			t.Fatal("a head that stopped asking still holds the queue")
		}
	})
	t.Run("GiveBack", func(t *testing.T) {
		r := newRate(2 * time.Minute)
		r.take("a", "", due, 100, 100, m0)
		r.give("a", 100, m0)
		if !r.take("a", "", due, 100, 100, m0) {
			t.Fatal("room given back was not free")
		}
	})
}
