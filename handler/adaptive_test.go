package handler_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// capped is an HTTP consumer that serves at most capacity requests at once
// (each takes work) and answers 429 beyond that. While bound is set, it
// counts the requests that arrive when more than *bound are in flight.
type capped struct {
	capacity atomic.Int64
	inFlight atomic.Int64
	ok, busy atomic.Int64
	peak     atomic.Int64 // most requests in flight at once
	work     time.Duration
	bound    atomic.Pointer[atomic.Int64]
	over     atomic.Int64
}

func (c *capped) serve(_ delivery.Message, w http.ResponseWriter, _ *http.Request) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	if b := c.bound.Load(); b != nil && n > b.Load() {
		c.over.Add(1)
	}
	if n > c.capacity.Load() {
		c.busy.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	time.Sleep(c.work) // the consumer's work, not synchronisation
	c.ok.Add(1)
}

// startAdaptive delivers n due events of an adaptive policy (min 1, max
// ceiling; its owner starting at limit, or the ceiling if 0) to c and
// returns the policy's throttle.
func startAdaptive(t testing.TB, c *capped, n, ceiling, limit int, opts ...throttleOpt) *throttle.Throttle {
	t.Helper()
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "pol", MaxInFlight: ceiling, TokenTimeout: time.Minute, AutoRelease: true,
		Adaptive: &model.AdaptiveLimit{Min: 1, Max: ceiling}, EffectiveLimit: limit})
	srv := consumer(t, c.serve)
	insert(t, st, makeEvents(n, evOpts{schedule: "s", policy: "pol", url: srv.URL, launch: time.Now().Add(-time.Second), maxAttempts: 1000}))
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}}, opts...)
	return throttleOf(h)
}

// limitRange records the lowest and highest effective limit the throttle
// set since from (throttle.Metrics.EffectiveLimit). It is told a new limit before
// the bucket acts on it.
type limitRange struct {
	throttle.NopMetrics
	mu     sync.Mutex
	lo, hi atomic.Int64
}

func (r *limitRange) EffectiveLimit(_ string, limit int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lo.Store(min(r.lo.Load(), int64(limit)))
	r.hi.Store(max(r.hi.Load(), int64(limit)))
}

// from starts a new range at the current limit.
func (r *limitRange) from(limit int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lo.Store(int64(limit))
	r.hi.Store(int64(limit))
}

// TestAdaptiveHTTP: a consumer on 127.0.0.1 whose capacity drops from 50
// concurrent requests of 300 ms to 10 and recovers to 50, answering 429
// beyond it. Answers that are all 2xx grow the limit once half of it is
// out, so the band below needs the handler to keep the consumer at its
// capacity: 300 ms makes that 170 requests a second, which it sends even
// on busy cores. After the limit has converged in each phase, over a
// count of answers: fewer than 5% are 429s, the limit stays in a band
// around the capacity, and the consumer never has more requests
// in flight than the highest limit of the phase. (Timings and goodput on
// real time are BenchmarkAdaptive's; the simulated-time test of the
// controller asserts them.)
func TestAdaptiveHTTP(t *testing.T) {
	c := &capped{work: 300 * time.Millisecond}
	c.capacity.Store(50)
	lr := &limitRange{}
	// The owner starts at the capacity of 50, as after a first convergence.
	thr := startAdaptive(t, c, 5000, 100, 50, func(_ *throttle.Config, d *throttle.Deps) { d.Metrics = lr })
	limit := func() int {
		ls, ok := thr.Limit("pol")
		if !ok {
			return -1
		}
		return ls.Limit
	}
	phase := func(capacity int, converged func(l int) bool, answers int64) {
		t.Helper()
		c.capacity.Store(int64(capacity))
		waitFor(t, time.Minute, fmt.Sprintf("the limit to converge at capacity %d", capacity), func() bool { return converged(limit()) })
		// What went out under the limit before convergence drains first.
		waitFor(t, time.Minute, "the requests in flight to come under the limit", func() bool { return c.inFlight.Load() <= int64(limit()) })
		lr.from(limit())
		c.over.Store(0)
		c.bound.Store(&lr.hi)
		ok0, busy0 := c.ok.Load(), c.busy.Load()
		waitFor(t, time.Minute, fmt.Sprintf("%d answers at capacity %d", answers, capacity), func() bool {
			return c.ok.Load()+c.busy.Load()-ok0-busy0 >= answers
		})
		c.bound.Store(nil)
		ok, busy := c.ok.Load()-ok0, c.busy.Load()-busy0
		if share := float64(busy) / float64(ok+busy); share >= 0.05 {
			t.Errorf("capacity %d: %d of %d answers were 429 (%.1f%%), want < 5%%", capacity, busy, ok+busy, 100*share)
		}
		if lo, hi := int(lr.lo.Load()), int(lr.hi.Load()); lo < capacity*8/10 || hi > capacity+capacity/4+1 {
			t.Errorf("capacity %d: the limit moved in [%d, %d], want within [%d, %d]", capacity, lo, hi, capacity*8/10, capacity+capacity/4+1)
		}
		if n := c.over.Load(); n > 0 {
			t.Errorf("capacity %d: %d requests arrived with more in flight than the highest limit %d", capacity, n, lr.hi.Load())
		}
	}
	phase(10, func(l int) bool { return l > 0 && l <= 10 }, 150)
	phase(50, func(l int) bool { return l >= 45 }, 500)
	if p := c.peak.Load(); p > 100 {
		t.Errorf("%d requests in flight at once, above maxInFlight 100", p)
	}
}
