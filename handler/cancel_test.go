package handler_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

// A schedule paused after the handler prefetched its events: whatever the
// handler still sends must not be recorded as cancelled.
func TestPauseRacingPrefetchedFire(t *testing.T) {
	st := openStore(t)
	rec := &recorder{}
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) { rec.add(m) })
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 2, 59, 0, 0, time.UTC))
	evs := makeEvents(5, evOpts{schedule: "s1", url: srv.URL, launch: clock.Now().Add(28 * time.Second)})
	insert(t, st, evs)
	var attempted atomic.Int32
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)},
		Hooks:      handler.Hooks{Attempted: func(*model.Event, delivery.Result, model.EventStatus) { attempted.Add(1) }}})
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "5 events in the timer heap", func() bool { return h.Scheduled() == 5 })
	// The pause: the master cancels the fire's waiting events.
	if _, err := st.EventCancelPending(context.Background(), "s1", "", clock.Now()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(28 * time.Second)
	waitFor(t, 5*time.Second, "5 outcomes", func() bool { return attempted.Load() == 5 })
	sent := map[string]bool{}
	for _, r := range rec.all() {
		sent[r.msg.EventID] = true
	}
	for _, e := range evs {
		cur := statusOf(t, st, e.ID)
		switch {
		case sent[e.ID] && cur.Status != model.EventReleased:
			t.Errorf("%s was delivered but the store says %s", e.ID, cur.Status)
		case sent[e.ID] && cur.DeliveredAt == nil:
			t.Errorf("%s was delivered but has no DeliveredAt", e.ID)
		case !sent[e.ID] && cur.Status != model.EventCancelled:
			t.Errorf("%s was not delivered but the store says %s", e.ID, cur.Status)
		}
	}
}
