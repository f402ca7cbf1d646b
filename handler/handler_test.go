package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

type receipt struct {
	msg delivery.Message
	at  time.Time
}

type recorder struct {
	// now stamps receipts; nil is the real clock.
	now  func() time.Time
	mu   sync.Mutex
	list []receipt
}

func (r *recorder) add(m delivery.Message) {
	at := time.Now()
	if r.now != nil {
		at = r.now()
	}
	r.mu.Lock()
	r.list = append(r.list, receipt{m, at})
	r.mu.Unlock()
}

func (r *recorder) all() []receipt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receipt(nil), r.list...)
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.list)
}

func fastBackoff(int) time.Duration { return 50 * time.Millisecond }

func TestFiresAtLaunchTime(t *testing.T) {
	st := openStore(t)
	rec := &recorder{}
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) { rec.add(m) })
	launch := time.Now().Add(500 * time.Millisecond)
	evs := makeEvents(40, evOpts{schedule: "s1", url: srv.URL, launch: launch, spread: 400 * time.Millisecond})
	insert(t, st, evs)
	startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	waitFor(t, 10*time.Second, "40 deliveries", func() bool { return rec.len() == 40 })
	byID := map[string]*model.Event{}
	for _, e := range evs {
		byID[e.ID] = e
	}
	// How late they come is a figure of speed: BenchmarkFireLatenessHTTP.
	for _, r := range rec.all() {
		e := byID[r.msg.EventID]
		if late := r.at.Sub(e.LaunchAt); late < 0 {
			t.Errorf("%s delivered %s before its launch time", e.ID, -late)
		}
		if r.msg.Attempt != 1 || r.msg.Index != e.Index || r.msg.Count != 40 {
			t.Errorf("message %+v", r.msg)
		}
	}
	waitFor(t, 5*time.Second, "all released", func() bool { return allIn(t, st, evs, model.EventReleased) })
	if e := statusOf(t, st, evs[0].ID); e.FinishedAt == nil || e.DeliveredAt == nil {
		t.Fatalf("released event lacks FinishedAt/DeliveredAt: %+v", e)
	}
}

func TestFakeClockTimer(t *testing.T) {
	st := openStore(t)
	rec := &recorder{}
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) { rec.add(m) })
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 2, 59, 0, 0, time.UTC))
	launch := clock.Now().Add(10 * time.Second)
	evs := makeEvents(3, evOpts{schedule: "s1", url: srv.URL, launch: launch})
	insert(t, st, evs)
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The handler's own prefetch loop may have claimed some of them in a
	// call that is still adding them to the heap.
	waitFor(t, 20*time.Second, "3 events in the timer heap", func() bool { return h.Scheduled() == 3 })
	clock.Advance(9 * time.Second)
	// A sentinel due at 9 s: the timer takes it off the heap in one pass,
	// at one instant, with every other event it finds due then.
	sentinel := makeEvents(1, evOpts{schedule: "s0", url: srv.URL, launch: clock.Now()})[0]
	insert(t, st, []*model.Event{sentinel})
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the sentinel's delivery", func() bool { return rec.len() > 0 })
	if n := h.Scheduled(); n != 3 {
		t.Fatalf("%d of 3 events left in the timer heap at 9 s, 1 s before their launch", n)
	}
	if got := rec.all(); len(got) != 1 || got[0].msg.EventID != sentinel.ID {
		t.Fatalf("%d deliveries at 9 s, want the sentinel's alone", len(got))
	}
	clock.Advance(time.Second)
	waitFor(t, 20*time.Second, "deliveries at launch", func() bool { return rec.len() == 4 })
}

