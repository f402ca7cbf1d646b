package handler_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/lease"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/throttle"
)

// crashable wraps the store of one instance; after crash every call fails as
// if the process had died (nothing it does reaches the store any more).
type crashable struct {
	handler.Store
	down atomic.Bool
}

func (c *crashable) err() error {
	if c.down.Load() {
		return model.ErrUnavailable
	}
	return nil
}

func (c *crashable) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	return c.Store.EventTransition(ctx, ts)
}
func (c *crashable) PolicyReleaseTokens(ctx context.Context, id string, n, to int) error {
	if err := c.err(); err != nil {
		return err
	}
	return c.Store.PolicyReleaseTokens(ctx, id, n, to)
}
func (c *crashable) PolicyGetByID(ctx context.Context, id string) (*model.Policy, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	return c.Store.PolicyGetByID(ctx, id)
}
func (c *crashable) PolicyListAll(ctx context.Context) ([]*model.Policy, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	return c.Store.PolicyListAll(ctx)
}
func (c *crashable) PolicyAcquireTokens(ctx context.Context, id string, want int) (int, error) {
	if err := c.err(); err != nil {
		return 0, err
	}
	return c.Store.PolicyAcquireTokens(ctx, id, want)
}
func (c *crashable) PolicySetInUse(ctx context.Context, id string, v int64, was, n int) error {
	if err := c.err(); err != nil {
		return err
	}
	return c.Store.PolicySetInUse(ctx, id, v, was, n)
}
func (c *crashable) EventFindTokenExpired(ctx context.Context, id string, t time.Time, limit int) ([]*model.Event, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	return c.Store.EventFindTokenExpired(ctx, id, t, limit)
}
func (c *crashable) EventCountHoldingTokens(ctx context.Context, id string) (int, error) {
	if err := c.err(); err != nil {
		return 0, err
	}
	return c.Store.EventCountHoldingTokens(ctx, id)
}
func (c *crashable) EventClaimDue(ctx context.Context, p *store.EventClaimParams) ([]*model.Event, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	return c.Store.EventClaimDue(ctx, p)
}
func (c *crashable) EventDeleteFinishedBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if err := c.err(); err != nil {
		return 0, err
	}
	return c.Store.EventDeleteFinishedBefore(ctx, t, limit)
}

// instance is one schedulerd process: a lease balancer ticked by the test
// (so that a crash can stop it without releasing anything) and a handler.
type instance struct {
	name  string
	st    *crashable
	bal   *lease.Balancer
	h     *handler.Handler
	stopT chan struct{}
	done  chan struct{}
}

func startInstance(t *testing.T, name string, st *embedded.Store, dl handler.Deliverer, reclaimed func([]*model.Event), early bool) *instance {
	t.Helper()
	in := &instance{name: name, st: &crashable{Store: st}, stopT: make(chan struct{}), done: make(chan struct{})}
	bal, err := lease.New(lease.Config{Group: "handler", Units: testShards, Owner: name, TTL: time.Second, Interval: 200 * time.Millisecond}, lease.Deps{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	in.bal = bal
	_ = bal.Tick(context.Background())
	go func() {
		defer close(in.done)
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-in.stopT:
				return
			case <-tk.C:
				if !in.st.down.Load() {
					_ = bal.Tick(context.Background())
				}
			}
		}
	}()
	in.h = startHandler(t, handler.Config{
		Owner: name, PrefetchInterval: 100 * time.Millisecond, Horizon: 5 * time.Second,
		ReclaimInterval: 200 * time.Millisecond, MaxBatch: 50,
		Backoff:      func(a int) time.Duration { return time.Duration(a) * 100 * time.Millisecond },
		DrainTimeout: 2 * time.Second,
	}, handler.Deps{Store: in.st, Shards: bal,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: dl}},
		func(c *throttle.Config, d *throttle.Deps) {
			c.PollInterval, c.ReconcileInterval, c.ReconcileSettle = 50*time.Millisecond, time.Second, 100*time.Millisecond
			c.EarlyDispatch = early
			d.Reclaimed = reclaimed
		})
	t.Cleanup(func() { in.stopTicking() })
	return in
}

func (in *instance) stopTicking() {
	select {
	case <-in.stopT:
	default:
		close(in.stopT)
	}
	<-in.done
}

