package handler_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// capped is an HTTP consumer that serves at most capacity requests at once
// (each takes work) and answers 429 beyond that.
type capped struct {
	capacity atomic.Int64
	inFlight atomic.Int64
	ok, busy atomic.Int64
	peak     atomic.Int64 // most requests in flight at once
	work     time.Duration
}

func (c *capped) serve(_ delivery.Message, w http.ResponseWriter, _ *http.Request) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
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
// ceiling) to c and returns the policy's throttle.
func startAdaptive(t testing.TB, c *capped, n, ceiling int) *throttle.Throttle {
	t.Helper()
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "pol", MaxInFlight: ceiling, TokenTimeout: time.Minute, AutoRelease: true,
		Adaptive: &model.AdaptiveLimit{Min: 1, Max: ceiling}})
	srv := consumer(t, c.serve)
	insert(t, st, makeEvents(n, evOpts{schedule: "s", policy: "pol", url: srv.URL, launch: time.Now().Add(-time.Second), maxAttempts: 1000}))
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	return throttleOf(h)
}

// TestAdaptiveHTTP: a consumer whose capacity drops from 10 concurrent
// requests to 3 and recovers: the policy's limit follows it down on the
// 429s and back up while the consumer is healthy. (The full scenario, with
// timings and shares, is BenchmarkAdaptive.)
func TestAdaptiveHTTP(t *testing.T) {
	c := &capped{work: 10 * time.Millisecond}
	c.capacity.Store(10)
	thr := startAdaptive(t, c, 20000, 20)
	limit := func() int {
		ls, ok := thr.Limit("pol")
		if !ok {
			return -1
		}
		return ls.Limit
	}
	waitFor(t, 30*time.Second, "the limit to fall to the capacity of 10", func() bool { l := limit(); return l > 0 && l <= 10 })
	c.capacity.Store(3)
	waitFor(t, 30*time.Second, "the limit to fall to the capacity of 3", func() bool { l := limit(); return l > 0 && l <= 3 })
	c.capacity.Store(10)
	waitFor(t, 30*time.Second, "the limit to rise again", func() bool { return limit() >= 6 })
	if c.ok.Load() == 0 {
		t.Fatal("no delivery succeeded")
	}
}