func TestRetries(t *testing.T) {
	t.Run("BackoffThenSuccess", func(t *testing.T) {
		const backoff = 100 * time.Millisecond
		st := openStore(t)
		// The fake clock moves only when the test advances it: a retry
		// cannot come before its backoff unless it was scheduled too early.
		clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC))
		var calls atomic.Int64
		rec := &recorder{now: clock.Now}
		srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
			rec.add(m)
			if calls.Add(1) <= 2 {
				http.Error(w, "boom", http.StatusInternalServerError)
			}
		})
		evs := makeEvents(1, evOpts{schedule: "s1", url: srv.URL, launch: clock.Now(), maxAttempts: 5})
		insert(t, st, evs)
		var log attemptLog
		h := startHandler(t, handler.Config{Backoff: func(int) time.Duration { return backoff }, PrefetchInterval: 50 * time.Millisecond},
			handler.Deps{Store: st, Shards: allShards(1), Clock: clock, Hooks: handler.Hooks{Attempted: log.hook},
				Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
		for i := 1; i <= 2; i++ {
			waitFor(t, 10*time.Second, fmt.Sprintf("attempt %d written", i), func() bool { return log.len() == i })
			e := statusOf(t, st, evs[0].ID)
			// Retrying, or scheduled again by the handler's own prefetch.
			if want := clock.Now().Add(backoff); e.Attempts != i || !e.LaunchAt.Equal(want) {
				t.Fatalf("after failed attempt %d: %d attempts, next at %v; want %d at %v", i, e.Attempts, e.LaunchAt, i, want)
			}
			if err := h.Prefetch(context.Background()); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the retry in the timer heap", func() bool { return h.Scheduled() == 1 })
			if n := rec.len(); n != i {
				t.Fatalf("%d receipts before the backoff of attempt %d was over, want %d", n, i, i)
			}
			clock.Advance(backoff)
		}
		waitFor(t, 10*time.Second, "released", func() bool { return allIn(t, st, evs, model.EventReleased) })
		e := statusOf(t, st, evs[0].ID)
		// Attempts counts every attempt, the successful third one included.
		if e.Attempts != 3 || !strings.Contains(e.LastError, "500") {
			t.Fatalf("attempts %d lastError %q", e.Attempts, e.LastError)
		}
		rs := rec.all()
		if len(rs) != 3 || rs[2].msg.Attempt != 3 {
			t.Fatalf("receipts %d, last attempt %d", len(rs), rs[len(rs)-1].msg.Attempt)
		}
		for i := 1; i < 3; i++ {
			if gap := rs[i].at.Sub(rs[i-1].at); gap != backoff {
				t.Fatalf("attempt %d came %s after the one before, want the backoff, %s", i+1, gap, backoff)
			}
		}
	})

	t.Run("MaxAttemptsThenDead", func(t *testing.T) {
		st := openStore(t)
		srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "nope", http.StatusBadGateway)
		})
		evs := makeEvents(3, evOpts{schedule: "s1", url: srv.URL, launch: time.Now(), maxAttempts: 3})
		insert(t, st, evs)
		startHandler(t, handler.Config{Backoff: fastBackoff, PrefetchInterval: 50 * time.Millisecond}, handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
		waitFor(t, 10*time.Second, "dead", func() bool { return allIn(t, st, evs, model.EventDead) })
		e := statusOf(t, st, evs[0].ID)
		if e.Attempts != 3 || e.FinishedAt == nil || !strings.Contains(e.LastError, "502") {
			t.Fatalf("dead event: attempts %d lastError %q", e.Attempts, e.LastError)
		}
	})

	t.Run("RetryAfterIsHonouredAndNotCounted", func(t *testing.T) {
		st := openStore(t)
		clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC))
		rec := &recorder{now: clock.Now}
		srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
			rec.add(m)
			if rec.len() <= 2 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader([]int{http.StatusTooManyRequests, http.StatusServiceUnavailable}[rec.len()-1])
			}
		})
		evs := makeEvents(1, evOpts{schedule: "s1", url: srv.URL, launch: clock.Now(), maxAttempts: 1})
		insert(t, st, evs)
		var log attemptLog
		h := startHandler(t, handler.Config{Backoff: fastBackoff, PrefetchInterval: 50 * time.Millisecond},
			handler.Deps{Store: st, Shards: allShards(1), Clock: clock, Hooks: handler.Hooks{Attempted: log.hook},
				Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
		for i := 1; i <= 2; i++ {
			waitFor(t, 10*time.Second, fmt.Sprintf("attempt %d written", i), func() bool { return log.len() == i })
			e := statusOf(t, st, evs[0].ID)
			// Retrying, or scheduled again by the handler's own prefetch.
			if want := clock.Now().Add(time.Second); e.Status.Finished() || !e.LaunchAt.Equal(want) {
				t.Fatalf("after Retry-After answer %d: %s, next attempt at %v; want one at %v", i, e.Status, e.LaunchAt, want)
			}
			if err := h.Prefetch(context.Background()); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the retry in the timer heap", func() bool { return h.Scheduled() == 1 })
			if n := rec.len(); n != i {
				t.Fatalf("%d receipts before the Retry-After of answer %d was over, want %d", n, i, i)
			}
			clock.Advance(time.Second)
		}
		// maxAttempts 1: a counted failure would make it dead.
		waitFor(t, 10*time.Second, "released", func() bool { return allIn(t, st, evs, model.EventReleased) })
		rs := rec.all()
		if len(rs) != 3 {
			t.Fatalf("%d receipts, want 3", len(rs))
		}
		for i := 1; i < 3; i++ {
			if gap := rs[i].at.Sub(rs[i-1].at); gap != time.Second {
				t.Fatalf("attempt %d came %s after a Retry-After of 1s", i+1, gap)
			}
			if rs[i].msg.Attempt != 1 {
				t.Fatalf("attempt number %d, want 1 (Retry-After is not a failure)", rs[i].msg.Attempt)
			}
		}
		// The two Retry-After answers are not counted; the successful
		// attempt is.
		if e := statusOf(t, st, evs[0].ID); e.Attempts != 1 {
			t.Fatalf("Attempts = %d, want 1", e.Attempts)
		}
	})

	t.Run("PermanentErrorIsDeadAtOnce", func(t *testing.T) {
		st := openStore(t)
		evs := makeEvents(2, evOpts{schedule: "s1", url: "ftp://127.0.0.1/x", launch: time.Now(), maxAttempts: 10})
		insert(t, st, evs)
		startHandler(t, handler.Config{Backoff: fastBackoff}, handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
		waitFor(t, 10*time.Second, "dead", func() bool { return allIn(t, st, evs, model.EventDead) })
		if e := statusOf(t, st, evs[0].ID); e.Attempts != 1 {
			t.Fatalf("Attempts = %d", e.Attempts)
		}
	})

	t.Run("UnknownTargetTypeIsDead", func(t *testing.T) {
		st := openStore(t)
		evs := makeEvents(1, evOpts{schedule: "s1", launch: time.Now()})
		evs[0].Target = model.Target{Type: model.TargetSQS, QueueURL: "http://127.0.0.1:1/q"}
		insert(t, st, evs)
		startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
		waitFor(t, 10*time.Second, "dead", func() bool { return allIn(t, st, evs, model.EventDead) })
	})
}

