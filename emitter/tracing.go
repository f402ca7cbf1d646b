package emitter

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/schedulerd/schedulerd/internal/tracing"
	"github.com/schedulerd/schedulerd/model"
)

// fireTraceKey holds, in the context of a new fire, the traceparent of its
// span, which its events carry.
type fireTraceKey struct{}

// startPass starts the span of an emitter pass; nil when tracing is off.
func (e *Emitter) startPass(ctx context.Context, partitions int) (context.Context, trace.Span) {
	if e.tracer == nil {
		return ctx, nil
	}
	return e.tracer.Start(ctx, "emitter pass", trace.WithNewRoot(),
		trace.WithAttributes(attribute.Int("schedulerd.partitions", partitions)))
}

// endPass ends the pass span with what the pass did.
func endPass(span trace.Span, st *PassStats, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.Int("schedulerd.fires", st.Fires), attribute.Int("schedulerd.events", st.Events))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// startFire starts the span of the new fire f of s. A fire that a request
// made (trigger, backfill) is a child of the request's span; the others
// start a trace of their own, linked to the pass or request they came
// from. Each links to the request that created s (s.CreatedTrace). The
// span's traceparent goes into the context for the fire's events
// (traceEvents), or onto a fire whose events the background writes
// (traceFire). Nil when tracing is off.
func (e *Emitter) startFire(ctx context.Context, s *model.Schedule, f *model.Fire) (context.Context, trace.Span) {
	if e.tracer == nil {
		return ctx, nil
	}
	var links []trace.Link
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
	if f.Decision != model.FireTriggered && f.Decision != model.FireBackfill {
		opts = append(opts, trace.WithNewRoot())
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("schedulerd.link", "emitted_by")}})
		}
	}
	if l, ok := tracing.Link(s.CreatedTrace, attribute.String("schedulerd.link", "created_by")); ok {
		links = append(links, l)
	}
	opts = append(opts, trace.WithLinks(links...), trace.WithAttributes(
		attribute.String("schedulerd.tenant", s.TenantID),
		attribute.String("schedulerd.schedule.id", s.ID),
		attribute.String("schedulerd.fire.id", f.ID),
		attribute.String("schedulerd.fire.time", f.FireTime.Format(time.RFC3339Nano)),
	))
	ctx, span := e.tracer.Start(ctx, "fire", opts...)
	return context.WithValue(ctx, fireTraceKey{}, tracing.Format(span.SpanContext())), span
}

// endFire ends the fire span with the fire's decision and count.
func endFire(span trace.Span, f *model.Fire) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("schedulerd.fire.decision", string(f.Decision)), attribute.Int("schedulerd.fire.count", f.Count))
	span.End()
}

// traceFire keeps on f, whose events the background writes, the
// traceparent of its span (startFire) for them to carry; nothing when
// tracing is off.
func traceFire(ctx context.Context, f *model.Fire) {
	f.TraceParent, _ = ctx.Value(fireTraceKey{}).(string)
}

// traceEvents gives evs the traceparent of the new fire whose context ctx
// is (startFire); nothing otherwise.
func traceEvents(ctx context.Context, evs []*model.Event) {
	tp, _ := ctx.Value(fireTraceKey{}).(string)
	if tp == "" {
		return
	}
	for _, ev := range evs {
		ev.TraceParent = tp
	}
}
