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

// countingDeliverer counts Deliver calls and the events sent before their
// launch instant.
type countingDeliverer struct {
	handler.Deliverer
	mu           sync.Mutex
	calls, early int
	events       int
}

func (d *countingDeliverer) Deliver(ctx context.Context, evs []*model.Event) []delivery.Result {
	now := time.Now()
	d.mu.Lock()
	d.calls++
	d.events += len(evs)
	for _, e := range evs {
		if now.Before(e.LaunchAt) {
			d.early++
		}
	}
	d.mu.Unlock()
	return d.Deliverer.Deliver(ctx, evs)
}

// Events launched 1 ms apart go a few per wake of the timer (LaunchGap),
// in fewer deliveries than events, and none before its launch instant.
func TestSpreadLaunchesShareWakes(t *testing.T) {
	const n = 100
	st := openStore(t)
	srv := consumer(t, func(_ delivery.Message, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	evs := makeEvents(n, evOpts{schedule: "s1", url: srv.URL, launch: time.Now().Add(200 * time.Millisecond), spread: (n - 1) * time.Millisecond})
	insert(t, st, evs)
	d := &countingDeliverer{Deliverer: httpDeliverer(t, 5*time.Second)}
	startHandler(t, handler.Config{PrefetchInterval: 50 * time.Millisecond},
		handler.Deps{Store: st, Shards: allShards(1), Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: d}})
	waitFor(t, 10*time.Second, "all released", func() bool { return allIn(t, st, evs, model.EventReleased) })
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.events != n || d.early != 0 {
		t.Fatalf("%d events sent, %d before their launch instant; want %d, 0", d.events, d.early, n)
	}
	// A 4 ms gap makes about 25 deliveries; a wake per launch instant 100.
	if d.calls > n/2 {
		t.Fatalf("%d events took %d deliveries; want them to share wakes (at most %d)", n, d.calls, n/2)
	}
}

// An event due after the gap that followed the previous wake goes at its
// own launch instant: the gap only groups launches closer together.
func TestLaunchAfterTheGapIsNotHeld(t *testing.T) {
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 2, 59, 0, 0, time.UTC))
	arrived := make(chan string, 2)
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) { arrived <- m.EventID })
	launch := clock.Now().Add(10 * time.Second)
	a := makeEvents(1, evOpts{schedule: "a", url: srv.URL, launch: launch})
	b := makeEvents(1, evOpts{schedule: "b", url: srv.URL, launch: launch.Add(10 * time.Millisecond)})
	insert(t, st, append(a, b...))
	m := &timings{}
	h := startHandler(t, handler.Config{LaunchGap: 4 * time.Millisecond}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock, Metrics: m,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Minute)}})
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "2 events in the timer heap", func() bool { return h.Scheduled() == 2 })
	clock.Advance(10 * time.Second)
	if id := <-arrived; id != a[0].ID {
		t.Fatalf("first delivery %s, want %s", id, a[0].ID)
	}
	// Exactly at b's launch, 10 ms after the previous wake.
	clock.Advance(10 * time.Millisecond)
	select {
	case id := <-arrived:
		if id != b[0].ID {
			t.Fatalf("second delivery %s, want %s", id, b[0].ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event due after the gap was not sent at its launch instant")
	}
	waitFor(t, 5*time.Second, "both released", func() bool { return allIn(t, st, append(a, b...), model.EventReleased) })
	if lateness, _ := m.get(); !slices.Equal(lateness, []time.Duration{0, 0}) {
		t.Errorf("lateness %v, want [0 0]", lateness)
	}
}
