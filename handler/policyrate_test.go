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
// HTTP consumer on 127.0.0.1 and returns when each arrived.
func runPolicyRate(t testing.TB, n int, perSecond float64, burst int) []time.Time {
	t.Helper()
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "pol", MaxInFlight: 1000, TokenTimeout: time.Minute, AutoRelease: true,
		RatePerSecond: perSecond, Burst: burst})
	var rec arrivals
	srv := consumer(t, func(_ delivery.Message, _ http.ResponseWriter, _ *http.Request) { rec.add(time.Now()) })
	insert(t, st, makeEvents(n, evOpts{schedule: "s", policy: "pol", url: srv.URL, launch: time.Now().Add(-time.Second)}))
	startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	limit := time.Duration(float64(n)/perSecond*float64(time.Second)) + 20*time.Second
	waitFor(t, limit, "every delivery", func() bool { return len(rec.snapshot()) == n })
	// Deliveries run concurrently: order them by arrival.
	at := rec.snapshot()
	slices.SortFunc(at, time.Time.Compare)
	return at
}

// achieved is the rate between the from-th and to-th arrivals.
func achieved(at []time.Time, from, to int) float64 {
	return float64(to-from) / at[to].Sub(at[from]).Seconds()
}

// TestPolicyRateHTTP: a policy of 50 events a second, burst 5, delivered to
// a real HTTP consumer: no more than the token bucket allows at any moment,
// and 50/s within 5% once the burst is spent.
func TestPolicyRateHTTP(t *testing.T) {
	const n, perSecond, burst = 260, 50.0, 5
	at := runPolicyRate(t, n, perSecond, burst)
	// The bucket's envelope: by time d after the first arrival, at most
	// burst + d*rate arrived, give or take the spread of the requests'
	// transit times (the first may be slower than those after it, which
	// then arrive closer together than they went out): one event, and
	// transitJitter's worth of the rate. An unthrottled or doubled rate
	// still breaks it by far.
	const transitJitter = 0.05 // seconds
	for i, a := range at {
		d := a.Sub(at[0]).Seconds()
		if float64(i+1) > burst+(d+transitJitter)*perSecond+1 {
			t.Fatalf("%d events arrived within %.3fs, the rate allows %.1f", i+1, d, burst+d*perSecond)
		}
	}
	// Steady state: from the 20th arrival to the last (4.8 s).
	got := achieved(at, 20, n-1)
	t.Logf("achieved %.2f/s of %.0f/s (%.1f%%)", got, perSecond, 100*got/perSecond)
	if got < 0.95*perSecond || got > 1.05*perSecond {
		t.Fatalf("achieved %.2f events/s, want %.0f within 5%%", got, perSecond)
	}
}
