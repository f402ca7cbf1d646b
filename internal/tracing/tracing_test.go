package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/schedulerd/schedulerd/internal/tracing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Tracing is off unless an endpoint or the otlp exporter is named, and
// OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none turn it off; what it
// cannot honour is refused.
func TestSetupFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		enabled bool
		err     string
	}{
		{"Nothing", nil, false, ""},
		{"Endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, ""},
		{"TracesEndpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, ""},
		{"ExporterOTLP", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{"GRPC", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, ""},
		{"Disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false, ""},
		{"ExporterNone", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false, ""},
		{"OtherExporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, "OTEL_TRACES_EXPORTER"},
		{"OtherProtocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"}, false, "protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := tracing.Setup(t.Context(), tracing.Options{Getenv: env(tc.env)})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Setup: %v, want an error naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Shutdown(context.Background())
			if tr.Enabled() != tc.enabled || (tr.Provider == nil) == tc.enabled {
				t.Errorf("enabled %v (provider %v), want %v", tr.Enabled(), tr.Provider, tc.enabled)
			}
			if tr.Propagator == nil {
				t.Error("no propagator")
			}
		})
	}
}

// failingExporter fails every export until ok is set.
type failingExporter struct {
	tracetest.InMemoryExporter
	ok bool
}

func (f *failingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if !f.ok {
		return errors.New("connection refused")
	}
	return f.InMemoryExporter.ExportSpans(ctx, spans)
}

// Failed exports are said once, until one succeeds again.
func TestExportFailuresLoggedOnce(t *testing.T) {
	var logs bytes.Buffer
	exp := &failingExporter{}
	tr, err := tracing.Setup(t.Context(), tracing.Options{Getenv: env(nil), Exporter: exp, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	provider := tr.Provider.(*sdktrace.TracerProvider)
	export := func() {
		_, span := tracing.Tracer(tr.Provider).Start(t.Context(), "x")
		span.End()
		_ = provider.ForceFlush(t.Context())
	}
	for range 3 {
		export()
	}
	if n := strings.Count(logs.String(), "cannot be exported"); n != 1 {
		t.Fatalf("%d lines say exports fail after 3 failures, want 1:\n%s", n, logs.String())
	}
	exp.ok = true
	export()
	exp.ok = false
	export()
	if n, back := strings.Count(logs.String(), "cannot be exported"), strings.Count(logs.String(), "exported again"); n != 2 || back != 1 {
		t.Errorf("after a success and a failure: %d failure lines, %d recovery lines; want 2 and 1:\n%s", n, back, logs.String())
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

func TestFormatParse(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := tracing.Parse(tp)
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() {
		t.Fatalf("Parse(%q) = %+v", tp, sc)
	}
	if got := tracing.Format(sc); got != tp {
		t.Errorf("Format = %q, want %q", got, tp)
	}
	for _, bad := range []string{"", "00-0-0-0", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "zz"} {
		if tracing.Parse(bad).IsValid() {
			t.Errorf("Parse(%q) is valid", bad)
		}
	}
	if tracing.TraceParent(context.Background()) != "" {
		t.Error("a context without a span has a traceparent")
	}
	ctx := tracing.WithParent(context.Background(), tp)
	if got := tracing.TraceParent(ctx); got != tp {
		t.Errorf("TraceParent(WithParent) = %q", got)
	}
}

// FuzzParse: whatever Parse accepts, Format writes back so that Parse
// reads the same span context.
func FuzzParse(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		sc := tracing.Parse(s)
		if !sc.IsValid() {
			return
		}
		again := tracing.Parse(tracing.Format(sc))
		if !again.Equal(sc.WithTraceState(trace.TraceState{})) && !again.Equal(sc) {
			t.Fatalf("Parse(%q) = %v, its Format parses to %v", s, sc, again)
		}
	})
}

// The log hook adds the span of a line's context, and nothing without one.
func TestLogHook(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf).Hook(tracing.LogHook{})
	ctx := tracing.WithParent(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	log.Info().Ctx(ctx).Msg("with")
	log.Info().Msg("without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if !strings.Contains(lines[0], `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) || !strings.Contains(lines[0], `"span_id":"00f067aa0ba902b7"`) {
		t.Errorf("line with a span: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("line without a span: %s", lines[1])
	}
}
