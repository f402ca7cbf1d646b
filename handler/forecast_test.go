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
	"github.com/schedulerd/schedulerd/throttle"
)

// A steady consumer holds each of its two tokens for 1 s. After a few
// releases the policy's measured hold time is stored, and the completion
// forecast made from it (remaining events at Policy.Throughput, as the
// fire's eta is) lands within 10% of the finish measured at the end.
func TestForecastMatchesSteadyConsumer(t *testing.T) {
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "p", MaxInFlight: 2, TokenTimeout: time.Hour})
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 2, 59, 0, 0, time.UTC))
	srv := consumer(t, func(delivery.Message, http.ResponseWriter, *http.Request) {})
	launch := clock.Now().Add(10 * time.Second)
	const n = 20
	evs := makeEvents(n, evOpts{schedule: "s1", policy: "p", url: srv.URL, launch: launch})
	insert(t, st, evs)
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Minute)}},
		func(_ *throttle.Config, d *throttle.Deps) { d.Holds = st })
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "events in the timer heap", func() bool { return h.Scheduled() == n })
	clock.Advance(10 * time.Second)
	ctx := context.Background()
	released := 0
	var eta, forecastAt time.Time
	for released < n {
		var held []*model.Event
		waitFor(t, 5*time.Second, "two events delivered", func() bool {
			held = held[:0]
			for _, e := range evs {
				if cur := statusOf(t, st, e.ID); cur.Status == model.EventDelivered {
					held = append(held, cur)
				}
			}
			return len(held) == min(2, n-released)
		})
		clock.Advance(time.Second) // the consumer's steady hold
		for _, e := range held {
			if ok, err := throttleOf(h).Release(ctx, e, clock.Now()); err != nil || !ok {
				t.Fatalf("release %s: %v %v", e.ID, ok, err)
			}
			released++
		}
		if released == 6 {
			var p *model.Policy
			waitFor(t, 5*time.Second, "the hold time stored", func() bool {
				var err error
				p, err = st.PolicyGetByID(ctx, "p")
				return err == nil && p.HoldTime > 0
			})
			drain, ok := p.DrainTime(n - released)
			if !ok {
				t.Fatalf("no throughput for %+v", p)
			}
			forecastAt = clock.Now()
			eta = forecastAt.Add(drain)
		}
	}
	finish := clock.Now()
	took, off := finish.Sub(forecastAt), eta.Sub(finish).Abs()
	if off > took/10 {
		t.Fatalf("forecast %s, finished %s: off by %s of %s, more than 10%%", eta, finish, off, took)
	}
}
