package handler_test

import (
	"context"
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

type waitingAges struct {
	handler.NopMetrics
	mu   sync.Mutex
	last map[handler.WaitingKey]time.Duration
}

func (m *waitingAges) OldestWaiting(ages map[handler.WaitingKey]time.Duration) {
	m.mu.Lock()
	m.last = maps.Clone(ages)
	m.mu.Unlock()
}

func (m *waitingAges) get() map[handler.WaitingKey]time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.last)
}

// Events waiting for a token are reported by the age of the oldest, per
// policy and priority class.
func TestOldestWaitingAge(t *testing.T) {
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "one", MaxInFlight: 1, TokenTimeout: time.Hour})
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 2, 59, 0, 0, time.UTC))
	rec := &recorder{}
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) { rec.add(m) }) // never releases
	launch := clock.Now()
	var evs []*model.Event
	// Every launch is after the clock's time, so nothing is due until it moves.
	evs = append(evs, makeEvents(1, evOpts{schedule: "urgent", policy: "one", url: srv.URL, launch: launch.Add(time.Millisecond), priority: 9})...)
	evs = append(evs, makeEvents(2, evOpts{schedule: "urgent2", policy: "one", url: srv.URL, launch: launch.Add(2 * time.Second), priority: 3})...)
	evs = append(evs, makeEvents(2, evOpts{schedule: "plain", policy: "one", url: srv.URL, launch: launch.Add(time.Second)})...)
	evs = append(evs, makeEvents(1, evOpts{schedule: "later", policy: "one", url: srv.URL, launch: launch.Add(time.Hour), priority: -1})...)
	insert(t, st, evs)
	m := &waitingAges{}
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock, Metrics: m,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	// Not yet due: nothing waits.
	h.ReportWaiting()
	if got := m.get(); len(got) != 0 {
		t.Fatalf("ages before any launch: %v", got)
	}
	clock.Advance(2 * time.Second)
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The priority 9 event takes the only token and keeps it.
	waitFor(t, 5*time.Second, "one delivery and four waiting", func() bool {
		return rec.len() == 1 && throttleOf(h).Waiting("one") == 4
	})
	clock.Advance(30 * time.Second)
	h.ReportWaiting()
	want := map[handler.WaitingKey]time.Duration{
		{Policy: "one", Priority: "high"}:    30 * time.Second,
		{Policy: "one", Priority: "default"}: 31 * time.Second,
	}
	if got := m.get(); !maps.Equal(got, want) {
		t.Errorf("ages %v, want %v", got, want)
	}
}