func TestThrottled(t *testing.T) {
	t.Run("ManualReleaseKeepsBound", func(t *testing.T) {
		st := openStore(t)
		createPolicy(t, st, &model.Policy{ID: "pol", MaxInFlight: 2, TokenTimeout: time.Minute})
		var mu sync.Mutex
		held, maxHeld := 0, 0
		var h atomic.Pointer[handler.Handler] // set once started; the consumer releases through it
		var wg sync.WaitGroup
		t.Cleanup(wg.Wait)
		srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			held++
			maxHeld = max(maxHeld, held)
			mu.Unlock()
			wg.Go(func() {
				time.Sleep(30 * time.Millisecond)
				mu.Lock()
				held--
				mu.Unlock()
				e, err := st.EventGetByID(context.Background(), m.EventID)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := throttleOf(h.Load()).Release(context.Background(), e, time.Now()); err != nil {
					t.Error(err)
				}
			})
		})
		evs := makeEvents(20, evOpts{schedule: "s1", policy: "pol", url: srv.URL, launch: time.Now()})
		insert(t, st, evs)
		h.Store(startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}},
			func(c *throttle.Config, _ *throttle.Deps) { c.PollInterval = time.Hour }))
		waitFor(t, 20*time.Second, "all released", func() bool {
			p, _ := st.PolicyGetByID(context.Background(), "pol")
			return allIn(t, st, evs, model.EventReleased) && p.InUse == 0
		})
		mu.Lock()
		defer mu.Unlock()
		if maxHeld > 2 {
			t.Fatalf("consumer held %d tokens at once, max 2", maxHeld)
		}
		if maxHeld < 2 {
			t.Fatalf("consumer never held 2 tokens (max %d): the bucket is not using its tokens", maxHeld)
		}
	})

	t.Run("AutoReleaseNeedsNoReleaseCall", func(t *testing.T) {
		st := openStore(t)
		createPolicy(t, st, &model.Policy{ID: "auto", MaxInFlight: 1, AutoRelease: true, TokenTimeout: time.Minute})
		var inFlight, maxIn atomic.Int64
		srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
			n := inFlight.Add(1)
			if n > maxIn.Load() {
				maxIn.Store(n)
			}
			time.Sleep(5 * time.Millisecond)
			inFlight.Add(-1)
		})
		evs := makeEvents(10, evOpts{schedule: "s1", policy: "auto", url: srv.URL, launch: time.Now()})
		insert(t, st, evs)
		startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
		waitFor(t, 10*time.Second, "all released", func() bool { return allIn(t, st, evs, model.EventReleased) })
		if maxIn.Load() != 1 {
			t.Fatalf("%d deliveries in flight at once, max 1", maxIn.Load())
		}
	})

	t.Run("TimedOutTokensAreReclaimedAndCounted", func(t *testing.T) {
		st := openStore(t)
		createPolicy(t, st, &model.Policy{ID: "slow", MaxInFlight: 2, TokenTimeout: 200 * time.Millisecond})
		rec := &recorder{}
		srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) { rec.add(m) }) // never releases
		evs := makeEvents(4, evOpts{schedule: "s1", policy: "slow", url: srv.URL, launch: time.Now()})
		insert(t, st, evs)
		var reclaimed atomic.Int64
		startHandler(t, handler.Config{ReclaimInterval: 100 * time.Millisecond}, handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}},
			func(_ *throttle.Config, d *throttle.Deps) {
				d.Reclaimed = func(evs []*model.Event) { reclaimed.Add(int64(len(evs))) }
			})
		waitFor(t, 10*time.Second, "all released by timeout", func() bool {
			p, _ := st.PolicyGetByID(context.Background(), "slow")
			return allIn(t, st, evs, model.EventReleased) && p.TimedOut == 4
		})
		p, _ := st.PolicyGetByID(context.Background(), "slow")
		if p.TimedOut != 4 || p.InUse != 0 || reclaimed.Load() != 4 {
			t.Fatalf("TimedOut %d InUse %d reclaimed %d", p.TimedOut, p.InUse, reclaimed.Load())
		}
		if e := statusOf(t, st, evs[0].ID); !e.TokenTimedOut {
			t.Fatal("TokenTimedOut not set")
		}
		if rec.len() != 4 {
			t.Fatalf("%d deliveries, want 4", rec.len())
		}
	})

	t.Run("ExtendKeepsTheToken", func(t *testing.T) {
		const timeout, beat = 300 * time.Millisecond, 200 * time.Millisecond
		ctx := context.Background()
		st := openStore(t)
		clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC))
		createPolicy(t, st, &model.Policy{ID: "ext", MaxInFlight: 1, TokenTimeout: timeout})
		srv := consumer(t, func(delivery.Message, http.ResponseWriter, *http.Request) {})
		evs := makeEvents(1, evOpts{schedule: "s1", policy: "ext", url: srv.URL, launch: clock.Now()})
		insert(t, st, evs)
		var log attemptLog
		h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock,
			Hooks:      handler.Hooks{Attempted: log.hook},
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
		waitFor(t, 10*time.Second, "the delivery written", func() bool { return log.len() == 1 })
		// Heartbeats every beat extend the token by timeout; a reclaim
		// after each, once the expiry that the token had before it passed,
		// must leave the token alone.
		for i := 1; i <= 2; i++ {
			clock.Advance(beat)
			e := statusOf(t, st, evs[0].ID)
			before := *e.TokenExpiresAt
			if err := throttle.Extend(ctx, st, e, clock.Now().Add(timeout), clock.Now()); err != nil {
				t.Fatalf("extend %d: %v", i, err)
			}
			clock.Advance(beat)
			if !clock.Now().After(before) {
				t.Fatalf("heartbeat %d: the clock %v is not past the old expiry %v", i, clock.Now(), before)
			}
			if err := h.Reclaim(ctx); err != nil {
				t.Fatal(err)
			}
			e = statusOf(t, st, evs[0].ID)
			p, _ := st.PolicyGetByID(ctx, "ext")
			if e.Status != model.EventDelivered || e.TokenTimedOut || p.TimedOut != 0 || p.InUse != 1 {
				t.Fatalf("after heartbeat %d and a reclaim: %s, timed out %v, policy TimedOut %d InUse %d; want the token kept",
					i, e.Status, e.TokenTimedOut, p.TimedOut, p.InUse)
			}
		}
		e := statusOf(t, st, evs[0].ID)
		if ok, err := throttleOf(h).Release(ctx, e, clock.Now()); !ok || err != nil {
			t.Fatalf("release after extend = %v, %v", ok, err)
		}
		p, _ := st.PolicyGetByID(ctx, "ext")
		if e := statusOf(t, st, evs[0].ID); e.Status != model.EventReleased || e.TokenTimedOut || p.TimedOut != 0 || p.InUse != 0 {
			t.Fatalf("after release: %s, timed out %v, policy TimedOut %d InUse %d", e.Status, e.TokenTimedOut, p.TimedOut, p.InUse)
		}
	})
}

