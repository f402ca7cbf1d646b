package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/throttletest"
	"github.com/schedulerd/schedulerd/throttle"
)

// Holding counts each event the throttle holds once: waiting, or taken for
// a token and not yet Forwarded (its start being written, offered on
// Dispatched, received and not yet queued by the handler), whether it took
// the token in a round or from a release; an event whose start lost
// leaves the count.
func TestHoldingCountsTransit(t *testing.T) {
	st := throttletest.NewMemStore()
	newPolicy(t, st, "p", 3, time.Minute)
	thr, err := throttle.New(throttle.Config{DrainTimeout: time.Second}, throttle.Deps{Store: st, Shards: oneShard{fence: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for s := range thr.Config().Shards {
		thr.MarkSettled(s, 1)
	}
	if err := thr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(thr.Stop)
	items := scheduledEvents(t, st, "p", "s", 10, 1)
	// The store has these under a newer fence: their starts lose.
	lost := scheduledEvents(t, st, "p", "l", 2, 2)
	for i := range lost {
		lost[i].Fence = 1
	}
	thr.Enqueue(append(items, lost...)...)

	// Nothing reads Dispatched: three events hold the tokens and wait to
	// be taken, the lost ones are gone, seven wait.
	waitFor(t, 5*time.Second, "three started, the lost ones dropped", func() bool {
		return thr.Waiting("p") == 7 && holding(t, st, "p") == 3 && inUse(t, st, "p") == 3
	})
	if n := thr.Holding(); n != 10 {
		t.Fatalf("Holding = %d with 7 waiting and 3 in transit, want 10", n)
	}
	it := <-thr.Dispatched()
	if n := thr.Holding(); n != 10 {
		t.Fatalf("Holding = %d with one taken from Dispatched and not forwarded, want 10", n)
	}
	thr.Forwarded([]throttle.Item{it})
	if n := thr.Holding(); n != 9 {
		t.Fatalf("Holding = %d once it is forwarded, want 9", n)
	}

	// Its release hands the token to a waiting event, in transit now.
	if _, err := thr.Release(context.Background(), it.Event, time.Now()); err != nil {
		t.Fatal(err)
	}
	if w := thr.Waiting("p"); w != 6 {
		t.Fatalf("%d waiting after the release, want 6 (one took its token)", w)
	}
	if n := thr.Holding(); n != 9 {
		t.Fatalf("Holding = %d with 6 waiting and 3 in transit, want 9", n)
	}
}
