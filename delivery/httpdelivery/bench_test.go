//go:build unix

package httpdelivery_test

import (
	"context"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/model"
)

// BenchmarkHTTPDeliveryKeepAlive measures deliveries per second to a local
// keep-alive sink answering 200, in batches of 256 events with the default
// concurrency (64). One op is one batch; see the events/s metric. The sink
// runs in the same process, so cpu-us/event (user+system CPU of the process
// per event, client and sink together) is the figure that does not depend on
// what else the machine is doing.
func BenchmarkHTTPDeliveryKeepAlive(b *testing.B) {
	sink := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }
	srv := newBenchServer(b, sink)
	d := newDeliverer(b, httpdelivery.Config{Now: time.Now})
	const batch = 256
	events := make([]*model.Event, batch)
	for i := range events {
		events[i] = testEvent("sch_1.1772366400.v1."+strconv.Itoa(i), srv)
	}
	benchDeliver(b, d, events)
}

// benchDeliver delivers events once per op and reports events/s and the
// process's CPU an event.
func benchDeliver(b *testing.B, d *httpdelivery.Deliverer, events []*model.Event) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start, cpuStart := time.Now(), processCPU(b)
	for b.Loop() {
		for i, res := range d.Deliver(ctx, events) {
			if res.Err != nil {
				b.Fatalf("event %d: %v", i, res.Err)
			}
		}
	}
	elapsed, cpu := time.Since(start), processCPU(b)-cpuStart
	b.ReportMetric(float64(b.N*len(events))/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*len(events)), "cpu-us/event")
}

// processCPU returns the user+system CPU time used by the process so far.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
