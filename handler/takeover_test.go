package handler_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// A new owner of a shard takes over events that its previous owner had
// scheduled. Those already due may have been delivered by it just before it
// died; the ones whose consumer acknowledged them (released) meanwhile are
// not sent again, the others are.
func TestTakeoverSkipsAcknowledgedEvents(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	// The grace runs on the fake clock: it is over only when the test
	// advances it, after the acknowledgements.
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC))
	rec := &recorder{now: clock.Now}
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) { rec.add(m) })
	evs := makeEvents(20, evOpts{schedule: "s1", url: srv.URL, launch: clock.Now().Add(-time.Second)})
	insert(t, st, evs)
	// The previous owner (fence 1) claimed them all and delivered them,
	// then died.
	for shard := range testShards {
		if _, err := st.EventClaimDue(ctx, &store.EventClaimParams{Shard: shard, Fence: 1, DueBefore: clock.Now(), Limit: 100}); err != nil {
			t.Fatal(err)
		}
	}
	const grace = 500 * time.Millisecond
	h := startHandler(t, handler.Config{TakeoverGrace: grace}, handler.Deps{Store: st, Shards: allShards(2), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	waitFor(t, 5*time.Second, "the new owner's claim", func() bool { return h.Scheduled() == len(evs) })
	for _, e := range evs {
		if f := statusOf(t, st, e.ID).Fence; f != 2 {
			t.Fatalf("event %s claimed under fence %d, want 2", e.ID, f)
		}
	}
	// The consumer's acknowledgements of the even ones land after the
	// takeover, within the grace.
	now := clock.Now()
	for _, e := range evs {
		if e.Index%2 != 0 {
			continue
		}
		res, err := st.EventTransition(ctx, []store.EventTransition{{ID: e.ID, From: model.EventScheduled,
			To: model.EventReleased, FinishedAt: &now, At: now}})
		if err != nil || res[0] != nil {
			t.Fatalf("ack %s: %v %v (sent before the grace was over?)", e.ID, err, res)
		}
	}
	if n := rec.len(); n != 0 {
		t.Fatalf("%d events sent before the takeover grace was over", n)
	}
	clock.Advance(grace)
	waitFor(t, 10*time.Second, "all released", func() bool { return allIn(t, st, evs, model.EventReleased) })
	// Stop drains: every send made has reached the consumer.
	h.Stop()
	got := map[int]int{}
	for _, r := range rec.all() {
		got[r.msg.Index]++
	}
	for _, e := range evs {
		want := e.Index % 2 // odd ones were not acknowledged: sent once
		if got[e.Index] != want {
			t.Errorf("event %d delivered %d times by the new owner, want %d", e.Index, got[e.Index], want)
		}
	}
}