// crash makes the instance vanish: its store calls fail from now on, its
// leases are not renewed (they expire after one TTL) nor released.
func (in *instance) crash() {
	in.st.down.Store(true)
	in.stopTicking()
	go func() {
		in.h.Stop()
		throttleOf(in.h).Stop()
	}()
}

// behaviour of the consumer for one delivery attempt.
type behaviour int

const (
	bOK           behaviour = iota // 2xx, releases soon
	bSlow                          // slow 2xx, slow release
	bFail                          // 500
	bTimeout                       // never answers; the transport times out
	bNeverRelease                  // 2xx, never releases (token times out)
	bReleaseTwice                  // 2xx, releases twice
	bRetryAfter                    // 429 with Retry-After: 1
	nBehaviours
)

var behaviourNames = [...]string{"ok", "slow", "fail", "timeout", "never-release", "release-twice", "retry-after"}

// pick chooses the behaviour for the nth receipt of an event,
// deterministically from the seed.
func pick(seed uint64, id string, nth int) (behaviour, uint32) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", seed, id, nth)
	v := h.Sum64()
	r := int(v % 100)
	b := bOK
	switch {
	case r < 45:
		b = bOK
	case r < 60:
		b = bSlow
	case r < 70:
		b = bFail
	case r < 76:
		b = bTimeout
	case r < 80:
		b = bNeverRelease
	case r < 92:
		b = bReleaseTwice
	default:
		b = bRetryAfter
	}
	return b, uint32(v >> 32)
}

// TestInvariantsUnderRandomConsumers checks docs/design.md invariant 1 (every
// event is delivered at least once or ends dead) and invariant 3 (at no
// instant do more than maxInFlight events of a policy hold tokens) with
// consumers that are slow, fail, time out, never release or release twice
// (both at once), while one of two instances crashes and a third joins. The
// consumer checks the bound at every delivery it receives.
func TestInvariantsUnderRandomConsumers(t *testing.T) {
	testInvariants(t, false)
}

// TestInvariantsEarlyDispatch is the same with one instance that owns the
// store, as with the embedded store: releases go through its Throttle, which
// sends the next event before the release's commit (throttle.Config.
// EarlyDispatch).
func TestInvariantsEarlyDispatch(t *testing.T) {
	testInvariants(t, true)
}

