package handler_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// A backlog far above MaxScheduled, unthrottled and throttled, is
// delivered completely while the handler never holds more than the bound
// after a claim (events that took a token count on their way to the
// delivery queues too), and the events of a schedule go in index order but
// for the bound's worth of overtaking (claims follow the due index).
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
	if peak > bound || peak == 0 {
		t.Errorf("held at most %d events after a claim, want 1-%d", peak, bound)
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

// A handler filling up claims at most a quarter of the bound a pass,
// split over its shards, whatever ClaimBatch allows, and passes follow
// until the bound is reached.
func TestClaimPassQuarterOfBound(t *testing.T) {
	const bound, n = 400, 1000
	st := openStore(t)
	// Due within the horizon but not during the test: nothing is delivered.
	insert(t, st, makeEvents(n, evOpts{schedule: "s", url: "http://sink", launch: time.Now().Add(20 * time.Second)}))
	var (
		mu     sync.Mutex
		claims []int
		full   = make(chan struct{})
	)
	hooks := handler.Hooks{Claimed: func(got, held int) {
		mu.Lock()
		defer mu.Unlock()
		claims = append(claims, got)
		if held == bound {
			close(full)
		}
	}}
	startHandler(t, handler.Config{MaxScheduled: bound, ClaimBatch: n}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: &sink{}}, Hooks: hooks})
	select {
	case <-full:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the bound of %d was not reached; claims %v", bound, claims)
	}
	mu.Lock()
	defer mu.Unlock()
	most := (bound/4 + testShards - 1) / testShards
	for i, got := range claims {
		if got > most {
			t.Fatalf("claim %d took %d events of a shard, want at most %d (a quarter of the bound over %d shards); claims %v", i, got, most, testShards, claims)
		}
	}
}

// A policy whose events wait for tokens that do not come back holds at
// most its window (its part of half the bound): the unthrottled events of
// the other shards are claimed and delivered meanwhile.
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
// holds nothing, and it never held more than the bound (the tokens on
// their way from the throttle counted).
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
	if p := peak.Load(); p > bound || p <= 0 {
		t.Errorf("held at most %d after a claim, want 1-%d", p, bound)
	}
}

// A throttled policy's backlog far above the bound waits partly in its
// bucket (up to its window) and the rest in the store, while the other
// events of its shard, due after the backlog's, are claimed past it and
// delivered: the policy's consumer holds its tokens until every one of
// them arrived. The handler never holds more than the bound after a
// claim, and the backlog completes once its consumer lets go.
func TestHeldBoundThrottledBacklogSameShard(t *testing.T) {
	const bound, nThrottled, maxInFlight = 40, 600, 2
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "pol_slow", TenantID: "t1", Name: "slow", MaxInFlight: maxInFlight, AutoRelease: true})
	gate := make(chan struct{})
	var closeGate sync.Once
	open := func() { closeGate.Do(func() { close(gate) }) }

	var (
		mu        sync.Mutex
		freeGot   = map[string]bool{}
		thrGot    = map[string]bool{}
		thrAtFree int // throttled events arrived when the last free one did
		freeDone  = make(chan struct{})
		thrDone   = make(chan struct{})
		nFree     int
	)
	srv := consumer(t, func(m delivery.Message, _ http.ResponseWriter, _ *http.Request) {
		if m.ScheduleID == "p" {
			mu.Lock()
			if !thrGot[m.EventID] {
				if thrGot[m.EventID] = true; len(thrGot) == nThrottled {
					close(thrDone)
				}
			}
			mu.Unlock()
			<-gate // the token is held until the unthrottled events are in
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !freeGot[m.EventID] {
			if freeGot[m.EventID] = true; len(freeGot) == nFree {
				thrAtFree = len(thrGot)
				close(freeDone)
			}
		}
	})
	t.Cleanup(open) // before the consumer's Close, which waits for its requests
	now := time.Now()
	backlog := makeEvents(nThrottled, evOpts{schedule: "p", url: srv.URL, launch: now, policy: "pol_slow"})
	pShard := backlog[0].Shard
	// Unthrottled events of the policy's shard: a quarter of the
	// candidates on average, a hundred of them taken.
	var free []*model.Event
	for _, e := range makeEvents(2000, evOpts{schedule: "s", url: srv.URL, launch: now.Add(time.Millisecond)}) {
		if e.Shard == pShard && len(free) < 100 {
			free = append(free, e)
		}
	}
	nFree = len(free)
	if nFree < 100 {
		t.Fatalf("only %d unthrottled events on the policy's shard", nFree)
	}
	insert(t, st, backlog)
	insert(t, st, free)

	var peak atomic.Int64
	h := startHandler(t, handler.Config{MaxScheduled: bound}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Minute)},
		Hooks: handler.Hooks{Claimed: func(_, held int) {
			for p := peak.Load(); int64(held) > p && !peak.CompareAndSwap(p, int64(held)); p = peak.Load() {
			}
		}}})
	select {
	case <-freeDone:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of the %d unthrottled events of the policy's shard delivered while its backlog waits", len(freeGot), nFree)
	}
	mu.Lock()
	if thrAtFree > maxInFlight {
		t.Errorf("%d throttled events arrived before the last unthrottled one, want at most maxInFlight %d", thrAtFree, maxInFlight)
	}
	mu.Unlock()
	open()
	select {
	case <-thrDone:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of the %d events of the backlog delivered", len(thrGot), nThrottled)
	}
	waitFor(t, 10*time.Second, "nothing held once the outcomes are written", func() bool { return h.Held() == 0 })
	if p := peak.Load(); p > bound || p <= 0 {
		t.Errorf("held at most %d after a claim, want 1-%d", p, bound)
	}
	if h.PeakHeld() > bound {
		t.Errorf("PeakHeld %d, bound %d", h.PeakHeld(), bound)
	}
}

