package handler_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/throttle"
)

// processCPU is the CPU time (user and system) the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sink is an in-process consumer: every delivery succeeds at once.
type sink struct {
	n     atomic.Int64
	onDel func(now time.Time, evs []*model.Event)
}

func (s *sink) Deliver(_ context.Context, evs []*model.Event) []delivery.Result {
	if s.onDel != nil {
		s.onDel(time.Now(), evs)
	}
	s.n.Add(int64(len(evs)))
	return make([]delivery.Result, len(evs))
}

func benchHandler(b *testing.B, st *embedded.Store, cfg handler.Config, sk *sink, hooks handler.Hooks, opts ...throttleOpt) *handler.Handler {
	b.Helper()
	return startHandler(b, cfg, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: sk}, Hooks: hooks}, opts...)
}

func waitCount(b *testing.B, c *atomic.Int64, n int64, limit time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(limit)
	for c.Load() < n {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d after %s", c.Load(), n, limit)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Now()
}

func benchBatch() int {
	if v, err := strconv.Atoi(os.Getenv("BENCH_MAXBATCH")); err == nil {
		return v
	}
	return 0
}

// BenchmarkDispatchUnthrottled: 100,000 due unthrottled events from the
// embedded store to an in-process sink, claim + deliver + released write.
func BenchmarkDispatchUnthrottled(b *testing.B) {
	const n = 100_000
	for range b.N {
		b.StopTimer()
		st := openStore(b)
		insert(b, st, makeEvents(n, evOpts{schedule: "s", url: "http://sink", launch: time.Now().Add(-time.Second)}))
		var done atomic.Int64
		sk := &sink{}
		b.StartTimer()
		start := time.Now()
		ts := &timed{Store: st}
		startHandler(b, handler.Config{MaxBatch: benchBatch()}, handler.Deps{Store: ts, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: sk}, Hooks: handler.Hooks{Attempted: func(*model.Event, delivery.Result, model.EventStatus) { done.Add(1) }}})
		end := waitCount(b, &done, n, time.Minute)
		b.Logf("claims %d total %s; transitions %d (%d events) total %s", ts.claimN.Load(), time.Duration(ts.claimT.Load()), ts.trN.Load(), ts.trEv.Load(), time.Duration(ts.trT.Load()))
		rate := float64(n) / end.Sub(start).Seconds()
		b.ReportMetric(rate, "events/s")
		b.Logf("%d events dispatched and recorded in %s: %.0f events/s", n, end.Sub(start).Round(time.Millisecond), rate)
	}
}

// BenchmarkLatenessSteady1000: 10,000 events launched at a steady 1,000/s;
// lateness = delivery start minus launch time. cpu-us/event is the CPU time
// of the whole test process (handler, store, sink) over the run, per event:
// a spread's cost per wake-up of the handler, without HTTP.
func BenchmarkLatenessSteady1000(b *testing.B) {
	const n = 10_000
	for range b.N {
		b.StopTimer()
		st := openStore(b)
		launch := time.Now().Add(2 * time.Second)
		insert(b, st, withDeadlines(makeEvents(n, evOpts{schedule: "s", url: "http://sink", launch: launch, spread: (n - 1) * time.Millisecond})))
		var mu sync.Mutex
		late := make([]time.Duration, 0, n)
		var got atomic.Int64
		sk := &sink{onDel: func(now time.Time, evs []*model.Event) {
			mu.Lock()
			for _, e := range evs {
				late = append(late, now.Sub(e.LaunchAt))
			}
			mu.Unlock()
			got.Add(int64(len(evs)))
		}}
		cpu0 := processCPU(b)
		b.StartTimer()
		benchHandler(b, st, handler.Config{}, sk, handler.Hooks{})
		waitCount(b, &got, n, time.Minute)
		b.StopTimer()
		b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/n, "cpu-us/event")
		mu.Lock()
		p50, p99, worst := percentile(late, 0.5), percentile(late, 0.99), percentile(late, 1)
		mu.Unlock()
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
		b.Logf("lateness at 1,000 events/s over %d events: p50 %s p99 %s max %s (min %s)", n, p50, p99, worst, late[0])
	}
}

