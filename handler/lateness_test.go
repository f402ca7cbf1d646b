package handler_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

// timings records the lateness and token wait observations.
type timings struct {
	handler.NopMetrics
	mu        sync.Mutex
	lateness  []time.Duration
	tokenWait []time.Duration
}

func (m *timings) Lateness(d time.Duration) {
	m.mu.Lock()
	m.lateness = append(m.lateness, d)
	m.mu.Unlock()
}

func (m *timings) TokenWait(d time.Duration) {
	m.mu.Lock()
	m.tokenWait = append(m.tokenWait, d)
	m.mu.Unlock()
}

func (m *timings) get() (lateness, wait []time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.lateness), slices.Clone(m.tokenWait)
}

// Two events launched together under maxInFlight 1: the second waits for
// the first one's token. That wait is the policy's, not lateness.
func TestLatenessExcludesTokenWait(t *testing.T) {
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "one", MaxInFlight: 1, AutoRelease: true, TokenTimeout: time.Hour})
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 2, 59, 0, 0, time.UTC))
	arrived := make(chan string, 2)
	answer := make(chan struct{})
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
		arrived <- m.EventID
		<-answer
	})
	defer close(answer)
	launch := clock.Now().Add(10 * time.Second)
	evs := makeEvents(2, evOpts{schedule: "s1", policy: "one", url: srv.URL, launch: launch})
	insert(t, st, evs)
	m := &timings{}
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock, Metrics: m,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Minute)}})
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "2 events in the timer heap", func() bool { return h.Scheduled() == 2 })
	clock.Advance(10 * time.Second)
	<-arrived
	// The first delivery holds the only token for 7 s.
	clock.Advance(7 * time.Second)
	answer <- struct{}{}
	<-arrived
	answer <- struct{}{}
	waitFor(t, 5*time.Second, "both released", func() bool { return allIn(t, st, evs, model.EventReleased) })
	lateness, wait := m.get()
	if !slices.Equal(lateness, []time.Duration{0, 0}) {
		t.Errorf("lateness %v, want [0 0]: the scheduler added no delay", lateness)
	}
	if !slices.Equal(wait, []time.Duration{0, 7 * time.Second}) {
		t.Errorf("token wait %v, want [0 7s]", wait)
	}
}