// Claims share a shard's due events over its tenants: a tenant's 20 events
// due at the same instant as another tenant's fire a hundred times larger
// than the bound, and sorting after them in the store, are delivered among
// the fire's first events.
func TestClaimTenantFairBeyondBound(t *testing.T) {
	const bound, nA, nB = 50, 2000, 20
	// The first claim pass takes 12 events per shard (the bound over 4
	// shards), up to 6 of them t2's (an equal share of two tenants); once
	// full, a pass waits for room for a quarter of the bound, 3 per shard,
	// at least 1 of them t2's. Even with all of t2's events on one shard
	// they are claimed within 1 + 14 passes, after at most 50 + 14×12 = 218
	// of t1's were claimed; the delivery queues serve the tenants in turn
	// once claimed. 300 leaves a margin. Claims in launch order (t1's
	// events sort first) would deliver each shard's ~500 of t1's first.
	const limit = 300
	st := openStore(t)
	var (
		mu       sync.Mutex
		arrivals []string // schedule of each first arrival: a is t1's, b t2's
		seen     = map[string]bool{}
		done     = make(chan struct{})
	)
	srv := consumer(t, func(m delivery.Message, _ http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if seen[m.EventID] {
			return
		}
		seen[m.EventID] = true
		arrivals = append(arrivals, m.ScheduleID)
		if len(arrivals) == nA+nB {
			close(done)
		}
	})
	now := time.Now()
	a := makeEvents(nA, evOpts{schedule: "a", url: srv.URL, launch: now})
	b := makeEvents(nB, evOpts{schedule: "b", url: srv.URL, launch: now})
	for _, e := range b {
		e.TenantID = "t2"
	}
	insert(t, st, a)
	insert(t, st, b)
	startHandler(t, handler.Config{MaxScheduled: bound}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 10*time.Second)}})
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d events delivered", len(arrivals), nA+nB)
	}
	mu.Lock()
	defer mu.Unlock()
	aBefore, bSeen := 0, 0
	for _, s := range arrivals {
		if s == "b" {
			if bSeen++; bSeen == nB {
				break
			}
			continue
		}
		aBefore++
	}
	if aBefore > limit {
		t.Errorf("tenant t2's %d events delivered after %d of tenant t1's, want at most %d", nB, aBefore, limit)
	}
	t.Logf("tenant t2's %d events delivered after %d of tenant t1's %d", nB, aBefore, nA)
}

// A higher priority of a policy whose backlog is far beyond its window
// passes the backlog: its events wait in the store only until the window
// drains to half, then the claim takes the highest priority first and the
// bucket hands them the next tokens. Claimed in launch order alone, they
// would wait for the whole backlog.
func TestHeldBoundHigherPriorityPassesBacklog(t *testing.T) {
	const bound, nUrgent = 40, 10
	// The window is half the bound for one policy; the urgent events wait
	// for it to drain to half, plus the event holding the token.
	if passed := passBacklog(t, bound, nUrgent, evOpts{priority: 5}); passed > bound/2+1 {
		t.Errorf("%d of the backlog delivered after the higher priority was stored and before its last event, want at most %d", passed, bound/2+1)
	}
}