func testInvariants(t *testing.T, early bool) {
	seed := testseed.Get(t, "HANDLER_TEST_SEED", 1)

	st := openStore(t)
	ctx := context.Background()
	policies := map[string]*model.Policy{
		"p-manual": {ID: "p-manual", MaxInFlight: 4, TokenTimeout: 1500 * time.Millisecond},
		"p-auto":   {ID: "p-auto", MaxInFlight: 2, AutoRelease: true, TokenTimeout: 1500 * time.Millisecond},
	}
	for _, p := range policies {
		createPolicy(t, st, p)
	}

	var (
		mu         sync.Mutex
		holding    = map[string]map[string]int{"p-manual": {}, "p-auto": {}} // policy -> id#attempt -> count
		maxSeen    = map[string]int{}
		violations []string
		okOnce     = map[string]bool{} // events answered 2xx at least once
		receipts   = map[string]int{}
		counts     [nBehaviours]int
		instances  []*instance
		wg         sync.WaitGroup
	)
	t.Cleanup(wg.Wait)
	key := func(id string, attempt int) string { return id + "#" + strconv.Itoa(attempt) }
	take := func(policy, k string) {
		mu.Lock()
		defer mu.Unlock()
		holding[policy][k]++
		n := 0
		for _, c := range holding[policy] {
			n += c
		}
		maxSeen[policy] = max(maxSeen[policy], n)
		if n > policies[policy].MaxInFlight {
			violations = append(violations, fmt.Sprintf("%s: %d tokens held at the delivery of %s (max %d)", policy, n, k, policies[policy].MaxInFlight))
		}
	}
	drop := func(policy, k string) {
		mu.Lock()
		defer mu.Unlock()
		if holding[policy][k] > 0 {
			holding[policy][k]--
			if holding[policy][k] == 0 {
				delete(holding[policy], k)
			}
		}
	}
	// A release is served by the master of one live instance, which
	// releases through its own process's Throttle (a hand-off to its own
	// bucket, or the token back to the store and its bucket woken), as
	// behind a load balancer; the instance is picked from the seed. Other
	// instances learn of the token only by polling the store. A release
	// that reaches an instance as it crashes fails and is sent again to a
	// live one, as a consumer retries it.
	release := func(m delivery.Message) {
		e, err := st.EventGetByID(ctx, m.EventID)
		if err != nil {
			t.Errorf("release: %v", err)
			return
		}
		for try := 0; ; try++ {
			mu.Lock()
			live := append([]*instance(nil), instances...)
			mu.Unlock()
			h := fnv.New64a()
			fmt.Fprintf(h, "%d/release/%s/%d", seed, m.EventID, try)
			in := live[h.Sum64()%uint64(len(live))]
			_, err := throttleOf(in.h).Release(ctx, e, time.Now())
			if err == nil {
				return
			}
			if !in.st.down.Load() || try >= 10 {
				t.Errorf("release through %s: %v", in.name, err)
				return
			}
		}
	}
	policyOf := map[string]string{}

	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		receipts[m.EventID]++
		b, rnd := pick(seed, m.EventID, receipts[m.EventID])
		counts[b]++
		policy := policyOf[m.EventID]
		mu.Unlock()
		k := key(m.EventID, m.Attempt)
		answersOK := b == bOK || b == bSlow || b == bNeverRelease || b == bReleaseTwice
		if answersOK && policy != "" {
			take(policy, k)
		}
		switch b {
		case bFail:
			http.Error(w, "consumer bug", http.StatusInternalServerError)
			return
		case bTimeout:
			<-r.Context().Done()
			return
		case bRetryAfter:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		case bSlow:
			time.Sleep(time.Duration(100+rnd%100) * time.Millisecond)
		default:
			time.Sleep(time.Duration(rnd%20) * time.Millisecond)
		}
		mu.Lock()
		okOnce[m.EventID] = true
		mu.Unlock()
		if policy != "" && policies[policy].AutoRelease {
			drop(policy, k) // the scheduler releases when it reads the answer
			return
		}
		if b == bNeverRelease || policy == "" {
			return
		}
		wg.Go(func() {
			delay := time.Duration(rnd%100) * time.Millisecond
			if b == bSlow {
				delay = time.Duration(100+rnd%200) * time.Millisecond
			}
			time.Sleep(delay)
			if policy != "" {
				drop(policy, k) // done with it: the token goes back now
			}
			if b == bReleaseTwice {
				wg.Go(func() { release(m) })
			}
			release(m)
		})
	})

	reclaimed := func(evs []*model.Event) {
		for _, e := range evs {
			// A delivered event's Attempts already counts the delivery
			// that took the token; a delivering one's does not yet.
			attempt := e.Attempts
			if e.Status == model.EventDelivering {
				attempt++
			}
			drop(e.PolicyID, key(e.ID, attempt))
		}
	}
	dl := httpDeliverer(t, time.Second)

	launch := time.Now().Add(300 * time.Millisecond)
	var evs []*model.Event
	evs = append(evs, makeEvents(80, evOpts{schedule: "big", policy: "p-manual", url: srv.URL, launch: launch, spread: 2 * time.Second, maxAttempts: 6})...)
	evs = append(evs, makeEvents(15, evOpts{schedule: "urgent", policy: "p-manual", url: srv.URL, launch: launch.Add(time.Second), spread: time.Second, maxAttempts: 6, priority: 5})...)
	evs = append(evs, makeEvents(40, evOpts{schedule: "rate", policy: "p-auto", url: srv.URL, launch: launch, spread: 2 * time.Second, maxAttempts: 6})...)
	evs = append(evs, makeEvents(80, evOpts{schedule: "free", url: srv.URL, launch: launch, spread: 3 * time.Second, maxAttempts: 6})...)
	// One attempt only: a failure or timeout makes them dead.
	evs = append(evs, makeEvents(20, evOpts{schedule: "fragile", policy: "p-manual", url: srv.URL, launch: launch, spread: 3 * time.Second, maxAttempts: 1})...)
	for _, e := range evs {
		policyOf[e.ID] = e.PolicyID
	}
	insert(t, st, evs)

	var b, c *instance
	if early {
		b = startInstance(t, "B", st, dl, reclaimed, true)
		c = b
		mu.Lock()
		instances = []*instance{b}
		mu.Unlock()
	} else {
		a := startInstance(t, "A", st, dl, reclaimed, false)
		b = startInstance(t, "B", st, dl, reclaimed, false)
		mu.Lock()
		instances = []*instance{a, b}
		mu.Unlock()

		// Crash A in the middle of the work: it holds shards and a tenth of
		// the events are finished.
		finished := func() int {
			n := 0
			for _, e := range evs {
				if statusOf(t, st, e.ID).Status.Finished() {
					n++
				}
			}
			return n
		}
		waitFor(t, 30*time.Second, "A holds shards and work is under way", func() bool {
			return len(a.bal.Held()) > 0 && finished() >= len(evs)/10
		})
		t.Logf("crashing A (holds shards %v)", a.bal.Held())
		a.crash()
		mu.Lock()
		instances = []*instance{b}
		mu.Unlock()

		// C joins once B has taken A's shards over.
		waitFor(t, 30*time.Second, "B holds every shard", func() bool { return len(b.bal.Held()) == testShards })
		c = startInstance(t, "C", st, dl, reclaimed, false)
		mu.Lock()
		instances = []*instance{b, c}
		mu.Unlock()
		t.Logf("C joined; B holds %v", b.bal.Held())
	}

	// Invariant 1: everything ends released or dead.
	deadline := time.Now().Add(60 * time.Second)
	for !allIn(t, st, evs, model.EventReleased, model.EventDead) {
		if time.Now().After(deadline) {
			for _, e := range evs {
				if cur := statusOf(t, st, e.ID); !cur.Status.Finished() {
					t.Logf("unfinished: %s status %s fence %d shard %d launch %s attempts %d lastError %q tokenExp %v",
						cur.ID, cur.Status, cur.Fence, cur.Shard, cur.LaunchAt.Format(time.StampMilli), cur.Attempts, cur.LastError, cur.TokenExpiresAt)
				}
			}
			t.Logf("C holds %v, B holds %v; B scheduled %d waiting %v; C scheduled %d waiting %v", c.bal.Held(), b.bal.Held(),
				b.h.Scheduled(), throttleOf(b.h).WaitingByPolicy(), c.h.Scheduled(), throttleOf(c.h).WaitingByPolicy())
			for id := range policies {
				p, _ := st.PolicyGetByID(ctx, id)
				t.Logf("policy %s InUse %d", id, p.InUse)
			}
			t.Fatal("timed out waiting for every event to be released or dead")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, 10*time.Second, "tokens back", func() bool {
		for id := range policies {
			p, _ := st.PolicyGetByID(ctx, id)
			if p.InUse != 0 {
				return false
			}
		}
		return true
	})
	t.Logf("C holds %v, B holds %v", c.bal.Held(), b.bal.Held())

	mu.Lock()
	defer mu.Unlock()
	released, dead := 0, 0
	for _, e := range evs {
		cur := statusOf(t, st, e.ID)
		switch cur.Status {
		case model.EventReleased:
			released++
			if !okOnce[e.ID] {
				t.Errorf("%s is released but the consumer never accepted it (lost)", e.ID)
			}
		case model.EventDead:
			dead++
			if cur.LastError == "" || cur.Attempts < e.MaxAttempts {
				t.Errorf("%s is dead after %d attempts, last error %q", e.ID, cur.Attempts, cur.LastError)
			}
		}
	}
	for i, n := range counts {
		t.Logf("consumer behaviour %-13s %d deliveries", behaviourNames[i], n)
	}
	for id := range policies {
		p, _ := st.PolicyGetByID(ctx, id)
		t.Logf("policy %s: max %d, most held at a delivery %d, tokens timed out %d", id, p.MaxInFlight, maxSeen[id], p.TimedOut)
	}
	t.Logf("%d events: %d released, %d dead", len(evs), released, dead)
	// Invariant 3.
	for _, v := range violations {
		t.Error(v)
	}
	if maxSeen["p-manual"] < 2 {
		t.Errorf("p-manual never had 2 tokens out: the test did not exercise the bound")
	}
}