// BenchmarkFireLatenessHTTP: 40 events launched over 400 ms to a consumer
// over HTTP on 127.0.0.1; lateness = receipt minus launch time.
func BenchmarkFireLatenessHTTP(b *testing.B) {
	const n = 40
	for range b.N {
		b.StopTimer()
		st := openStore(b)
		rec := &recorder{}
		srv := consumer(b, func(m delivery.Message, _ http.ResponseWriter, _ *http.Request) { rec.add(m) })
		evs := makeEvents(n, evOpts{schedule: "s", url: srv.URL, launch: time.Now().Add(500 * time.Millisecond), spread: 400 * time.Millisecond})
		insert(b, st, evs)
		launch := map[string]time.Time{}
		for _, e := range evs {
			launch[e.ID] = e.LaunchAt
		}
		b.StartTimer()
		startHandler(b, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(b, 5*time.Second)}})
		waitFor(b, time.Minute, "all delivered", func() bool { return rec.len() == n })
		b.StopTimer()
		late := make([]time.Duration, 0, n)
		for _, r := range rec.all() {
			late = append(late, r.at.Sub(launch[r.msg.EventID]))
		}
		p50, worst := percentile(late, 0.5), percentile(late, 1)
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
	}
}

// BenchmarkBurst100k: 100,000 events due at one instant (prefetched within
// the horizon beforehand); time from that instant until the last delivery.
func BenchmarkBurst100k(b *testing.B) {
	const n = 100_000
	for range b.N {
		b.StopTimer()
		st := openStore(b)
		launch := time.Now().Add(25 * time.Second)
		insert(b, st, makeEvents(n, evOpts{schedule: "s", url: "http://sink", launch: launch}))
		var done atomic.Int64
		sk := &sink{}
		claimStart := time.Now()
		h := benchHandler(b, st, handler.Config{MaxScheduled: n}, sk, handler.Hooks{Attempted: func(*model.Event, delivery.Result, model.EventStatus) { done.Add(1) }})
		for h.Scheduled() < n && time.Now().Before(launch) {
			time.Sleep(5 * time.Millisecond)
		}
		b.Logf("claimed %d events into memory in %s", h.Scheduled(), time.Since(claimStart).Round(time.Millisecond))
		if h.Scheduled() < n {
			b.Logf("warning: not all events were claimed before the launch instant")
		}
		time.Sleep(time.Until(launch))
		b.StartTimer()
		lastDelivered := waitCount(b, &sk.n, n, time.Minute)
		lastWritten := waitCount(b, &done, n, time.Minute)
		b.StopTimer()
		b.ReportMetric(lastDelivered.Sub(launch).Seconds(), "s-to-last-delivery")
		b.ReportMetric(lastWritten.Sub(launch).Seconds(), "s-to-last-write")
		b.Logf("burst of %d: last delivered %s after the instant, last outcome written %s after",
			n, lastDelivered.Sub(launch).Round(time.Millisecond), lastWritten.Sub(launch).Round(time.Millisecond))
	}
}

