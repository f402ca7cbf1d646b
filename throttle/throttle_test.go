package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/internal/testkit/throttletest"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/throttle"
)

// oneShard owns every shard under one fence.
type oneShard struct{ fence int64 }

func (o oneShard) Held() map[int]int64 {
	m := map[int]int64{}
	for i := range 16 {
		m[i] = o.fence
	}
	return m
}
func (o oneShard) Owns(int, int64) bool { return true }

func newPolicy(t *testing.T, st *throttletest.MemStore, id string, max int, timeout time.Duration) *model.Policy {
	t.Helper()
	p := &model.Policy{ID: id, TenantID: "t1", Name: id, MaxInFlight: max, TokenTimeout: timeout, Version: 1}
	if err := st.PolicyCreate(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// scheduledEvents inserts n scheduled events of the policy (as a claim would
// leave them) and returns them as bucket items.
func scheduledEvents(t *testing.T, st *throttletest.MemStore, policyID, schedule string, n int, fence int64) []throttle.Item {
	t.Helper()
	now := time.Now()
	items := make([]throttle.Item, n)
	evs := make([]*model.Event, n)
	for i := range n {
		e := &model.Event{ID: fmt.Sprintf("%s.%s.%d", policyID, schedule, i), ScheduleID: schedule, Index: i,
			PolicyID: policyID, Status: model.EventScheduled, Fence: fence, LaunchAt: now}
		evs[i] = e
		c := *e
		items[i] = throttle.Item{Event: &c, Fence: fence}
	}
	if _, err := st.EventInsertMany(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	return items
}

func holding(t *testing.T, st *throttletest.MemStore, policyID string) int {
	t.Helper()
	n, err := st.EventCountHoldingTokens(context.Background(), policyID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func inUse(t *testing.T, st *throttletest.MemStore, policyID string) int {
	t.Helper()
	p, err := st.PolicyGetByID(context.Background(), policyID)
	if err != nil {
		t.Fatal(err)
	}
	return p.InUse
}

func startThrottle(t *testing.T, st throttle.Store, cfg throttle.Config, dispatch func([]throttle.Item), reclaimed func([]*model.Event)) *throttle.Throttle {
	t.Helper()
	thr, err := throttle.New(cfg, throttle.Deps{Store: st, Shards: oneShard{fence: 1}, Reclaimed: reclaimed})
	if err != nil {
		t.Fatal(err)
	}
	// A single owner: every shard is settled under its fence.
	for s := range thr.Config().Shards {
		thr.MarkSettled(s, 1)
	}
	runThrottle(t, thr, dispatch)
	return thr
}

// runThrottle starts thr and passes what it dispatches to dispatch, one
// event at a time, until the test ends.
func runThrottle(t *testing.T, thr *throttle.Throttle, dispatch func([]throttle.Item)) {
	t.Helper()
	if err := thr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		for {
			select {
			case it := <-thr.Dispatched():
				dispatch([]throttle.Item{it})
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		thr.Stop()
		close(done)
		<-pumped
	})
}

// runInBubble runs f as subtest name in a synctest bubble: its clock is
// fake, and synctest.Wait tells when every goroutine it started is blocked,
// that is when the throttle has done all it will do without a wake-up or
// a timer.
func runInBubble(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) { synctest.Test(t, f) })
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRelease(t *testing.T) {
	ctx := context.Background()
	now := time.Now()

	t.Run("TwiceReturnsOneToken", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newPolicy(t, st, "p", 5, time.Minute)
		items := scheduledEvents(t, st, "p", "s", 1, 1)
		if n, _ := st.PolicyAcquireTokens(ctx, "p", 2); n != 2 {
			t.Fatalf("acquired %d", n)
		}
		// Make the event hold one of the two tokens; the other is held by
		// someone else and must stay out.
		exp := now.Add(time.Minute)
		if _, err := st.EventTransition(ctx, transition(items[0].Event.ID, model.EventScheduled, model.EventDelivered, &exp)); err != nil {
			t.Fatal(err)
		}
		e, _ := st.EventGetByID(ctx, items[0].Event.ID)
		for i, want := range []bool{true, false, false} {
			got, err := throttle.Release(ctx, st, e, now)
			if err != nil || got != want {
				t.Fatalf("release #%d = %v, %v; want %v", i+1, got, err, want)
			}
		}
		if n := inUse(t, st, "p"); n != 1 {
			t.Fatalf("InUse = %d after release, want 1", n)
		}
		e, _ = st.EventGetByID(ctx, e.ID)
		if e.Status != model.EventReleased || e.FinishedAt == nil || e.TokenExpiresAt != nil {
			t.Fatalf("event after release: %+v", e)
		}
	})

	t.Run("StaleStatusStillReleases", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newPolicy(t, st, "p", 5, time.Minute)
		items := scheduledEvents(t, st, "p", "s", 1, 1)
		_, _ = st.PolicyAcquireTokens(ctx, "p", 1)
		exp := now.Add(time.Minute)
		_, _ = st.EventTransition(ctx, transition(items[0].Event.ID, model.EventScheduled, model.EventDelivering, &exp))
		stale, _ := st.EventGetByID(ctx, items[0].Event.ID) // delivering
		// The handler moves it on meanwhile.
		_, _ = st.EventTransition(ctx, transition(items[0].Event.ID, model.EventDelivering, model.EventDelivered, nil))
		if got, err := throttle.Release(ctx, st, stale, now); err != nil || !got {
			t.Fatalf("release = %v, %v", got, err)
		}
		if n := inUse(t, st, "p"); n != 0 {
			t.Fatalf("InUse = %d", n)
		}
	})

	t.Run("ConcurrentReleasesReturnOneToken", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newPolicy(t, st, "p", 100, time.Minute)
		items := scheduledEvents(t, st, "p", "s", 50, 1)
		_, _ = st.PolicyAcquireTokens(ctx, "p", 50)
		_, _ = st.PolicyAcquireTokens(ctx, "p", 7) // held elsewhere
		for _, it := range items {
			_, _ = st.EventTransition(ctx, transition(it.Event.ID, model.EventScheduled, model.EventDelivered, nil))
		}
		var wins atomic.Int64
		var wg sync.WaitGroup
		for _, it := range items {
			e, _ := st.EventGetByID(ctx, it.Event.ID)
			for range 3 {
				wg.Go(func() {
					if ok, err := throttle.Release(ctx, st, e, now); err != nil {
						t.Error(err)
					} else if ok {
						wins.Add(1)
					}
				})
			}
		}
		wg.Wait()
		if wins.Load() != 50 {
			t.Fatalf("%d releases won, want 50", wins.Load())
		}
		if n := inUse(t, st, "p"); n != 7 {
			t.Fatalf("InUse = %d, want 7", n)
		}
	})

	t.Run("NotHoldingIsHarmless", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newPolicy(t, st, "p", 5, time.Minute)
		items := scheduledEvents(t, st, "p", "s", 1, 1)
		_, _ = st.PolicyAcquireTokens(ctx, "p", 1)
		e, _ := st.EventGetByID(ctx, items[0].Event.ID) // scheduled: holds nothing
		if got, err := throttle.Release(ctx, st, e, now); err != nil || got {
			t.Fatalf("release = %v, %v", got, err)
		}
		if n := inUse(t, st, "p"); n != 1 {
			t.Fatalf("InUse = %d, want 1 (nothing returned)", n)
		}
	})

	t.Run("UnavailableStore", func(t *testing.T) {
		st := throttletest.NewMemStore()
		st.SetDown(true)
		e := &model.Event{ID: "x", PolicyID: "p", Status: model.EventDelivered}
		if _, err := throttle.Release(ctx, st, e, now); err == nil {
			t.Fatal("no error from a store that is down")
		}
	})
}

