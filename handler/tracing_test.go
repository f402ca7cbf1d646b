package handler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/internal/tracing"
	"github.com/schedulerd/schedulerd/model"
)

// refusing fails every delivery and records the traceparent each event
// came with.
type refusing struct {
	mu   sync.Mutex
	sent map[string]string // event id -> traceparent
}

func (r *refusing) Deliver(_ context.Context, evs []*model.Event) []delivery.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]delivery.Result, len(evs))
	for i, e := range evs {
		r.sent[e.ID] = e.TraceParent
		out[i] = delivery.Result{Err: errors.New("refused"), StatusCode: 500}
	}
	return out
}

// With tracing on, each attempt has a span, child of its event's fire
// span, whose traceparent the deliverer gets; a failed one has an error
// status, and its log line names the trace. Without a provider, the
// deliverer gets the event as it is.
func TestDeliverySpans(t *testing.T) {
	const fire = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "On", false: "Off"}[on], func(t *testing.T) {
			st := openStore(t)
			evs := makeEvents(2, evOpts{schedule: "s", url: "http://sink", launch: time.Now().Add(-time.Second), maxAttempts: 1})
			for _, e := range evs {
				e.TraceParent = fire
			}
			insert(t, st, evs)
			rec := tracetest.NewSpanRecorder()
			var logs lockedLog
			d := &refusing{sent: map[string]string{}}
			var attempted sync.WaitGroup
			attempted.Add(len(evs))
			deps := handler.Deps{Store: st, Shards: allShards(1), Logger: zerolog.New(&logs),
				Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: d},
				Hooks:      handler.Hooks{Attempted: func(*model.Event, delivery.Result, model.EventStatus) { attempted.Done() }}}
			if on {
				deps.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			}
			startHandler(t, handler.Config{}, deps)
			attempted.Wait()

			d.mu.Lock()
			defer d.mu.Unlock()
			if !on {
				for id, tp := range d.sent {
					if tp != fire {
						t.Errorf("event %s reached the deliverer with %q, want its own %q", id, tp, fire)
					}
				}
				if n := len(rec.Ended()); n != 0 {
					t.Errorf("%d spans with tracing off", n)
				}
				return
			}
			spans := rec.Ended()
			if len(spans) != len(evs) {
				t.Fatalf("%d spans, want one an attempt (%d)", len(spans), len(evs))
			}
			parent := tracing.Parse(fire)
			for _, s := range spans {
				id := ""
				for _, a := range s.Attributes() {
					if a.Key == "schedulerd.event.id" {
						id = a.Value.AsString()
					}
				}
				if s.Name() != "deliver" || s.Parent().SpanID() != parent.SpanID() || s.SpanContext().TraceID() != parent.TraceID() {
					t.Errorf("span %s of %s: parent %v, want the fire span %v", s.Name(), id, s.Parent(), parent)
				}
				if got := d.sent[id]; got != tracing.Format(s.SpanContext()) {
					t.Errorf("event %s reached the deliverer with %q, want its attempt's %q", id, got, tracing.Format(s.SpanContext()))
				}
				if s.Status().Code != codes.Error {
					t.Errorf("failed attempt's span status %v, want error", s.Status())
				}
			}
			waitFor(t, 5*time.Second, "the failure's log line", func() bool { return len(logs.lines(t, "delivery failed")) > 0 })
			if l := logs.lines(t, "delivery failed")[0]; l["trace_id"] != parent.TraceID().String() {
				t.Errorf("failure line %v, want trace_id %s", l, parent.TraceID())
			}
		})
	}
}
