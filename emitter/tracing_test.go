package emitter_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/internal/tracing"
	"github.com/schedulerd/schedulerd/model"
)

// spanNamed returns the ended spans of rec named name.
func spanNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// With tracing on, a pass's fire starts a trace of its own, linked to the
// pass and to the request that created the schedule, and its events carry
// the fire span's traceparent; a triggered fire is a child of the
// trigger's span. With tracing off, events carry none.
func TestFireSpans(t *testing.T) {
	const created = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	t.Run("On", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		st := openEmbedded(t)
		clk := newClock(utc("2025-06-02T10:00:30Z"))
		e := newEmitter(t, st, clk, func(_ *emitter.Config, d *emitter.Deps) { d.TracerProvider = tp })
		s := sched("traced", "*/5 * * * *", "UTC", 2, func(s *model.Schedule) { s.CreatedTrace = created })
		create(t, st, s)
		runPass(t, e)

		passes, fires := spanNamed(rec, "emitter pass"), spanNamed(rec, "fire")
		if len(passes) != 1 || len(fires) != 1 {
			t.Fatalf("%d pass spans and %d fire spans, want 1 and 1", len(passes), len(fires))
		}
		fire := fires[0]
		if fire.Parent().IsValid() {
			t.Errorf("the fire span has parent %v, want a trace of its own", fire.Parent())
		}
		var toPass, toCreate bool
		for _, l := range fire.Links() {
			toPass = toPass || l.SpanContext.SpanID() == passes[0].SpanContext().SpanID()
			toCreate = toCreate || tracing.Format(l.SpanContext) == created
		}
		if !toPass || !toCreate {
			t.Errorf("fire span links %v: to the pass %v, to the creating request %v", fire.Links(), toPass, toCreate)
		}
		want := tracing.Format(fire.SpanContext())
		evs := eventsOf(t, st, firesOf(t, st, s.ID)[0].ID)
		for _, ev := range evs {
			if ev.TraceParent != want {
				t.Errorf("event %s: traceparent %q, want the fire span's %q", ev.ID, ev.TraceParent, want)
			}
		}

		// A trigger inside a request's span.
		ctx, req := tp.Tracer("test").Start(context.Background(), "POST /v1/schedules/:id/trigger")
		if _, err := e.Trigger(ctx, s, clk.Now()); err != nil {
			t.Fatal(err)
		}
		req.End()
		fires = spanNamed(rec, "fire")
		if len(fires) != 2 || fires[1].Parent().SpanID() != req.SpanContext().SpanID() {
			t.Errorf("the triggered fire's span is not a child of the trigger's: %v", fires)
		}
	})
	t.Run("Off", func(t *testing.T) {
		st := openEmbedded(t)
		clk := newClock(utc("2025-06-02T10:00:30Z"))
		e := newEmitter(t, st, clk, nil)
		s := sched("plain", "*/5 * * * *", "UTC", 2, func(s *model.Schedule) { s.CreatedTrace = created })
		create(t, st, s)
		// A context with a span: tracing off still starts none.
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), tracing.Parse(created))
		if _, err := e.RunPass(ctx); err != nil {
			t.Fatal(err)
		}
		for _, ev := range eventsOf(t, st, firesOf(t, st, s.ID)[0].ID) {
			if ev.TraceParent != "" {
				t.Errorf("event %s carries %q with tracing off", ev.ID, ev.TraceParent)
			}
		}
	})
}

// The events of a fire written in the background carry the fire span's
// traceparent, which the fire keeps for them; with tracing off the fire
// keeps none.
func TestBackgroundEventsCarryTheFireSpan(t *testing.T) {
	for _, on := range []bool{true, false} {
		rec := tracetest.NewSpanRecorder()
		st := openEmbedded(t)
		clk := newClock(utc("2025-06-02T10:00:30Z"))
		emitted := make(chan *model.Fire, 16)
		e := newEmitter(t, st, clk, func(c *emitter.Config, d *emitter.Deps) {
			largeConfig(c)
			d.Emitted = emitted
			if on {
				d.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			}
		})
		s := sched("big", "*/5 * * * *", "UTC", largeN)
		create(t, st, s)
		startEmitter(t, e)
		runPass(t, e)
		fs := firesOf(t, st, s.ID)
		if len(fs) != 1 {
			t.Fatalf("tracing %v: %d fires, want 1", on, len(fs))
		}
		f := waitFire(t, emitted, fs[0].ID)
		requireAllEvents(t, st, f, largeN)
		want := ""
		if on {
			fires := spanNamed(rec, "fire")
			if len(fires) != 1 {
				t.Fatalf("%d fire spans, want 1", len(fires))
			}
			want = tracing.Format(fires[0].SpanContext())
		}
		if f.TraceParent != want {
			t.Errorf("tracing %v: the fire keeps %q, want %q", on, f.TraceParent, want)
		}
		for _, ev := range eventsOf(t, st, f.ID) {
			if ev.TraceParent != want {
				t.Fatalf("tracing %v: event %s: traceparent %q, want the fire span's %q", on, ev.ID, ev.TraceParent, want)
			}
		}
	}
}