func TestExtend(t *testing.T) {
	ctx := context.Background()
	st := throttletest.NewMemStore()
	newPolicy(t, st, "p", 5, time.Minute)
	items := scheduledEvents(t, st, "p", "s", 1, 1)
	_, _ = st.PolicyAcquireTokens(ctx, "p", 1)
	exp := time.Now().Add(time.Minute)
	_, _ = st.EventTransition(ctx, transition(items[0].Event.ID, model.EventScheduled, model.EventDelivered, &exp))
	e, _ := st.EventGetByID(ctx, items[0].Event.ID)
	until := time.Now().Add(time.Hour)
	if err := throttle.Extend(ctx, st, e, until, time.Now()); err != nil {
		t.Fatal(err)
	}
	e, _ = st.EventGetByID(ctx, e.ID)
	if e.Status != model.EventDelivered || e.TokenExpiresAt == nil || !e.TokenExpiresAt.Equal(until) {
		t.Fatalf("after extend: status %s expires %v", e.Status, e.TokenExpiresAt)
	}
	if _, err := throttle.Release(ctx, st, e, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := throttle.Extend(ctx, st, e, until, time.Now()); err != model.ErrConflict {
		t.Fatalf("extend after release = %v, want ErrConflict", err)
	}
}

func transition(id string, from, to model.EventStatus, exp *time.Time) []store.EventTransition {
	return []store.EventTransition{{ID: id, From: from, To: to, TokenExpiresAt: exp}}
}

func TestBucket(t *testing.T) {
	ctx := context.Background()

	t.Run("BoundHoldsWithRandomReleases", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(testseed.Get(t, "THROTTLE_TEST_SEED", 1), 1))
		var rngMu sync.Mutex
		st := throttletest.NewMemStore()
		const maxInFlight = 7
		newPolicy(t, st, "p", maxInFlight, time.Minute)
		var thr *throttle.Throttle
		var delivered atomic.Int64
		var over atomic.Int64
		dispatch := func(items []throttle.Item) {
			for _, it := range items {
				if it.Event.Status != model.EventDelivering || it.Policy == nil {
					t.Errorf("dispatched %s in status %s", it.Event.ID, it.Event.Status)
				}
				if n := holding(t, st, "p"); n > maxInFlight {
					over.Add(1)
				}
				delivered.Add(1)
				go func(e *model.Event) {
					rngMu.Lock()
					d := time.Duration(rng.IntN(3000)) * time.Microsecond
					twice := rng.IntN(4) == 0
					// Mostly through the Throttle (hand-off), sometimes
					// through the store alone and a wake-up.
					storeOnly := rng.IntN(4) == 0
					rngMu.Unlock()
					time.Sleep(d)
					cur, _ := st.EventGetByID(ctx, e.ID)
					release := func() (bool, error) { return thr.Release(ctx, cur, time.Now()) }
					if storeOnly {
						release = func() (bool, error) { return throttle.Release(ctx, st, cur, time.Now()) }
					}
					if _, err := release(); err != nil {
						t.Error(err)
					}
					if twice {
						_, _ = release()
					}
					if storeOnly {
						thr.Released("p")
					}
				}(it.Event)
			}
		}
		thr = startThrottle(t, st, throttle.Config{PollInterval: time.Second}, dispatch, nil)
		var all []throttle.Item
		for s := range 5 {
			all = append(all, scheduledEvents(t, st, "p", fmt.Sprint("s", s), 100, 1)...)
		}
		thr.Enqueue(all...)
		waitFor(t, 20*time.Second, "all events released", func() bool { return delivered.Load() == 500 && holding(t, st, "p") == 0 })
		if over.Load() > 0 {
			t.Fatalf("%d dispatches saw more than %d tokens held", over.Load(), maxInFlight)
		}
		// InUse may lag the holders: a released token handed to the
		// bucket goes back to the store from the bucket's goroutine,
		// after the release returned. It must come down to 0.
		waitFor(t, 10*time.Second, "InUse back to 0", func() bool { return inUse(t, st, "p") == 0 })
	})

	runInBubble(t, "ReleaseWakesNextEventWithoutPolling", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newPolicy(t, st, "p", 1, time.Minute)
		got := make(chan *model.Event, 10)
		thr := startThrottle(t, st, throttle.Config{PollInterval: time.Hour}, func(items []throttle.Item) {
			for _, it := range items {
				got <- it.Event
			}
		}, nil)
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 2, 1)...)
		first := <-got
		// Every goroutine of the bubble is blocked: the bucket has done
		// all it can with the one token.
		synctest.Wait()
		select {
		case e := <-got:
			t.Fatalf("%s dispatched while the only token was out", e.ID)
		default:
		}
		if n := holding(t, st, "p"); n != 1 {
			t.Fatalf("%d events hold tokens while the only token is out, want 1", n)
		}
		cur, _ := st.EventGetByID(ctx, first.ID)
		if ok, err := throttle.Release(ctx, st, cur, time.Now()); !ok || err != nil {
			t.Fatalf("release = %v, %v", ok, err)
		}
		thr.Released("p")
		// The bubble's clock reaches 2 s long before the hour of polling.
		select {
		case <-got:
		case <-time.After(2 * time.Second):
			t.Fatal("the release did not wake the bucket")
		}
	})

	t.Run("PollsForReleasesMadeElsewhere", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newPolicy(t, st, "p", 1, time.Minute)
		got := make(chan *model.Event, 10)
		thr := startThrottle(t, st, throttle.Config{PollInterval: 20 * time.Millisecond}, func(items []throttle.Item) {
			for _, it := range items {
				got <- it.Event
			}
		}, nil)
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 2, 1)...)
		first := <-got
		cur, _ := st.EventGetByID(ctx, first.ID)
		_, _ = throttle.Release(ctx, st, cur, time.Now()) // no Released call
		select {
		case <-got:
		case <-time.After(2 * time.Second):
			t.Fatal("a release made elsewhere was not picked up by polling")
		}
	})

	t.Run("NewOwnerReconcilesLeakedTokens", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newPolicy(t, st, "p", 3, time.Minute)
		// A crashed owner acquired 3 tokens but never wrote delivering.
		st.SetInUse("p", 3)
		got := make(chan *model.Event, 10)
		thr := startThrottle(t, st, throttle.Config{PollInterval: 20 * time.Millisecond, ReconcileSettle: 10 * time.Millisecond},
			func(items []throttle.Item) {
				for _, it := range items {
					got <- it.Event
				}
			}, nil)
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 3, 1)...)
		for range 3 {
			select {
			case <-got:
			case <-time.After(2 * time.Second):
				t.Fatal("leaked tokens were not reconciled")
			}
		}
		if n := inUse(t, st, "p"); n != 3 {
			t.Fatalf("InUse = %d, want 3", n)
		}
	})

	t.Run("StarvedBucketRepairsLeakEarly", func(t *testing.T) {
		// Tokens leak while the bucket runs (an owner that acquired them
		// died); events wait and nothing moves. The repair must not wait
		// for the next ReconcileInterval (an hour here).
		st := throttletest.NewMemStore()
		newPolicy(t, st, "p", 2, time.Minute)
		got := make(chan *model.Event, 10)
		thr := startThrottle(t, st, throttle.Config{PollInterval: 5 * time.Millisecond,
			ReconcileInterval: time.Hour, ReconcileSettle: 10 * time.Millisecond},
			func(items []throttle.Item) {
				for _, it := range items {
					got <- it.Event
				}
			}, nil)
		thr.Enqueue(scheduledEvents(t, st, "p", "a", 1, 1)...)
		select {
		case <-got:
		case <-time.After(2 * time.Second):
			t.Fatal("first event not dispatched")
		}
		st.SetInUse("p", 2) // one held by the dispatched event, one leaked
		thr.Enqueue(scheduledEvents(t, st, "p", "b", 1, 1)...)
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("a starved bucket did not repair the leaked token")
		}
	})

	t.Run("ReconcileLeavesTokensInMotion", func(t *testing.T) {
		// At the bound, with one release always in flight (its event
		// released, its token not yet returned): InUse is 2 and 1 event
		// holds a token at every instant, but which one changes all the
		// time. That is motion, not a leak: InUse must stay 2. (The old
		// repair, which compared only numbers, lowered it to 1.)
		ctx := context.Background()
		st := throttletest.NewMemStore()
		newPolicy(t, st, "p", 2, time.Minute)
		st.SetInUse("p", 2)
		evs := scheduledEvents(t, st, "p", "s", 400, 1)
		startDelivering := func(it throttle.Item) {
			exp := time.Now().Add(time.Minute)
			res, err := st.EventTransition(ctx, []store.EventTransition{{ID: it.Event.ID, From: model.EventScheduled,
				To: model.EventDelivering, Fence: 1, TokenExpiresAt: &exp}})
			if err != nil || res[0] != nil {
				t.Fatalf("start %s: %v %v", it.Event.ID, err, res)
			}
		}
		release := func(it throttle.Item) {
			res, err := st.EventTransition(ctx, []store.EventTransition{{ID: it.Event.ID, From: model.EventDelivering,
				To: model.EventReleased, ClearToken: true}})
			if err != nil || res[0] != nil {
				t.Fatalf("release %s: %v %v", it.Event.ID, err, res)
			}
		}
		startDelivering(evs[0])
		thr := startThrottle(t, st, throttle.Config{PollInterval: 5 * time.Millisecond,
			ReconcileInterval: 20 * time.Millisecond, ReconcileSettle: 5 * time.Millisecond},
			func([]throttle.Item) { t.Error("dispatched with no token free") }, nil)
		thr.Enqueue(evs[399]) // the bucket runs, starved, reconciling every 20 ms
		lowest := 2
		for i := 1; i < 398; i++ {
			// Hand the token of the holder on to the next event.
			startDelivering(evs[i])
			release(evs[i-1])
			lowest = min(lowest, inUse(t, st, "p"))
			time.Sleep(time.Millisecond)
		}
		if lowest != 2 {
			t.Fatalf("InUse fell to %d while tokens were in motion, want it kept at 2", lowest)
		}
	})

	t.Run("DeletedPolicyDeadLetters", func(t *testing.T) {
		st := throttletest.NewMemStore()
		thr := startThrottle(t, st, throttle.Config{PollInterval: 10 * time.Millisecond}, func([]throttle.Item) {
			t.Error("dispatched an event of a missing policy")
		}, nil)
		items := scheduledEvents(t, st, "gone", "s", 2, 1)
		thr.Enqueue(items...)
		waitFor(t, 2*time.Second, "dead events", func() bool {
			e, _ := st.EventGetByID(ctx, items[1].Event.ID)
			return e.Status == model.EventDead
		})
	})

	runInBubble(t, "StaleFenceDropped", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newPolicy(t, st, "p", 10, time.Minute)
		var n atomic.Int64
		thr := startThrottle(t, st, throttle.Config{PollInterval: 10 * time.Millisecond}, func(items []throttle.Item) {
			n.Add(int64(len(items)))
		}, nil)
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 1, 2)...)
		waitFor(t, 2*time.Second, "first dispatch", func() bool { return n.Load() == 1 })
		// Stored under the older fence too, so that only the throttle can
		// keep it back.
		old := scheduledEvents(t, st, "p", "old", 1, 1)[0]
		thr.Enqueue(old)
		// The bucket has free tokens: an accepted item would be
		// dispatched before every goroutine of the bubble blocks.
		synctest.Wait()
		if n.Load() != 1 {
			t.Fatal("an item claimed under an older fence was dispatched")
		}
		if w := thr.Waiting("p"); w != 0 {
			t.Fatalf("%d items wait in the bucket, want 0: the older fence's item was queued", w)
		}
		if e, _ := st.EventGetByID(ctx, old.Event.ID); e.Status != model.EventScheduled {
			t.Fatalf("the older fence's event is %s, want scheduled", e.Status)
		}
	})
}

