package master

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/schedulerd/schedulerd/internal/tracing"
)

// traceRequests gives every request of an API operation a server span
// named by its route ("POST /v1/events/:id/release"), a child of the trace
// context the request carries (traceparent), so that a consumer's release
// or extend joins the delivery's trace. Handlers see the span in the
// request's context. Probes, metrics, the console and unknown paths get
// none. Installed only when tracing is on.
func (s *Server) traceRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.routeOf(c) == nil {
			return next(c)
		}
		r := c.Request()
		ctx := s.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		route := c.Path()
		ctx, span := s.tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route),
				attribute.String("url.path", r.URL.Path)))
		defer span.End()
		c.SetRequest(r.WithContext(ctx))
		if err := next(c); err != nil {
			c.Error(err) // writes the answer, whose status the span keeps
		}
		status := c.Response().Status
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if who, _ := c.Get(ctxCaller).(*caller); who != nil && who.tenantID != "" {
			span.SetAttributes(attribute.String("schedulerd.tenant", who.tenantID))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
		return nil
	}
}

// injectTrace adds the trace context of the request's span to h, for a
// request this one makes (a forwarded release).
func (s *Server) injectTrace(c echo.Context, h http.Header) {
	if s.tracer != nil {
		s.propagator.Inject(c.Request().Context(), propagation.HeaderCarrier(h))
	}
}

// traceParentOf is the traceparent a schedule created by the request of c
// keeps: "" when tracing is off or the request has no span.
func (s *Server) traceParentOf(c echo.Context) string {
	if s.tracer == nil {
		return ""
	}
	return tracing.TraceParent(c.Request().Context())
}
