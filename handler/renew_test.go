package handler_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// lateStart runs after every write that starts deliveries (scheduled →
// delivering), as a store that is slow or a reclaim racing the send would.
type lateStart struct {
	*embedded.Store
	after func(ts []store.EventTransition, res []error)
}

func (s *lateStart) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	res, err := s.Store.EventTransition(ctx, ts)
	if err == nil && len(ts) > 0 && ts[0].From == model.EventScheduled && ts[0].To == model.EventDelivering {
		s.after(ts, res)
	}
	return res, err
}

// A throttled event that waited between taking its token and its send gets
// its token renewed: the consumer has the policy's whole tokenTimeout from
// receipt (and the message says until when).
func TestLateSendRenewsToken(t *testing.T) {
	const timeout, renewAfter, delay = time.Minute, 100 * time.Millisecond, 400 * time.Millisecond
	base := openStore(t)
	createPolicy(t, base, &model.Policy{ID: "pol", MaxInFlight: 4, TokenTimeout: timeout})
	// The first start write takes delay on the fake clock; nothing else
	// moves it, so every send and receipt happens at t0+delay.
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC))
	var slow sync.Once
	st := &lateStart{Store: base, after: func([]store.EventTransition, []error) { slow.Do(func() { clock.Advance(delay) }) }}
	type got struct {
		m  delivery.Message
		at time.Time
	}
	var mu sync.Mutex
	var seen []got
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		seen = append(seen, got{m, clock.Now()})
		mu.Unlock()
	})
	evs := makeEvents(4, evOpts{schedule: "s1", policy: "pol", url: srv.URL, launch: clock.Now()})
	insert(t, base, evs)
	startHandler(t, handler.Config{TokenRenewAfter: renewAfter}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	waitFor(t, 10*time.Second, "all delivered", func() bool { return allIn(t, base, evs, model.EventDelivered) })

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(evs) {
		t.Fatalf("consumer got %d deliveries, want %d", len(seen), len(evs))
	}
	for _, g := range seen {
		exp := g.m.Release.ExpiresAt
		// Without the renewal delay less would be left.
		if left := exp.Sub(g.at); left != timeout {
			t.Errorf("event %s reached the consumer with %s of its %s token left, want all of it", g.m.EventID, left, timeout)
		}
		if stored := statusOf(t, base, g.m.EventID).TokenExpiresAt; stored == nil || !stored.Equal(exp) {
			t.Errorf("event %s: message says the token expires at %v, the store %v", g.m.EventID, exp, stored)
		}
	}
}

// A token reclaimed between the start write and the send is not used: the
// attempt is not sent (the reclaim gave the token to another event), and
// the event is delivered again as the retry the reclaim made of it.
func TestTokenReclaimedBeforeSendIsNotSent(t *testing.T) {
	ctx := context.Background()
	base := openStore(t)
	createPolicy(t, base, &model.Policy{ID: "pol", MaxInFlight: 1, TokenTimeout: time.Minute})
	var reclaimedOnce atomic.Bool
	st := &lateStart{Store: base, after: func(ts []store.EventTransition, res []error) {
		if res[0] != nil || !reclaimedOnce.CompareAndSwap(false, true) {
			return
		}
		// What the token-timeout reclaim does, between the start and the send.
		now := time.Now()
		r, err := base.EventTransition(ctx, []store.EventTransition{{ID: ts[0].ID, From: model.EventDelivering,
			To: model.EventRetrying, Attempts: 1, LaunchAt: now, ClearToken: true, At: now}})
		if err != nil || r[0] != nil {
			t.Errorf("simulated reclaim: %v %v", err, r)
			return
		}
		if err := base.PolicyReleaseTokens(ctx, "pol", 1, 1); err != nil {
			t.Error(err)
		}
	}}
	var h atomic.Pointer[handler.Handler]
	var mu sync.Mutex
	var attempts []int
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		attempts = append(attempts, m.Attempt)
		mu.Unlock()
		wg.Go(func() {
			e, err := base.EventGetByID(ctx, m.EventID)
			if err == nil {
				_, err = throttleOf(h.Load()).Release(ctx, e, time.Now())
			}
			if err != nil {
				t.Error(err)
			}
		})
	})
	evs := makeEvents(1, evOpts{schedule: "s1", policy: "pol", url: srv.URL, launch: time.Now()})
	insert(t, base, evs)
	h.Store(startHandler(t, handler.Config{TokenRenewAfter: time.Nanosecond, PrefetchInterval: 50 * time.Millisecond},
		handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}}))
	waitFor(t, 10*time.Second, "released", func() bool {
		p, _ := base.PolicyGetByID(ctx, "pol")
		return allIn(t, base, evs, model.EventReleased) && p.InUse == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 1 || attempts[0] != 2 {
		t.Fatalf("consumer got attempts %v, want only [2] (attempt 1's token was reclaimed before its send)", attempts)
	}
}

// A copy whose token expired while it waited is not sent, even when the
// event has meanwhile been reclaimed and started again under the same fence
// (a renewal could not tell the new holder's state from its own): only the
// new holder runs on the token.
func TestExpiredTokenCopyIsNotSent(t *testing.T) {
	ctx := context.Background()
	base := openStore(t)
	const timeout = 300 * time.Millisecond
	createPolicy(t, base, &model.Policy{ID: "pol", MaxInFlight: 1, TokenTimeout: timeout})
	var once atomic.Bool
	st := &lateStart{Store: base, after: func(ts []store.EventTransition, res []error) {
		if res[0] != nil || !once.CompareAndSwap(false, true) {
			return
		}
		time.Sleep(timeout + 50*time.Millisecond) // the copy's token expires
		// The reclaim retries it, and it takes the token again at once.
		now := time.Now()
		exp := now.Add(timeout)
		r, err := base.EventTransition(ctx, []store.EventTransition{
			{ID: ts[0].ID, From: model.EventDelivering, To: model.EventRetrying, Attempts: 1, LaunchAt: now, ClearToken: true, At: now},
			{ID: ts[0].ID, From: model.EventRetrying, Fence: ts[0].Fence, To: model.EventDelivering, TokenExpiresAt: &exp, At: now},
		})
		if err != nil || r[0] != nil || r[1] != nil {
			t.Errorf("simulated reclaim and restart: %v %v", err, r)
		}
	}}
	var h atomic.Pointer[handler.Handler]
	var mu sync.Mutex
	var attempts []int
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		attempts = append(attempts, m.Attempt)
		mu.Unlock()
		wg.Go(func() {
			e, err := base.EventGetByID(ctx, m.EventID)
			if err == nil {
				_, err = throttleOf(h.Load()).Release(ctx, e, time.Now())
			}
			if err != nil {
				t.Error(err)
			}
		})
	})
	evs := makeEvents(1, evOpts{schedule: "s1", policy: "pol", url: srv.URL, launch: time.Now()})
	insert(t, base, evs)
	// The handler's own reclaim first runs well after the simulated one
	// (which would otherwise find the event reclaimed already); it then
	// reclaims the restarted event once its token expires.
	h.Store(startHandler(t, handler.Config{TokenRenewAfter: time.Nanosecond, PrefetchInterval: 50 * time.Millisecond,
		ReclaimInterval: time.Second},
		handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}}))
	waitFor(t, 10*time.Second, "released", func() bool { return allIn(t, base, evs, model.EventReleased) })
	mu.Lock()
	defer mu.Unlock()
	for _, a := range attempts {
		if a == 1 {
			t.Fatalf("consumer got attempts %v: attempt 1 was sent after its token expired and the event took a new one", attempts)
		}
	}
}
