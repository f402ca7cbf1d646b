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
)

// Two schedules on one policy of 2 tokens held 1 s each by a steady
// consumer (2 events a second): "bulk" with 20 events due within the hour,
// "tight" with 20 due within 15 s. Round robin would give tight every other
// token and finish it after 20 s; tokens go to the least slack first, so
// tight finishes by its deadline.
func TestEDFAcrossSchedulesMeetsTightDeadline(t *testing.T) {
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "p", MaxInFlight: 2, TokenTimeout: time.Hour})
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 2, 59, 0, 0, time.UTC))
	srv := consumer(t, func(delivery.Message, http.ResponseWriter, *http.Request) {})
	launch := clock.Now().Add(10 * time.Second)
	bulk := makeEvents(20, evOpts{schedule: "bulk", policy: "p", url: srv.URL, launch: launch})
	tight := makeEvents(20, evOpts{schedule: "tight", policy: "p", url: srv.URL, launch: launch})
	loose, due := launch.Add(time.Hour), launch.Add(15*time.Second)
	for _, e := range bulk {
		e.Deadline = &loose
	}
	for _, e := range tight {
		e.Deadline = &due
	}
	evs := append(append([]*model.Event{}, bulk...), tight...)
	insert(t, st, evs)
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Minute)}})
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "events in the timer heap", func() bool { return h.Scheduled() == len(evs) })
	clock.Advance(10 * time.Second)
	ctx := context.Background()
	var tightDone time.Time
	for released := 0; released < len(evs); {
		var held []*model.Event
		waitFor(t, 5*time.Second, "two events delivered", func() bool {
			held = held[:0]
			for _, e := range evs {
				if cur := statusOf(t, st, e.ID); cur.Status == model.EventDelivered {
					held = append(held, cur)
				}
			}
			return len(held) == min(2, len(evs)-released)
		})
		clock.Advance(time.Second)
		for _, e := range held {
			if ok, err := throttleOf(h).Release(ctx, e, clock.Now()); err != nil || !ok {
				t.Fatalf("release %s: %v %v", e.ID, ok, err)
			}
			released++
		}
		if tightDone.IsZero() && allIn(t, st, tight, model.EventReleased) {
			tightDone = clock.Now()
		}
	}
	if tightDone.After(due) {
		t.Fatalf("tight finished at +%s, past its deadline +%s", tightDone.Sub(launch), due.Sub(launch))
	}
	if !allIn(t, st, bulk, model.EventReleased) || clock.Now().After(loose) {
		t.Fatalf("bulk not finished within its hour")
	}
	t.Logf("tight finished at +%s (deadline +15s), bulk at +%s", tightDone.Sub(launch), clock.Now().Sub(launch))
}
