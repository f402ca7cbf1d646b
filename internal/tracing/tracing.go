// Package tracing builds schedulerd's OpenTelemetry trace provider from the
// standard OTEL_* environment variables, and carries trace context in the
// W3C traceparent form that schedules and events keep.
//
// Tracing is off unless an OTLP endpoint or OTEL_TRACES_EXPORTER=otlp is
// configured; off, Setup returns a Tracing whose Provider is nil, and the
// components that take one do no tracing work at all.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of schedulerd's spans.
const ScopeName = "github.com/schedulerd/schedulerd"

// Tracing is the trace provider and propagator the components are given.
type Tracing struct {
	// Provider is nil when tracing is off.
	Provider trace.TracerProvider
	// Propagator injects and extracts trace context (W3C trace context and
	// baggage).
	Propagator propagation.TextMapPropagator
	shutdown   func(context.Context) error
}

// Off is tracing turned off.
func Off() *Tracing { return &Tracing{Propagator: Propagator()} }

// Propagator is the W3C trace context and baggage propagator.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Enabled reports whether spans are recorded.
func (t *Tracing) Enabled() bool { return t != nil && t.Provider != nil }

// Shutdown flushes the spans not exported yet and stops the exporter,
// within ctx.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// Options are what Setup takes besides the environment.
type Options struct {
	// Getenv reads the environment (os.Getenv).
	Getenv func(string) string
	// Logger receives the one line that says exports fail, and the one
	// that says they work again.
	Logger zerolog.Logger
	// ServiceVersion is the service.version resource attribute.
	ServiceVersion string
	// Exporter, if set, replaces the OTLP exporter (tests).
	Exporter sdktrace.SpanExporter
}

// Setup builds the trace provider from the standard variables:
// OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (otlp or none),
// OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _PROTOCOL (http/protobuf
// or grpc), _TIMEOUT, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and the
// sampler's OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, which the SDK
// reads. An endpoint that cannot be reached does not fail it.
func Setup(ctx context.Context, o Options) (*Tracing, error) {
	env := func(k string) string { return strings.TrimSpace(o.Getenv(k)) }
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return Off(), nil
	}
	exporterName := strings.ToLower(env("OTEL_TRACES_EXPORTER"))
	endpoint := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	switch {
	case exporterName == "none":
		return Off(), nil
	case exporterName != "" && exporterName != "otlp":
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER %q: only otlp and none are supported", exporterName)
	case exporterName == "" && !endpoint && o.Exporter == nil:
		return Off(), nil
	}
	exp := o.Exporter
	if exp == nil {
		protocol := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if protocol == "" {
			protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		var err error
		switch protocol {
		case "", "http/protobuf":
			exp, err = otlptracehttp.New(ctx)
		case "grpc":
			exp, err = otlptracegrpc.New(ctx)
		default:
			return nil, fmt.Errorf("tracing: OTLP protocol %q: http/protobuf and grpc are supported", protocol)
		}
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
	}
	// The service name first, so that OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override it.
	attrs := []attribute.KeyValue{attribute.String("service.name", "schedulerd")}
	if o.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", o.ServiceVersion))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The exporter's errors are reported by the wrapper, once; the SDK's
	// own reports go to the log at debug level instead of standard error.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		o.Logger.Debug().Err(err).Msg("opentelemetry")
	}))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&reportingExporter{SpanExporter: exp, log: o.Logger}),
		sdktrace.WithResource(res),
	)
	return &Tracing{Provider: tp, Propagator: Propagator(), shutdown: tp.Shutdown}, nil
}

// reportingExporter logs the first failed export of a run of failures, and
// the first success after one: an unreachable collector is said once, not
// on every batch.
type reportingExporter struct {
	sdktrace.SpanExporter
	log     zerolog.Logger
	mu      sync.Mutex
	failing bool
}

func (r *reportingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := r.SpanExporter.ExportSpans(ctx, spans)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil && !r.failing:
		r.failing = true
		r.log.Warn().Err(err).Msg("tracing: spans cannot be exported; the service runs on and drops them until the endpoint answers")
	case err == nil && r.failing:
		r.failing = false
		r.log.Info().Msg("tracing: spans are exported again")
	}
	return err
}

// Tracer is the tracer of tp, nil when tp is (tracing off).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(ScopeName)
}

// TraceParent is the W3C traceparent of the span context in ctx, "" if it
// has none.
func TraceParent(ctx context.Context) string {
	return Format(trace.SpanContextFromContext(ctx))
}

// Format is the W3C traceparent of sc, "" if it is not valid.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte
	out := append(b[:0], "00-"...)
	tid, sid := sc.TraceID(), sc.SpanID()
	out = appendHex(out, tid[:])
	out = append(out, '-')
	out = appendHex(out, sid[:])
	out = append(out, '-')
	return string(appendHex(out, []byte{byte(sc.TraceFlags())}))
}

func appendHex(dst, src []byte) []byte {
	const digits = "0123456789abcdef"
	for _, c := range src {
		dst = append(dst, digits[c>>4], digits[c&0xf])
	}
	return dst
}

// Parse returns the remote span context of the W3C traceparent s; not
// valid if s is not one.
func Parse(s string) trace.SpanContext {
	if s == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": s})
	return trace.SpanContextFromContext(ctx)
}

// WithParent returns ctx with the remote span context of traceparent as
// its parent, ctx itself if traceparent is not valid.
func WithParent(ctx context.Context, traceparent string) context.Context {
	sc := Parse(traceparent)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Link is a link to the span context of traceparent, and whether it is
// valid.
func Link(traceparent string, attrs ...attribute.KeyValue) (trace.Link, bool) {
	sc := Parse(traceparent)
	return trace.Link{SpanContext: sc, Attributes: attrs}, sc.IsValid()
}

// LogHook adds trace_id and span_id to a log line whose event carries a
// context (zerolog's Ctx) with a valid span context.
type LogHook struct{}

// Run implements zerolog.Hook.
func (LogHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	sc := trace.SpanContextFromContext(e.GetCtx())
	if sc.IsValid() {
		e.Str("trace_id", sc.TraceID().String()).Str("span_id", sc.SpanID().String())
	}
}