func TestReclaim(t *testing.T) {
	ctx := context.Background()
	st := throttletest.NewMemStore()
	newPolicy(t, st, "p", 10, time.Minute)
	items := scheduledEvents(t, st, "p", "s", 4, 1)
	_, _ = st.PolicyAcquireTokens(ctx, "p", 4)
	past := time.Now().Add(-time.Second)
	future := time.Now().Add(time.Hour)
	_, _ = st.EventTransition(ctx, transition(items[0].Event.ID, model.EventScheduled, model.EventDelivered, &past))
	_, _ = st.EventTransition(ctx, transition(items[1].Event.ID, model.EventScheduled, model.EventDelivering, &past))
	_, _ = st.EventTransition(ctx, transition(items[2].Event.ID, model.EventScheduled, model.EventDelivered, &future))
	_, _ = st.EventTransition(ctx, transition(items[3].Event.ID, model.EventScheduled, model.EventDelivered, &past))
	// The consumer releases one of the expired ones first.
	e3, _ := st.EventGetByID(ctx, items[3].Event.ID)
	_, _ = throttle.Release(ctx, st, e3, time.Now())

	var reclaimed []*model.Event
	thr := startThrottle(t, st, throttle.Config{}, func([]throttle.Item) {}, func(evs []*model.Event) { reclaimed = append(reclaimed, evs...) })
	if err := thr.Reclaim(ctx); err != nil {
		t.Fatal(err)
	}
	if len(reclaimed) != 2 {
		t.Fatalf("reclaimed %d tokens, want 2", len(reclaimed))
	}
	p, _ := st.PolicyGetByID(ctx, "p")
	if p.InUse != 1 || p.TimedOut != 2 {
		t.Fatalf("InUse %d TimedOut %d, want 1 and 2", p.InUse, p.TimedOut)
	}
	e0, _ := st.EventGetByID(ctx, items[0].Event.ID)
	if e0.Status != model.EventReleased || !e0.TokenTimedOut {
		t.Fatalf("delivered event after timeout: %s timedOut=%v", e0.Status, e0.TokenTimedOut)
	}
	e1, _ := st.EventGetByID(ctx, items[1].Event.ID)
	if e1.Status != model.EventRetrying || e1.Attempts != 1 {
		t.Fatalf("delivering event after timeout: %s attempts=%d (must be retried, not lost)", e1.Status, e1.Attempts)
	}
	// Releasing a reclaimed token afterwards returns nothing.
	if ok, _ := throttle.Release(ctx, st, e0, time.Now()); ok {
		t.Fatal("released a reclaimed token")
	}
	if n := inUse(t, st, "p"); n != 1 {
		t.Fatalf("InUse = %d", n)
	}
}

