package handler_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

// A backlog far above MaxScheduled, unthrottled and throttled, is
// delivered completely while the handler never holds more than the bound
// after a claim (plus the policy's maxInFlight: events that took a token
// are not counted on their way to the delivery queues), and the events of
// a schedule go in index order but for the bound's worth of overtaking
// (claims follow the due index).
func TestHeldBound(t *testing.T) {
	const bound, n, nThrottled, maxInFlight = 30, 1500, 200, 3
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "pol_b", TenantID: "t1", Name: "b", MaxInFlight: maxInFlight, AutoRelease: true})
	now := time.Now()
	free := makeEvents(n, evOpts{schedule: "s", url: "http://sink", launch: now})
	thr := makeEvents(nThrottled, evOpts{schedule: "p", url: "http://sink", launch: now, policy: "pol_b"})
	insert(t, st, append(free, thr...))

	var (
		mu      sync.Mutex
		peak    int
		claims  int
		order   = map[int][]int{} // shard: indexes of schedule s in delivery order
		done    = make(chan struct{})
		settled int
	)
	sk := &sink{onDel: func(_ time.Time, evs []*model.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			if e.ScheduleID == "s" {
				order[e.Shard] = append(order[e.Shard], e.Index)
			}
		}
	}}
	hooks := handler.Hooks{
		Claimed: func(_, held int) {
			mu.Lock()
			peak, claims = max(peak, held), claims+1
			mu.Unlock()
		},
		Attempted: func(_ *model.Event, _ delivery.Result, status model.EventStatus) {
			mu.Lock()
			defer mu.Unlock()
			if status != "" {
				if settled++; settled == n+nThrottled {
					close(done)
				}
			}
		},
	}
	h := startHandler(t, handler.Config{MaxScheduled: bound, MaxBatch: 10}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: sk}, Hooks: hooks})
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d events settled", settled, n+nThrottled)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > bound+maxInFlight || peak == 0 {
		t.Errorf("held at most %d events after a claim, want 1-%d", peak, bound+maxInFlight)
	}
	if claims < (n+nThrottled)/bound {
		t.Errorf("%d claims for %d events under a bound of %d", claims, n+nThrottled, bound)
	}
	for shard, idx := range order {
		worst := 0
		for i, x := range idx {
			later := 0
			for _, y := range idx[:i] {
				if y > x {
					later++
				}
			}
			worst = max(worst, later)
		}
		if worst > bound {
			t.Errorf("shard %d: an event went after %d of its schedule's events with a greater index, want at most %d", shard, worst, bound)
		}
	}
	if h.PeakHeld() != peak {
		t.Errorf("PeakHeld %d, the hook saw %d", h.PeakHeld(), peak)
	}
}

// A policy whose events wait for tokens that do not come back holds at
// most its shard's part of half the bound: the unthrottled events of the
// other shards are claimed and delivered meanwhile.
func TestHeldBoundThrottledDoesNotStarve(t *testing.T) {
	const bound, nThrottled, nFree = 40, 400, 300
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "pol_stuck", TenantID: "t1", Name: "stuck", MaxInFlight: 1})
	now := time.Now()
	stuck := makeEvents(nThrottled, evOpts{schedule: "p", url: "http://sink", launch: now, policy: "pol_stuck"})
	insert(t, st, stuck)
	free := makeEvents(nFree, evOpts{schedule: "s", url: "http://sink", launch: now.Add(time.Millisecond)})
	insert(t, st, free)
	pShard := stuck[0].Shard
	want := 0
	for _, e := range free {
		if e.Shard != pShard {
			want++
		}
	}
	var (
		mu   sync.Mutex
		got  = map[string]bool{}
		done = make(chan struct{})
	)
	sk := &sink{onDel: func(_ time.Time, evs []*model.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			if e.ScheduleID == "s" && e.Shard != pShard && !got[e.ID] {
				if got[e.ID] = true; len(got) == want {
					close(done)
				}
			}
		}
	}}
	// The policy's one token is never released: its events wait.
	startHandler(t, handler.Config{MaxScheduled: bound}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: sk}})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of the %d unthrottled events of other shards delivered while the policy's events wait", len(got), want)
	}
}

// Events of an adaptive policy, whose outcomes are queued one by one as
// the answers come, are counted once: after the last outcome the handler
// holds nothing, and it never held more than the bound (plus the tokens on
// their way from the throttle).
func TestHeldBoundAdaptive(t *testing.T) {
	const bound, n, ceiling = 20, 300, 5
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "pol_a", TenantID: "t1", MaxInFlight: ceiling, TokenTimeout: time.Minute, AutoRelease: true,
		Adaptive: &model.AdaptiveLimit{Min: 1, Max: ceiling}})
	var got sync.Map
	var count atomic.Int64
	srv := consumer(t, func(m delivery.Message, _ http.ResponseWriter, _ *http.Request) {
		if _, dup := got.LoadOrStore(m.EventID, true); !dup {
			count.Add(1)
		}
	})
	evs := makeEvents(n, evOpts{schedule: "s", policy: "pol_a", url: srv.URL, launch: time.Now()})
	insert(t, st, evs)
	var peak atomic.Int64
	h := startHandler(t, handler.Config{MaxScheduled: bound}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)},
		Hooks: handler.Hooks{Claimed: func(_, held int) {
			for p := peak.Load(); int64(held) > p && !peak.CompareAndSwap(p, int64(held)); p = peak.Load() {
			}
		}}})
	waitFor(t, 60*time.Second, "every event delivered", func() bool { return count.Load() == n })
	waitFor(t, 10*time.Second, "nothing held once the outcomes are written", func() bool {
		return h.Held() == 0 && allIn(t, st, evs, model.EventReleased)
	})
	if p := peak.Load(); p > bound+ceiling || p <= 0 {
		t.Errorf("held at most %d after a claim, want 1-%d", p, bound+ceiling)
	}
}
