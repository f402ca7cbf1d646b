package handler

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/tracing"
	"github.com/schedulerd/schedulerd/model"
)

// startAttempts starts the span of each event's delivery attempt, a child
// of the span of the fire that made it (Event.TraceParent), and replaces
// evs[j] with a copy whose TraceParent (and TraceState, if the span has
// one) is the attempt's, which the deliverer sends on. Nil, and evs unchanged, when tracing is off.
func (h *Handler) startAttempts(ctx context.Context, tt model.TargetType, evs []*model.Event) []trace.Span {
	if h.deps.TracerProvider == nil {
		return nil
	}
	tracer := h.deps.TracerProvider.Tracer(tracing.ScopeName)
	kind := trace.SpanKindClient
	if tt == model.TargetSQS {
		kind = trace.SpanKindProducer
	}
	spans := make([]trace.Span, len(evs))
	for j, ev := range evs {
		_, span := tracer.Start(tracing.WithParent(ctx, ev.TraceParent), "deliver", trace.WithSpanKind(kind),
			trace.WithAttributes(
				attribute.String("schedulerd.tenant", ev.TenantID),
				attribute.String("schedulerd.schedule.id", ev.ScheduleID),
				attribute.String("schedulerd.fire.id", ev.FireID),
				attribute.String("schedulerd.event.id", ev.ID),
				attribute.String("schedulerd.target.type", string(tt)),
				attribute.Int("schedulerd.attempt", ev.Attempts+1),
			))
		e := *ev
		sc := span.SpanContext()
		e.TraceParent, e.TraceState = tracing.Format(sc), ""
		if ts := sc.TraceState(); ts.Len() > 0 {
			e.TraceState = ts.String()
		}
		evs[j], spans[j] = &e, span
	}
	return spans
}

// endAttempts ends the spans of startAttempts with the results rs.
func endAttempts(spans []trace.Span, rs []delivery.Result) {
	for j, span := range spans {
		if j < len(rs) {
			r := rs[j]
			if r.StatusCode != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", r.StatusCode))
			}
			if r.Err != nil {
				span.SetAttributes(attribute.Bool("schedulerd.delivery.permanent", r.Permanent))
				if r.RetryAfter > 0 {
					span.SetAttributes(attribute.String("schedulerd.delivery.retry_after", strconv.FormatInt(r.RetryAfter.Milliseconds(), 10)+"ms"))
				}
				span.SetStatus(codes.Error, r.Err.Error())
			}
		}
		span.End()
	}
}
