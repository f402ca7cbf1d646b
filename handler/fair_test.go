package handler_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// noisyNeighbour is tenant A's backlog to a slow consumer and tenant B's few
// events, due a second later, to a fast one.
type noisyNeighbour struct {
	aEvents, bEvents int
	// aConcurrency and aHold make A's consumer: it serves that many
	// requests at once (the others wait for it), each taking aHold.
	aConcurrency int
	aHold        time.Duration
	// holdForB, if set, has A's consumer hold each request until B's
	// events have all arrived instead of for aHold: A's requests then hold
	// every delivery slot of A's host while B's events are due.
	holdForB bool
	// window, if set, is when after A's launch instant A's deliveries are
	// counted (its drain rate), B's having all arrived.
	window time.Duration
}

// run runs n and returns the lateness of each of B's deliveries (receipt
// at B's consumer minus launch time) and how many of A's events had
// arrived when B's had (or within window).
func (n noisyNeighbour) run(t testing.TB, st *embedded.Store) (late []time.Duration, aGot int64) {
	t.Helper()
	sem := make(chan struct{}, n.aConcurrency)
	var aN, aDropped atomic.Int64 // A's requests answered; given up by the sender
	bIn := make(chan struct{})
	endHold := sync.OnceFunc(func() { close(bIn) })
	t.Cleanup(endHold)
	slow := consumer(t, func(_ delivery.Message, w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-sem }()
		var held <-chan time.Time
		hold := bIn
		if !n.holdForB {
			held, hold = time.After(n.aHold), nil
		}
		select {
		case <-held:
		case <-hold:
		case <-r.Context().Done():
			aDropped.Add(1)
			return
		}
		aN.Add(1)
	})
	var mu sync.Mutex
	launchB := map[string]time.Time{}
	got := make(chan time.Duration, n.bEvents)
	fast := consumer(t, func(m delivery.Message, _ http.ResponseWriter, _ *http.Request) {
		at := time.Now()
		mu.Lock()
		l, ok := launchB[m.EventID]
		delete(launchB, m.EventID)
		mu.Unlock()
		if ok {
			got <- at.Sub(l)
		}
	})

	instant := time.Now().Add(4*time.Second + time.Duration(n.aEvents)*claimTimePerEvent)
	a := makeEvents(n.aEvents, evOpts{schedule: "a", url: slow.URL, launch: instant})
	b := makeEvents(n.bEvents, evOpts{schedule: "b", url: fast.URL, launch: instant.Add(time.Second)})
	for _, e := range a {
		e.TenantID = "tA"
	}
	for _, e := range b {
		e.TenantID = "tB"
		launchB[e.ID] = e.LaunchAt
	}
	insert(t, st, append(a, b...))
	if time.Now().After(instant) {
		t.Fatalf("inserting %d events took past the launch instant", len(a)+len(b))
	}
	// Equal weights: B is not favoured, it only gets its share.
	tenants := tenantsByID{"tA": {ID: "tA", Weight: 1}, "tB": {ID: "tB", Weight: 1}}
	// Every event is held (the old default bound), so that fairness is
	// among all of them.
	h := startHandler(t, handler.Config{Horizon: time.Minute, MaxScheduled: 500_000}, handler.Deps{Store: st, Shards: allShards(1), Tenants: tenants,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 10*time.Second)}})
	waitFor(t, time.Until(instant), "every event claimed before the instant", func() bool { return h.Scheduled() == len(a)+len(b) })

	deadline := time.After(time.Until(instant) + 20*time.Second)
	for range n.bEvents {
		select {
		case d := <-got:
			late = append(late, d)
		case <-deadline:
			t.Fatalf("only %d of B's %d events arrived; A's consumer got %d", len(late), n.bEvents, aN.Load())
		}
	}
	aGot = aN.Load()
	if d := aDropped.Load(); n.holdForB && d > 0 {
		// The delivery timeout ended them: B may have had their slots.
		t.Errorf("%d of A's held requests ended before B's events all arrived", d)
	}
	endHold()
	if n.window > 0 {
		time.Sleep(time.Until(instant.Add(n.window))) // a measurement window, not a wait for an event
		aGot = aN.Load()
	}
	return late, aGot
}