// passBacklog delivers a backlog of 800 events of schedule "p" on policy
// pol_one (maxInFlight 1) through a handler of bound, stores n events of
// schedule "o" on the policy, due now, made with opts, once 50 of the
// backlog arrived, and returns how many of the backlog arrived after
// that and before the last of them.
func passBacklog(t *testing.T, bound, n int, opts evOpts) int {
	const nBacklog, before = 800, 50
	st := openStore(t)
	r := newBacklogRace(t, st, before, n)
	insert(t, st, makeEvents(nBacklog, evOpts{schedule: "p", url: r.srv.URL, launch: time.Now(), policy: "pol_one"}))
	r.start(t, st, bound)
	select {
	case <-r.reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("fewer than %d of the backlog delivered", before)
	}
	opts.schedule, opts.url, opts.launch, opts.policy = "o", r.srv.URL, time.Now(), "pol_one"
	insert(t, st, makeEvents(n, opts))
	atInsert := r.backlogNow()
	backlogAt := r.wait(t)
	t.Logf("at insert %d, at the last of the others %d", atInsert, backlogAt)
	return backlogAt - atInsert
}

// A fire of 10 events due at the same instant as another schedule's
// backlog of 800 on the same policy takes turns with it: the store reads
// the two fires' events in turns (store.CompareInLane), and the bucket
// serves the two schedules round robin, so the small fire is done after
// about as many of the backlog, not after the backlog.
func TestHeldBoundFiresAtOneInstantTakeTurns(t *testing.T) {
	const bound, nBacklog, nSmall = 40, 800, 10
	st := openStore(t)
	r := newBacklogRace(t, st, 0, nSmall)
	now := time.Now()
	insert(t, st, makeEvents(nBacklog, evOpts{schedule: "p", url: r.srv.URL, launch: now, policy: "pol_one"}))
	insert(t, st, makeEvents(nSmall, evOpts{schedule: "o", url: r.srv.URL, launch: now, policy: "pol_one"}))
	r.start(t, st, bound)
	backlogAt := r.wait(t)
	t.Logf("backlog delivered when the small fire was done: %d", backlogAt)
	if backlogAt > 2*nSmall {
		t.Errorf("%d of the backlog delivered before the small fire's last event, want at most %d", backlogAt, 2*nSmall)
	}
}

// A schedule's fire due after another schedule's stored backlog on the
// same policy, beyond its window, takes turns with it: the store gives
// the policy's lane to its schedules in turns from their earliest due
// events, so the fire's events wait in the store only until the window
// drains to half, then the bucket serves the two schedules round robin.
// Claimed in launch order, they would wait for the whole backlog.
func TestHeldBoundSchedulesTakeTurnsPastABacklog(t *testing.T) {
	const bound, nSmall = 40, 10
	if passed := passBacklog(t, bound, nSmall, evOpts{}); passed > bound/2+2*nSmall {
		t.Errorf("%d of the backlog delivered after the small fire was stored and before its last event, want at most %d", passed, bound/2+2*nSmall)
	}
}

// backlogRace is a consumer of a backlog of policy pol_one (maxInFlight 1,
// auto release), schedule "p", and of another schedule's events, "o".
type backlogRace struct {
	srv     *httptest.Server
	reached chan struct{} // closed when `before` of the backlog arrived
	done    chan struct{} // closed when the last of the other's arrived

	mu               sync.Mutex
	backlog, other   int
	backlogAtLastOne int // the backlog delivered when done closed
}

func newBacklogRace(t *testing.T, st *embedded.Store, before, nOther int) *backlogRace {
	createPolicy(t, st, &model.Policy{ID: "pol_one", TenantID: "t1", Name: "one", MaxInFlight: 1, AutoRelease: true})
	r := &backlogRace{reached: make(chan struct{}), done: make(chan struct{})}
	r.srv = consumer(t, func(m delivery.Message, _ http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch m.ScheduleID {
		case "p":
			if r.backlog++; r.backlog == before {
				close(r.reached)
			}
		case "o":
			if r.other++; r.other == nOther {
				r.backlogAtLastOne = r.backlog
				close(r.done)
			}
		}
	})
	return r
}

// start runs a handler of one shard with MaxScheduled bound on st.
func (r *backlogRace) start(t *testing.T, st *embedded.Store, bound int) {
	startHandler(t, handler.Config{MaxScheduled: bound}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 10*time.Second)}})
}

func (r *backlogRace) backlogNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.backlog
}

// wait waits for the other's last event and returns the backlog delivered
// by then.
func (r *backlogRace) wait(t *testing.T) int {
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the other schedule's events did not all arrive")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.backlogAtLastOne
}
