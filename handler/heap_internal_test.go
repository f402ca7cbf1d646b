package handler

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// TestItemHeapOrder pushes and pops events at random launch times (some
// beyond what unix nanoseconds hold) and checks each pop is the earliest
// held, against a plain scan.
func TestItemHeapOrder(t *testing.T) {
	seed := testseed.Get(t, "HANDLER_TEST_SEED", 1)
	rng := rand.New(rand.NewPCG(seed, 0))
	base := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	launch := func() time.Time {
		switch rng.IntN(20) {
		case 0:
			return time.Time{} // before 1678
		case 1:
			return time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) // after 2262
		}
		return base.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
	}
	var h itemHeap
	var held []time.Time
	for step := range 5000 {
		if len(held) == 0 || rng.IntN(3) > 0 {
			at := launch()
			h.push(throttle.Item{Event: &model.Event{ID: strconv.Itoa(step), LaunchAt: at}})
			held = append(held, at)
			continue
		}
		got := h.pop().Event.LaunchAt
		min := 0
		for i, at := range held {
			if at.Before(held[min]) {
				min = i
			}
		}
		if got.After(held[min]) {
			t.Fatalf("step %d: popped %v, the earliest held is %v", step, got, held[min])
		}
		for i, at := range held {
			if at.Equal(got) {
				held = append(held[:i], held[i+1:]...)
				break
			}
		}
		if len(h) != len(held) {
			t.Fatalf("step %d: heap holds %d, want %d", step, len(h), len(held))
		}
	}
	// init restores the order after entries are dropped in place.
	kept := h[:0]
	for i, e := range h {
		if i%2 == 0 {
			kept = append(kept, e)
		}
	}
	h = kept
	h.init()
	var last time.Time
	for i := 0; len(h) > 0; i++ {
		at := h.pop().Event.LaunchAt
		if i > 0 && at.Before(last) {
			t.Fatalf("after init: popped %v after %v", at, last)
		}
		last = at
	}
}