// BenchmarkThrottledRate: a policy with maxInFlight 100 and a consumer that
// releases 10 ms after receipt (through the handler's Throttle, as the master
// of the same instance does, so that tokens are handed over in process): the
// bound is 100 / 10 ms = 10,000 events/s.
func BenchmarkThrottledRate(b *testing.B) {
	const n = 40_000
	for range b.N {
		b.StopTimer()
		st := openStore(b)
		createPolicy(b, st, &model.Policy{ID: "pol", MaxInFlight: 100, TokenTimeout: time.Minute})
		if benchDeadlines() {
			// Ten schedules with deadlines: the queue ranks them by slack.
			for i := range 10 {
				insert(b, st, withDeadlines(makeEvents(n/10, evOpts{schedule: fmt.Sprintf("s%d", i), policy: "pol", url: "http://sink", launch: time.Now().Add(-time.Second)})))
			}
		} else {
			insert(b, st, makeEvents(n, evOpts{schedule: "s", policy: "pol", url: "http://sink", launch: time.Now().Add(-time.Second)}))
		}
		var h *handler.Handler
		var released atomic.Int64
		var inFlight, maxIn atomic.Int64
		var firstAt atomic.Int64
		// Where a token cycle's time goes beyond the consumer's 10 ms: the
		// consumer's timer firing late, and the release call (its durable
		// commit, which also starts the next event).
		var mu sync.Mutex
		var timerLate, releaseCall []time.Duration
		ctx := context.Background()
		sk := &sink{onDel: func(now time.Time, evs []*model.Event) {
			firstAt.CompareAndSwap(0, now.UnixNano())
			for _, e := range evs {
				if v := inFlight.Add(1); v > maxIn.Load() {
					maxIn.Store(v)
				}
				id := e.ID
				due := time.Now().Add(10 * time.Millisecond)
				time.AfterFunc(10*time.Millisecond, func() {
					start := time.Now()
					inFlight.Add(-1)
					cur, err := st.EventGetByID(ctx, id)
					if err == nil {
						_, err = throttleOf(h).Release(ctx, cur, time.Now())
					}
					if err != nil {
						b.Error(err)
					}
					took := time.Since(start)
					mu.Lock()
					timerLate = append(timerLate, start.Sub(due))
					releaseCall = append(releaseCall, took)
					mu.Unlock()
					released.Add(1)
				})
			}
		}}
		b.StartTimer()
		h = benchHandler(b, st, handler.Config{}, sk, handler.Hooks{}, func(c *throttle.Config, _ *throttle.Deps) {
			c.AcquireBatch, c.EarlyDispatch = 100, os.Getenv("EARLY_DISPATCH") != "0"
		})
		waitCount(b, &sk.n, 1, 30*time.Second)
		// Measure the steady state: from the 2,000th to the 38,000th delivery.
		waitCount(b, &sk.n, 2_000, time.Minute)
		t0, c0 := time.Now(), sk.n.Load()
		waitCount(b, &sk.n, n-2_000, time.Minute)
		t1, c1 := time.Now(), sk.n.Load()
		waitCount(b, &released, n, time.Minute)
		b.StopTimer()
		rate := float64(c1-c0) / t1.Sub(t0).Seconds()
		b.ReportMetric(rate, "events/s")
		b.ReportMetric(100*rate/10_000, "%-of-bound")
		mu.Lock()
		lateP50, releaseP50, releaseP90 := percentile(timerLate, 0.5), percentile(releaseCall, 0.5), percentile(releaseCall, 0.9)
		mu.Unlock()
		b.ReportMetric(float64(releaseP50.Microseconds())/1000, "release-p50-ms")
		b.ReportMetric(float64(lateP50.Microseconds())/1000, "timer-late-p50-ms")
		b.Logf("maxInFlight 100, release after 10ms: %.0f events/s = %.0f%% of the 10,000/s bound; at most %d held at once; "+
			"release call p50 %v p90 %v, consumer timer late p50 %v",
			rate, 100*rate/10_000, maxIn.Load(), releaseP50, releaseP90, lateP50)
		if maxIn.Load() > 100 {
			b.Errorf("%d events held tokens at once, max 100", maxIn.Load())
		}
	}
}

// BenchmarkPolicyRate: a policy of 200 events a second (burst 10,
// maxInFlight far above, autoRelease) delivering to an HTTP consumer on
// 127.0.0.1 for about 30 s; reports the achieved rate after the burst as a
// percentage of the policy's.
func BenchmarkPolicyRate(b *testing.B) {
	const perSecond, burst = 200.0, 10
	const n = 200*30 + 200
	for range b.N {
		_, at := runPolicyRate(b, n, perSecond, burst)
		b.StopTimer()
		got := achieved(at, 200, n-1)
		b.ReportMetric(got, "events/s")
		b.ReportMetric(100*got/perSecond, "%-of-target")
		b.Logf("rate 200/s burst 10: %.2f events/s over %.1fs = %.2f%% of the target",
			got, at[n-1].Sub(at[200]).Seconds(), 100*got/perSecond)
		b.StartTimer()
	}
}

// percentile returns the q-quantile of ds (sorting it); zero if empty.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(int(q*float64(len(ds))), len(ds)-1)]
}

// BenchmarkNoisyNeighbour: tenant A has 100,000 events due at one instant to
// a consumer slower than the scheduler, tenant B 100 due a second later to a
// fast consumer. It reports B's lateness (receipt minus launch) and A's
// deliveries in the first 5 s against A alone (the cost of fairness to A).
// "holding": A's consumer holds each request 2 s.
func BenchmarkNoisyNeighbour(b *testing.B) {
	for _, c := range []struct {
		name string
		n    noisyNeighbour
	}{
		{"slow", noisyNeighbour{aEvents: 100_000, bEvents: 100, aConcurrency: 8, aHold: time.Millisecond, window: 5 * time.Second}},
		{"holding", noisyNeighbour{aEvents: 100_000, bEvents: 100, aConcurrency: 1000, aHold: 2 * time.Second, window: 5 * time.Second}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				alone := c.n
				alone.bEvents = 0
				_, aAlone := alone.run(b, openStore(b))
				late, aShared := c.n.run(b, openStore(b))
				p50, p99, worst := percentile(late, 0.5), percentile(late, 0.99), percentile(late, 1)
				b.ReportMetric(float64(p50.Microseconds())/1000, "B-p50-ms")
				b.ReportMetric(float64(p99.Microseconds())/1000, "B-p99-ms")
				b.ReportMetric(float64(worst.Microseconds())/1000, "B-max-ms")
				b.ReportMetric(100*float64(aShared)/float64(max(aAlone, 1)), "A-%-of-alone")
				b.Logf("B lateness p50 %s p99 %s max %s; A delivered %d in %s with B, %d alone",
					p50, p99, worst, aShared, c.n.window, aAlone)
			}
		})
	}
}