func TestShardLost(t *testing.T) {
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC))
	rec := &recorder{now: clock.Now}
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) { rec.add(m) })
	evs := makeEvents(10, evOpts{schedule: "s1", url: srv.URL, launch: clock.Now().Add(time.Second)})
	insert(t, st, evs)
	sh := allShards(1)
	var log attemptLog
	h := startHandler(t, handler.Config{PrefetchInterval: 50 * time.Millisecond}, handler.Deps{Store: st, Shards: sh, Clock: clock,
		Hooks:      handler.Hooks{Attempted: log.hook},
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	waitFor(t, 2*time.Second, "claimed", func() bool { return h.Scheduled() == 10 })
	sh.set(0)
	waitFor(t, 2*time.Second, "dropped", func() bool { return h.Scheduled() == 0 })
	// Their launch time passes while the shard is not owned.
	clock.Advance(2 * time.Second)
	// The shard comes back under a newer fence: the events are claimed again.
	sh.set(2)
	// Taken over after their launch time, they wait out the takeover grace.
	waitFor(t, 5*time.Second, "claimed again", func() bool { return h.Scheduled() == 10 })
	if n := rec.len(); n != 0 {
		t.Fatalf("%d events delivered for a shard no longer owned", n)
	}
	clock.Advance(h.Config().TakeoverGrace)
	waitFor(t, 5*time.Second, "released", func() bool { return allIn(t, st, evs, model.EventReleased) })
	// Stop drains: every attempt made has been reported.
	h.Stop()
	if rec.len() != 10 {
		t.Fatalf("%d deliveries, want 10", rec.len())
	}
	for _, a := range log.all() {
		if a.event.Fence != 2 {
			t.Errorf("event %s delivered under fence %d, a shard no longer owned", a.event.ID, a.event.Fence)
		}
	}
	if n := log.len(); n != 10 {
		t.Fatalf("%d attempts reported, want 10", n)
	}
}

func TestRetention(t *testing.T) {
	st := openStore(t)
	now := time.Now()
	old, recent := now.Add(-3*time.Hour), now.Add(-time.Minute)
	evs := makeEvents(6, evOpts{schedule: "s1", url: "http://127.0.0.1:1", launch: now.Add(-4 * time.Hour)})
	for i, e := range evs {
		switch i {
		case 0, 1:
			e.Status, e.FinishedAt = model.EventReleased, &old
		case 2:
			e.Status, e.FinishedAt = model.EventCancelled, &old
		case 3:
			e.Status, e.FinishedAt = model.EventReleased, &recent
		case 4:
			e.Status, e.FinishedAt = model.EventDead, &old // dead letters stay for redrive
		case 5:
			e.Status = model.EventDelivered
		}
	}
	insert(t, st, evs)
	deps := handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Second)}}
	deps.Throttle = newThrottle(t, handler.Config{Shards: testShards}, deps)
	h, err := handler.New(handler.Config{Shards: testShards, Retention: time.Hour}, deps)
	if err != nil {
		t.Fatal(err)
	}
	n, err := h.Purge(context.Background())
	if err != nil || n != 3 {
		t.Fatalf("Purge = %d, %v; want 3", n, err)
	}
	for i, e := range evs {
		_, err := st.EventGetByID(context.Background(), e.ID)
		gone := errors.Is(err, model.ErrNotFound)
		if gone != (i <= 2) {
			t.Errorf("event %d (%s): gone=%v", i, e.Status, gone)
		}
	}
	// Only the owner of shard 0 purges.
	deps.Shards = allShards(0)
	deps.Throttle = newThrottle(t, handler.Config{Shards: testShards}, deps)
	h2, err := handler.New(handler.Config{Shards: testShards, Retention: time.Nanosecond}, deps)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := h2.Purge(context.Background()); n != 0 {
		t.Fatalf("an instance without shard 0 purged %d", n)
	}
}