// renewingStore renews every token right after the reclaim has read it as
// expired, as a consumer's extend (or the handler's renewal before a late
// send) landing in between would.
type renewingStore struct {
	*throttletest.MemStore
	until time.Time
}

func (s renewingStore) EventFindTokenExpired(ctx context.Context, policyID string, t time.Time, limit int) ([]*model.Event, error) {
	evs, err := s.MemStore.EventFindTokenExpired(ctx, policyID, t, limit)
	for _, e := range evs {
		until := s.until
		if _, err := s.MemStore.EventTransition(ctx, []store.EventTransition{{ID: e.ID, From: e.Status, To: e.Status, TokenExpiresAt: &until}}); err != nil {
			return nil, err
		}
	}
	return evs, err
}

func TestReclaimSparesRenewedToken(t *testing.T) {
	ctx := context.Background()
	mem := throttletest.NewMemStore()
	newPolicy(t, mem, "p", 10, time.Minute)
	items := scheduledEvents(t, mem, "p", "s", 2, 1)
	_, _ = mem.PolicyAcquireTokens(ctx, "p", 2)
	past := time.Now().Add(-time.Second)
	_, _ = mem.EventTransition(ctx, transition(items[0].Event.ID, model.EventScheduled, model.EventDelivered, &past))
	_, _ = mem.EventTransition(ctx, transition(items[1].Event.ID, model.EventScheduled, model.EventDelivering, &past))

	st := renewingStore{MemStore: mem, until: time.Now().Add(time.Hour)}
	var reclaimed []*model.Event
	thr := startThrottle(t, st, throttle.Config{}, func([]throttle.Item) {}, func(evs []*model.Event) { reclaimed = append(reclaimed, evs...) })
	if err := thr.Reclaim(ctx); err != nil {
		t.Fatal(err)
	}
	if len(reclaimed) != 0 {
		t.Fatalf("reclaimed %d renewed tokens, want 0", len(reclaimed))
	}
	p, _ := mem.PolicyGetByID(ctx, "p")
	if p.InUse != 2 || p.TimedOut != 0 {
		t.Fatalf("InUse %d TimedOut %d, want 2 and 0", p.InUse, p.TimedOut)
	}
	for _, it := range items {
		e, _ := mem.EventGetByID(ctx, it.Event.ID)
		if !e.Status.HoldsToken() {
			t.Errorf("event %s is %s after a reclaim of its renewed token", e.ID, e.Status)
		}
	}
}

// An event that took its token but that nobody took from Dispatched goes
// back to pending, with its token, when the throttle stops.
func TestStopHandsBackUndispatched(t *testing.T) {
	st := throttletest.NewMemStore()
	newPolicy(t, st, "p", 1, time.Minute)
	thr, err := throttle.New(throttle.Config{DrainTimeout: time.Second}, throttle.Deps{Store: st, Shards: oneShard{fence: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := thr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	items := scheduledEvents(t, st, "p", "s", 1, 1)
	thr.Enqueue(items...)
	// Its start is written before it is offered on Dispatched.
	waitFor(t, 5*time.Second, "the event to take its token", func() bool { return holding(t, st, "p") == 1 })
	thr.Stop()
	e, err := st.EventGetByID(context.Background(), items[0].Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != model.EventPending || e.TokenExpiresAt != nil {
		t.Fatalf("after Stop: status %s token %v, want pending without a token", e.Status, e.TokenExpiresAt)
	}
	if n := inUse(t, st, "p"); n != 0 {
		t.Fatalf("InUse = %d after Stop, want 0 (the token went back)", n)
	}
	select {
	case it := <-thr.Dispatched():
		t.Fatalf("event %s dispatched after Stop", it.Event.ID)
	default:
	}
}
