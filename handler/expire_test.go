package handler_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

// Three events under maxInFlight 1 that expire 5 s after their launch: the
// first is delivered and held by its consumer past the expiry; the two
// waiting for its token are then expired, not sent late.
func TestExpiredEventsAreNotSent(t *testing.T) {
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "one", MaxInFlight: 1, AutoRelease: true, TokenTimeout: time.Hour})
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 2, 59, 0, 0, time.UTC))
	var mu sync.Mutex
	var got []string
	arrived := make(chan struct{}, 3)
	answer := make(chan struct{})
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		got = append(got, m.EventID)
		mu.Unlock()
		arrived <- struct{}{}
		<-answer
	})
	defer close(answer)
	launch := clock.Now().Add(10 * time.Second)
	evs := makeEvents(3, evOpts{schedule: "s1", policy: "one", url: srv.URL, launch: launch})
	expire := launch.Add(5 * time.Second)
	for _, e := range evs {
		e.ExpireAt = &expire
	}
	insert(t, st, evs)
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Minute)}})
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "3 events in the timer heap", func() bool { return h.Scheduled() == 3 })
	clock.Advance(10 * time.Second)
	<-arrived
	clock.Advance(6 * time.Second) // past the expiry, the first still held
	answer <- struct{}{}
	waitFor(t, 5*time.Second, "the first released, the others expired", func() bool {
		return allIn(t, st, evs[:1], model.EventReleased) && allIn(t, st, evs[1:], model.EventExpired)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("consumer got %v, want only the first event: nothing is sent after the expiry", got)
	}
	for _, e := range evs[1:] {
		if cur := statusOf(t, st, e.ID); cur.Attempts != 0 || cur.DeliveredAt != nil {
			t.Errorf("%s: attempts %d, deliveredAt %v: an expired event is never attempted", e.ID, cur.Attempts, cur.DeliveredAt)
		}
	}
	// The token goes back in a write of its own after the expiry's.
	waitFor(t, 5*time.Second, "an expired event's token back: tokens in use 0", func() bool {
		p, err := st.PolicyGetByID(context.Background(), "one")
		if err != nil {
			t.Fatal(err)
		}
		return p.InUse == 0
	})
}

// A failed attempt whose retry would come after the event's expiry (its
// maxEventAge) ends it as expired instead of retrying.
func TestRetryPastExpiryExpires(t *testing.T) {
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 2, 59, 0, 0, time.UTC))
	arrived := make(chan struct{}, 4)
	srv := consumer(t, func(_ delivery.Message, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		arrived <- struct{}{}
	})
	launch := clock.Now().Add(10 * time.Second)
	evs := makeEvents(1, evOpts{schedule: "s1", url: srv.URL, launch: launch, maxAttempts: 5})
	expire := launch.Add(time.Second) // shorter than the first backoff
	evs[0].ExpireAt = &expire
	insert(t, st, evs)
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Minute)}})
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the event in the timer heap", func() bool { return h.Scheduled() == 1 })
	clock.Advance(10 * time.Second)
	<-arrived
	waitFor(t, 5*time.Second, "the event expired", func() bool { return allIn(t, st, evs, model.EventExpired) })
	if cur := statusOf(t, st, evs[0].ID); cur.Attempts != 1 {
		t.Errorf("attempts %d, want 1", cur.Attempts)
	}
}
