package handler_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

// arrivals records when an HTTP consumer received each event.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) add(t time.Time) {
	a.mu.Lock()
	a.at = append(a.at, t)
	a.mu.Unlock()
}

func (a *arrivals) snapshot() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.at...)
}

// runPolicyRate delivers n due events of a policy with the given rate and
// burst (maxInFlight far above what the rate lets out, autoRelease) to an
// HTTP consumer on 127.0.0.1 and returns when the handler was started and
// when each event arrived.
func runPolicyRate(t testing.TB, n int, perSecond float64, burst int) (start time.Time, at []time.Time) {
	t.Helper()
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "pol", MaxInFlight: 1000, TokenTimeout: time.Minute, AutoRelease: true,
		RatePerSecond: perSecond, Burst: burst})
	var rec arrivals
	srv := consumer(t, func(_ delivery.Message, _ http.ResponseWriter, _ *http.Request) { rec.add(time.Now()) })
	insert(t, st, makeEvents(n, evOpts{schedule: "s", policy: "pol", url: srv.URL, launch: time.Now().Add(-time.Second)}))
	start = time.Now()
	startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	limit := time.Duration(float64(n)/perSecond*float64(time.Second)) + 20*time.Second
	waitFor(t, limit, "every delivery", func() bool { return len(rec.snapshot()) == n })
	// Deliveries run concurrently: order them by arrival.
	at = rec.snapshot()
	slices.SortFunc(at, time.Time.Compare)
	return start, at
}

// achieved is the rate between the from-th and to-th arrivals.
func achieved(at []time.Time, from, to int) float64 {
	return float64(to-from) / at[to].Sub(at[from]).Seconds()
}

// TestPolicyRateHTTP: a policy of 50 events a second, burst 5, delivered to
// a real HTTP consumer: never more than the token bucket allows. How close
// to the rate the deliveries come is BenchmarkPolicyRate's.
func TestPolicyRateHTTP(t *testing.T) {
	const n, perSecond, burst = 260, 50.0, 5
	start, at := runPolicyRate(t, n, perSecond, burst)
	// The bucket starts after start with burst tokens, so by time d after
	// start it gave at most burst + d*rate (one more for rounding), and an
	// event arrives after its token was taken: a slow machine only delays
	// arrivals. An unthrottled rate breaks this at once; a doubled one by
	// the end of the run unless starting took more than half of it.
	for i, a := range at {
		d := a.Sub(start).Seconds()
		if allowed := burst + d*perSecond + 1; float64(i+1) > allowed {
			t.Fatalf("%d events arrived within %.3fs of the handler's start, the rate allows %.1f", i+1, d, allowed)
		}
	}
	got := achieved(at, 20, n-1)
	t.Logf("first arrival %s after the start; %.2f/s of %.0f/s (%.1f%%) after the burst",
		at[0].Sub(start).Round(time.Millisecond), got, perSecond, 100*got/perSecond)
}
