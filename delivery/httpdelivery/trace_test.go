package httpdelivery_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/model"
)

// An event's trace context goes as the traceparent header, with
// tracestate when it has one, for an http target and, the first event's,
// for an http_batch request; an event without one sends none.
func TestDeliverCarriesTraceParent(t *testing.T) {
	const tp1, tp2 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b8-01"
	var mu sync.Mutex
	const ts = "vendor=opaque,other=1"
	got := map[string][]string{}    // path -> traceparent headers
	states := map[string][]string{} // path -> tracestate headers
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = r.Header.Values(delivery.TraceParent)
		states[r.URL.Path] = r.Header.Values(delivery.TraceState)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	d := newDeliverer(t, httpdelivery.Config{})
	traced, plain := testEvent("e1", srv.URL+"/one"), testEvent("e2", srv.URL+"/none")
	traced.TraceParent, traced.TraceState = tp1, ts
	stateless := testEvent("e3", srv.URL+"/nostate")
	stateless.TraceParent = tp2
	b1, b2 := batchEvent("b1", srv.URL+"/batch"), batchEvent("b2", srv.URL+"/batch")
	b1.TraceParent, b1.TraceState, b2.TraceParent = tp1, ts, tp2
	for _, evs := range [][]*model.Event{{traced, plain, stateless}, {b1, b2}} {
		for i, r := range d.Deliver(context.Background(), evs) {
			if r.Err != nil {
				t.Fatalf("event %d: %v", i, r.Err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for path, want := range map[string][]string{"/one": {tp1}, "/none": nil, "/nostate": {tp2}, "/batch": {tp1}} {
		if h := got[path]; len(h) != len(want) || len(want) == 1 && h[0] != want[0] {
			t.Errorf("%s: traceparent %q, want %q", path, h, want)
		}
	}
	for path, want := range map[string][]string{"/one": {ts}, "/none": nil, "/nostate": nil, "/batch": {ts}} {
		if h := states[path]; len(h) != len(want) || len(want) == 1 && h[0] != want[0] {
			t.Errorf("%s: tracestate %q, want %q", path, h, want)
		}
	}
}
