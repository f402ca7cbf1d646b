package handler_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

// BenchmarkDispatchTracing: 20,000 due unthrottled events from the embedded
// store to an in-process sink, as BenchmarkDispatchUnthrottled, with
// tracing off (no provider) and on (every attempt sampled and exported in
// batches to an exporter that drops them). It reports events/s and the
// allocations and CPU time of the whole process per event.
func BenchmarkDispatchTracing(b *testing.B) {
	const n = 20_000
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				st := openStore(b)
				evs := makeEvents(n, evOpts{schedule: "s", url: "http://sink", launch: time.Now().Add(-time.Second)})
				deps := handler.Deps{Store: st, Shards: allShards(1)}
				var tp *sdktrace.TracerProvider
				if on {
					tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
						sdktrace.WithBatcher(tracetest.NewNoopExporter()))
					deps.TracerProvider = tp
					for _, e := range evs {
						e.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" // the fire's
					}
				}
				insert(b, st, evs)
				var done atomic.Int64
				deps.Deliverers = map[model.TargetType]handler.Deliverer{model.TargetHTTP: &sink{}}
				deps.Hooks = handler.Hooks{Attempted: func(*model.Event, delivery.Result, model.EventStatus) { done.Add(1) }}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				cpu0 := processCPU(b)
				b.StartTimer()
				start := time.Now()
				startHandler(b, handler.Config{}, deps)
				end := waitCount(b, &done, n, time.Minute)
				b.StopTimer()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/n, "cpu-us/event")
				b.ReportMetric(float64(n)/end.Sub(start).Seconds(), "events/s")
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/event")
				if tp != nil {
					_ = tp.Shutdown(context.Background())
				}
				b.StartTimer()
			}
		})
	}
}