// BenchmarkAdaptive: an adaptive policy (min 1, max 100) delivers to an HTTP
// consumer on 127.0.0.1 whose capacity, in concurrent requests of
// ADAPTIVE_WORK each (default 100ms), drops from 50 to 10 and recovers to
// 50; beyond its capacity it answers 429. Reported: seconds until the limit
// converges after each change (down: at most the capacity; up: at least 90%
// of it), and, over ADAPTIVE_MEASURE (default 5s) after each convergence,
// the share of 429s and the goodput as a percentage of the capacity.
func BenchmarkAdaptive(b *testing.B) {
	work := 100 * time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("ADAPTIVE_WORK")); err == nil {
		work = d
	}
	measure := 5 * time.Second
	if d, err := time.ParseDuration(os.Getenv("ADAPTIVE_MEASURE")); err == nil {
		measure = d
	}
	for range b.N {
		c := &capped{work: work}
		c.capacity.Store(50)
		thr := startAdaptive(b, c, 100000, 100, 0)
		limit := func() int {
			ls, _ := thr.Limit("pol")
			return ls.Limit
		}
		converge := func(ok func(int) bool) float64 {
			start := time.Now()
			for !ok(limit()) {
				if time.Since(start) > time.Minute {
					b.Fatalf("limit %d did not converge in a minute", limit())
				}
				time.Sleep(10 * time.Millisecond)
			}
			return time.Since(start).Seconds()
		}
		// phase measures 429 share and goodput at capacity cp.
		phase := func(cp int) (busyPct, goodPct float64) {
			ok0, busy0 := c.ok.Load(), c.busy.Load()
			time.Sleep(measure)
			ok, busy := c.ok.Load()-ok0, c.busy.Load()-busy0
			capacity := float64(cp) * measure.Seconds() / work.Seconds()
			return 100 * float64(busy) / float64(max(ok+busy, 1)), 100 * float64(ok) / capacity
		}
		converge(func(l int) bool { return l > 0 && l <= 50 })
		c.capacity.Store(10)
		down := converge(func(l int) bool { return l <= 10 })
		busyDown, goodDown := phase(10)
		c.capacity.Store(50)
		up := converge(func(l int) bool { return l >= 45 })
		c.peak.Store(0)
		limitBefore := limit()
		busyUp, goodUp := phase(50)
		b.ReportMetric(float64(c.peak.Load()), "peak-requests-at-50")
		b.ReportMetric(float64(limitBefore), "limit-entering-50")
		b.ReportMetric(down, "s-converge-down")
		b.ReportMetric(up, "s-converge-up")
		b.ReportMetric(busyDown, "%429-at-10")
		b.ReportMetric(busyUp, "%429-at-50")
		b.ReportMetric(goodDown, "%goodput-at-10")
		b.ReportMetric(goodUp, "%goodput-at-50")
	}
}

// benchDeadlines reports whether BENCH_DEADLINES=1 asks the benchmarks for
// events with deadlines and expiries (the same figures, with deadlines on).
func benchDeadlines() bool { return os.Getenv("BENCH_DEADLINES") == "1" }

// withDeadlines gives evs, under BENCH_DEADLINES=1, a deadline an hour
// after their launch (a minute apart per schedule) and an expiry an hour
// after that, which none reaches.
func withDeadlines(evs []*model.Event) []*model.Event {
	if !benchDeadlines() {
		return evs
	}
	for _, e := range evs {
		d, x := e.LaunchAt.Add(time.Hour+time.Duration(e.ScheduleID[len(e.ScheduleID)-1]%10)*time.Minute), e.LaunchAt.Add(2*time.Hour)
		e.Deadline, e.ExpireAt = &d, &x
	}
	return evs
}