func TestConfig(t *testing.T) {
	deps := handler.Deps{Store: nil}
	if _, err := handler.New(handler.Config{}, deps); err == nil || !strings.Contains(err.Error(), "Store") {
		t.Fatalf("missing store: %v", err)
	}
	st := openStore(t)
	deps = handler.Deps{Store: st, Shards: allShards(1), Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Second)}}
	if _, err := handler.New(handler.Config{}, deps); err == nil || !strings.Contains(err.Error(), "Throttle") {
		t.Fatalf("missing throttle: %v", err)
	}
	deps.Throttle = newThrottle(t, handler.Config{}, deps)
	for _, tc := range []struct {
		field string
		cfg   handler.Config
	}{
		{"Horizon", handler.Config{Horizon: -time.Second}},
		{"MaxBatch", handler.Config{MaxBatch: -1}},
		{"Workers", handler.Config{Workers: -2}},
		{"Retention", handler.Config{Retention: -time.Hour}},
		{"PrefetchInterval", handler.Config{Horizon: time.Second, PrefetchInterval: time.Minute}},
		{"DrainTimeout", handler.Config{DrainTimeout: -time.Second}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := handler.New(tc.cfg, deps)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v does not name %s", err, tc.field)
			}
		})
	}
	h, err := handler.New(handler.Config{}, deps)
	if err != nil {
		t.Fatal(err)
	}
	c := h.Config()
	if c.Shards != 16 || c.Horizon != 30*time.Second || c.Retention != 24*time.Hour || c.DefaultMaxAttempts != 5 ||
		c.DrainTimeout != 10*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
	// Stop before Start, and twice, is safe.
	h.Stop()
	h.Stop()
}

func TestDefaultBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempts int
		base     time.Duration
	}{{1, 6 * time.Second}, {2, 21 * time.Second}, {3, 86 * time.Second}, {5, 630 * time.Second}} {
		for range 20 {
			d := handler.DefaultBackoff(tc.attempts)
			if d < tc.base || d > tc.base+tc.base/10 {
				t.Fatalf("DefaultBackoff(%d) = %s, want %s plus up to 10%%", tc.attempts, d, tc.base)
			}
		}
	}
	if d := handler.DefaultBackoff(1_000_000); d <= 0 {
		t.Fatalf("overflow: %s", d)
	}
}
