package app_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/tracing"
)

// keptSpans is an in-memory exporter that keeps its spans past the
// provider's shutdown (tracetest's forgets them then).
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// logLines is a log writer safe for concurrent use that signals each line
// containing want.
type logLines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func newLogLines(want string) *logLines { return &logLines{want: want, seen: make(chan struct{}, 100)} }

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.want != "" && bytes.Contains(p, []byte(l.want)) {
		l.seen <- struct{}{}
	}
	return l.buf.Write(p)
}

func (l *logLines) lines() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// A one-off created by a traced request is delivered to a consumer on
// 127.0.0.1 with a traceparent of the exported delivery span, whose parent
// is the fire's span, which links to the creating request's trace; the
// consumer's extend and release with that traceparent join the
// delivery's trace, and the log line of the release carries its trace_id
// and span_id.
func TestTracedDelivery(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	logs := newLogLines("")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := startAppLog(t, ctx, map[string]string{"SCHEDULER_HTTP_ALLOW_CIDRS": "127.0.0.0/8"},
		app.Hooks{SpanExporter: exp}, zerolog.New(logs).Level(zerolog.DebugLevel))
	defer a.Shutdown(ctx)
	call := caller(t, ctx, "http://"+a.Addr())
	key := tenantKey(a, call)
	// Throttled, so that the event holds a token to extend.
	pol := call(http.MethodPost, key, "/v1/policies", map[string]any{"name": "p", "maxInFlight": 1, "tokenTimeout": "10m"}, http.StatusCreated)

	type got struct{ traceparent, releaseTP string }
	delivered := make(chan got, 1)
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m delivery.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		tp := r.Header.Get("traceparent")
		// The consumer's own span, a child of the delivery's, releases.
		sc := tracing.Parse(tp)
		releaseTP := ""
		if sc.IsValid() {
			releaseTP = "00-" + sc.TraceID().String() + "-0102030405060708-01"
		}
		for _, url := range []string{strings.TrimSuffix(m.Release.URL, "/release") + "/extend", m.Release.URL} {
			body, _ := json.Marshal(map[string]string{"token": m.Release.Token})
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if releaseTP != "" {
				req.Header.Set("traceparent", releaseTP)
			}
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("%s: %v %v", url, err, resp)
			}
		}
		w.WriteHeader(http.StatusOK)
		delivered <- got{tp, releaseTP}
	}))
	defer consumer.Close()

	// The creating request carries a trace of its own.
	const createTrace = "0af7651916cd43dd8448eb211c80319c"
	body, _ := json.Marshal(map[string]any{
		"name": "traced", "runAt": time.Now().Add(time.Second).UTC().Format(time.RFC3339), "eventCount": 1, "policyId": pol["id"],
		"target": map[string]any{"type": "http", "url": consumer.URL + "/hook"},
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a.Addr()+"/v1/schedules", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+createTrace+"-b7ad6b7169203331-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: status %d", resp.StatusCode)
	}

	var g got
	select {
	case g = <-delivered:
	case <-ctx.Done():
		t.Fatal("not delivered")
	}
	if err := a.Shutdown(ctx); err != nil { // flushes the spans
		t.Fatal(err)
	}
	sent := tracing.Parse(g.traceparent)
	if !sent.IsValid() {
		t.Fatalf("delivery's traceparent %q is not a valid one", g.traceparent)
	}
	spans := exp.GetSpans()
	byName := func(name string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	var deliver, fire *tracetest.SpanStub
	for _, s := range byName("deliver") {
		if s.SpanContext.SpanID() == sent.SpanID() {
			deliver = &s
		}
	}
	if deliver == nil {
		t.Fatalf("no exported deliver span has the span id of the traceparent sent, %s; spans: %v", g.traceparent, names(spans))
	}
	if deliver.SpanContext.TraceID() != sent.TraceID() {
		t.Errorf("deliver span's trace %s, traceparent's %s", deliver.SpanContext.TraceID(), sent.TraceID())
	}
	for _, s := range byName("fire") {
		if s.SpanContext.SpanID() == deliver.Parent.SpanID() {
			fire = &s
		}
	}
	if fire == nil {
		t.Fatalf("the deliver span's parent %s is no exported fire span", deliver.Parent.SpanID())
	}
	linked := false
	for _, l := range fire.Links {
		linked = linked || l.SpanContext.TraceID().String() == createTrace
	}
	if !linked {
		t.Errorf("the fire span's links %v do not reach the creating request's trace %s", fire.Links, createTrace)
	}
	creates := byName("POST /v1/schedules")
	if len(creates) != 1 || creates[0].SpanContext.TraceID().String() != createTrace || creates[0].SpanKind != trace.SpanKindServer {
		t.Errorf("create spans %v, want one server span in trace %s", creates, createTrace)
	}
	for _, op := range []string{"extend", "release"} {
		spans := byName("POST /v1/events/:id/" + op)
		if len(spans) != 1 || spans[0].SpanContext.TraceID() != sent.TraceID() || spans[0].Parent.SpanID().String() != "0102030405060708" {
			t.Fatalf("%s spans %v, want one in the delivery's trace %s, child of the consumer's span", op, spans, sent.TraceID())
		}
	}
	releases := byName("POST /v1/events/:id/release")
	// The log line of the release carries its span.
	found := false
	for _, l := range logs.lines() {
		if l["message"] == "api request" && l["route"] == "/v1/events/:id/release" {
			found = true
			if l["trace_id"] != sent.TraceID().String() || l["span_id"] != releases[0].SpanContext.SpanID().String() {
				t.Errorf("release log line %v, want trace_id %s span_id %s", l, sent.TraceID(), releases[0].SpanContext.SpanID())
			}
		}
	}
	if !found {
		t.Error("no log line of the release")
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// otlpReceiver is a local OTLP/HTTP trace receiver: it decodes each export
// request's protobuf body and keeps the span names with their service.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string]string // span name -> service.name
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, _ := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(raw, &req) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans[s.Name] = service
			}
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// The service configured by the standard variables exports its spans to a
// local OTLP/HTTP receiver, named as OTEL_SERVICE_NAME says.
func TestTracesExportedByOTLP(t *testing.T) {
	recv := &otlpReceiver{spans: map[string]string{}}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "schedulerd-test")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := startApp(t, ctx, nil, app.Hooks{})
	call := caller(t, ctx, "http://"+a.Addr())
	tenantKey(a, call)
	if err := a.Shutdown(ctx); err != nil { // flushes the spans
		t.Fatal(err)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if svc, ok := recv.spans["POST /v1/tenants"]; !ok || svc != "schedulerd-test" {
		t.Errorf("received spans %v, want POST /v1/tenants of service schedulerd-test", recv.spans)
	}
}

// With its OTLP endpoint unreachable the service answers on, and says so
// once in the log however many exports fail.
func TestUnreachableTraceEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10") // export every 10ms
	const said = "spans cannot be exported"
	logs := newLogLines(said)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := startAppLog(t, ctx, nil, app.Hooks{}, zerolog.New(logs).Level(zerolog.InfoLevel))
	defer a.Shutdown(ctx)
	call := caller(t, ctx, "http://"+a.Addr())
	key := tenantKey(a, call)
	select {
	case <-logs.seen:
	case <-ctx.Done():
		t.Fatal("the failed export was not logged")
	}
	// More spans, more failed exports: the service answers on.
	for range 3 {
		call(http.MethodGet, key, "/v1/schedules", nil, http.StatusOK)
	}
	if err := a.Shutdown(ctx); err != nil { // a last failed export
		t.Fatal(err)
	}
	n := 0
	for _, l := range logs.lines() {
		if msg, _ := l["message"].(string); strings.Contains(msg, said) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d log lines say the export fails, want 1", n)
	}
}

var _ sdktrace.SpanExporter = keptSpans{}
