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
	"go.opentelemetry.io/otel/trace"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/internal/tracing"
	"github.com/schedulerd/schedulerd/model"
)

// refusing fails every delivery and records the traceparent and
// tracestate each event came with.
type refusing struct {
	mu     sync.Mutex
	sent   map[string]string // event id -> traceparent
	states map[string]string // event id -> tracestate
}

func (r *refusing) Deliver(_ context.Context, evs []*model.Event) []delivery.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]delivery.Result, len(evs))
	for i, e := range evs {
		r.sent[e.ID], r.states[e.ID] = e.TraceParent, e.TraceState
		out[i] = delivery.Result{Err: errors.New("refused"), StatusCode: 500}
	}
	return out
}

// stating samples every span and gives it a tracestate entry, as a
// vendor's sampler may.
type stating struct{}

func (stating) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	ts, _ := trace.SpanContextFromContext(p.ParentContext).TraceState().Insert("vendor", "opaque")
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: ts}
}

func (stating) Description() string { return "stating" }

// With tracing on, each attempt has a span, child of its event's fire
// span, whose traceparent and tracestate the deliverer gets; a failed one
// has an error status, and its log line names the trace and the attempt's
// span. Without a provider, the deliverer gets the event as it is.
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
			d := &refusing{sent: map[string]string{}, states: map[string]string{}}
			var attempted sync.WaitGroup
			attempted.Add(len(evs))
			deps := handler.Deps{Store: st, Shards: allShards(1), Logger: zerolog.New(&logs),
				Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: d},
				Hooks:      handler.Hooks{Attempted: func(*model.Event, delivery.Result, model.EventStatus) { attempted.Done() }}}
			if on {
				deps.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(stating{}))
			}
			startHandler(t, handler.Config{}, deps)
			attempted.Wait()

			d.mu.Lock()
			defer d.mu.Unlock()
			if !on {
				for id, tp := range d.sent {
					if tp != fire || d.states[id] != "" {
						t.Errorf("event %s reached the deliverer with %q %q, want its own %q and no tracestate", id, tp, d.states[id], fire)
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
			spanOf := map[string]string{} // event id -> its attempt's span id
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
				spanOf[id] = s.SpanContext().SpanID().String()
				if got := d.sent[id]; got != tracing.Format(s.SpanContext()) {
					t.Errorf("event %s reached the deliverer with %q, want its attempt's %q", id, got, tracing.Format(s.SpanContext()))
				}
				if got := d.states[id]; got != "vendor=opaque" {
					t.Errorf("event %s reached the deliverer with tracestate %q, want its attempt's %q", id, got, "vendor=opaque")
				}
				if s.Status().Code != codes.Error {
					t.Errorf("failed attempt's span status %v, want error", s.Status())
				}
			}
			waitFor(t, 5*time.Second, "the failure's log line", func() bool { return len(logs.lines(t, "delivery failed")) > 0 })
			l := logs.lines(t, "delivery failed")[0]
			if id, _ := l["eventId"].(string); l["trace_id"] != parent.TraceID().String() || l["span_id"] != spanOf[id] {
				t.Errorf("failure line %v, want trace_id %s and the attempt's span_id", l, parent.TraceID())
			}
		})
	}
}