// checkB checks B's deliveries behind A's backlog: every one of them
// arrived while A's backlog still waited (aGot of aTotal delivered), none
// before its launch time. Their lateness is logged; BenchmarkNoisyNeighbour
// measures it.
func checkB(t *testing.T, late []time.Duration, aGot int64, aTotal int) {
	t.Helper()
	p50, p99, worst := percentile(late, 0.5), percentile(late, 0.99), percentile(late, 1)
	t.Logf("B lateness p50 %s p99 %s max %s; A delivered %d of %d meanwhile", p50, p99, worst, aGot, aTotal)
	if aGot >= int64(aTotal) {
		t.Errorf("A's backlog drained (%d of %d) before B's events all arrived: B waited behind it", aGot, aTotal)
	}
	if first := percentile(late, 0); first < 0 {
		t.Errorf("a B event arrived %s before its launch time", -first)
	}
}

// A tenant's backlog to a consumer slower than the scheduler does not hold
// back another tenant's events: they go out while the backlog waits.
func TestFairSlowConsumerBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 deliveries")
	}
	n := noisyNeighbour{aEvents: 20_000, bEvents: 50, aConcurrency: 8, aHold: 2 * time.Millisecond}
	late, aGot := n.run(t, openStore(t))
	checkB(t, late, aGot, n.aEvents)
}

// A consumer that holds its requests holds only its own tenant's delivery
// slots: B's events all arrive while A's consumer holds every request it
// got, none answered or given up.
func TestFairHoldingConsumer(t *testing.T) {
	n := noisyNeighbour{aEvents: 1_000, bEvents: 50, aConcurrency: 1000, holdForB: true}
	late, aGot := n.run(t, openStore(t))
	checkB(t, late, aGot, n.aEvents)
}

// tenantsByID is a handler.Tenants from a map.
type tenantsByID map[string]*model.Tenant

func (m tenantsByID) TenantGet(_ context.Context, id string) (*model.Tenant, error) {
	if t := m[id]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("tenant %s: %w", id, model.ErrNotFound)
}

// A tenant's target rule is checked on the address its URL resolves to: a
// name that resolves outside the tenant's ranges is refused at dial, for
// good (dead, reason ssrf), and the consumer gets nothing; the same
// consumer is reached by the tenant whose ranges hold it.
func TestTenantTargetsAfterResolution(t *testing.T) {
	st := openStore(t)
	var hits sync.Map
	srv := consumer(t, func(m delivery.Message, _ http.ResponseWriter, _ *http.Request) { hits.Store(m.EventID, true) })
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	url := "http://localhost:" + port + "/hook" // resolves to 127.0.0.1
	tenants := tenantsByID{
		"tOut": {ID: "tOut", Targets: &model.TenantTargets{CIDRs: []string{"10.0.0.0/8"}}},
		"tIn":  {ID: "tIn", Targets: &model.TenantTargets{CIDRs: []string{"127.0.0.0/8"}}},
	}
	out := makeEvents(3, evOpts{schedule: "out", url: url, launch: time.Now()})
	in := makeEvents(3, evOpts{schedule: "in", url: url, launch: time.Now()})
	for _, e := range out {
		e.TenantID = "tOut"
	}
	for _, e := range in {
		e.TenantID = "tIn"
	}
	insert(t, st, append(out, in...))
	var mu sync.Mutex
	reasons := map[string]delivery.Reason{}
	startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Tenants: tenants,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)},
		Hooks: handler.Hooks{Attempted: func(e *model.Event, r delivery.Result, _ model.EventStatus) {
			mu.Lock()
			defer mu.Unlock()
			reasons[e.ID] = ""
			if r.Err != nil {
				reasons[e.ID] = delivery.ReasonOf(model.TargetHTTP, r)
			}
		}}})
	waitFor(t, 10*time.Second, "every event attempted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reasons) == len(out)+len(in)
	})
	for _, e := range out {
		if cur := statusOf(t, st, e.ID); cur.Status != model.EventDead || reasons[e.ID] != delivery.ReasonSSRF {
			t.Errorf("refused tenant's event %s: %s, reason %q; want dead, ssrf", e.ID, cur.Status, reasons[e.ID])
		}
		if _, ok := hits.Load(e.ID); ok {
			t.Errorf("refused tenant's event %s reached the consumer", e.ID)
		}
	}
	for _, e := range in {
		if cur := statusOf(t, st, e.ID); cur.Status != model.EventReleased {
			t.Errorf("allowed tenant's event %s: %s (%s), want released", e.ID, cur.Status, cur.LastError)
		}
	}
}
