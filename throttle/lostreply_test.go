package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/throttletest"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/throttle"
)

// lostReply applies a write and then fails it as a lost reply would (the
// store is unavailable, with no word on whether the write applied), once
// per kind of write that lose selects.
type lostReply struct {
	*throttletest.MemStore
	loseStart, loseRelease atomic.Bool
}

var errLostReply = fmt.Errorf("%w: connection reset after the write was sent", model.ErrUnavailable)

func (s *lostReply) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	res, err := s.MemStore.EventTransition(ctx, ts)
	if err == nil && len(ts) > 0 && ts[0].To == model.EventDelivering && ts[0].From == model.EventScheduled &&
		s.loseStart.CompareAndSwap(true, false) {
		return nil, errLostReply
	}
	return res, err
}

func (s *lostReply) PolicyReleaseTokens(ctx context.Context, policyID string, n, timedOut int) error {
	err := s.MemStore.PolicyReleaseTokens(ctx, policyID, n, timedOut)
	if err == nil && s.loseRelease.CompareAndSwap(true, false) {
		return errLostReply
	}
	return err
}

// A start write whose reply was lost is read back: the events it started
// are dispatched and keep their tokens; none goes back twice.
func TestStartWithLostReply(t *testing.T) {
	mem := throttletest.NewMemStore()
	newPolicy(t, mem, "p", 10, time.Minute)
	items := scheduledEvents(t, mem, "p", "s", 4, 1)
	st := &lostReply{MemStore: mem}
	st.loseStart.Store(true)
	var mu sync.Mutex
	got := map[string]int{}
	thr := startThrottle(t, st, throttle.Config{}, func(its []throttle.Item) {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range its {
			got[it.Event.ID]++
		}
	}, nil)
	for _, it := range items {
		thr.Enqueue(it)
	}
	waitFor(t, 5*time.Second, "all dispatched", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(items)
	})
	if st.loseStart.Load() {
		t.Fatal("no start write lost its reply: the test did not test anything")
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range got {
		if n != 1 {
			t.Errorf("event %s dispatched %d times", id, n)
		}
	}
	if n := inUse(t, mem, "p"); n != len(items) {
		t.Fatalf("InUse = %d with %d events delivering: a token of a started event went back", n, len(items))
	}
}

// A token return whose reply was lost is not sent again: it may have
// applied, and a second return would let one more event out than the bound.
func TestReturnTokensWithLostReplyIsNotRepeated(t *testing.T) {
	ctx := context.Background()
	mem := throttletest.NewMemStore()
	newPolicy(t, mem, "p", 10, time.Minute)
	if got, _ := mem.PolicyAcquireTokens(ctx, "p", 3); got != 3 {
		t.Fatalf("acquired %d", got)
	}
	st := &lostReply{MemStore: mem}
	st.loseRelease.Store(true)
	thr := startThrottle(t, st, throttle.Config{}, func([]throttle.Item) {}, nil)
	err := thr.ReturnTokens(ctx, "p", 1)
	if !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("ReturnTokens = %v, want the lost reply's error", err)
	}
	if n := inUse(t, mem, "p"); n != 2 {
		t.Fatalf("InUse = %d after returning 1 of 3, want 2", n)
	}
}

// slowReads delays every policy read, as a store that queues work on the
// policy document does, and counts the reads made after landed is set.
type slowReads struct {
	*throttletest.MemStore
	delay       time.Duration
	landed      atomic.Bool
	readsLanded atomic.Int32
}

func (s *slowReads) PolicyGetByID(ctx context.Context, id string) (*model.Policy, error) {
	time.Sleep(s.delay)
	if s.landed.Load() {
		s.readsLanded.Add(1)
	}
	return s.MemStore.PolicyGetByID(ctx, id)
}

// While the store is slow, a token return that it delays between the
// reconciliation's readings is not taken for a leak: the readings are
// spaced by the store's own latency, so the late return shows up as motion.
// With fixed 10 ms pauses the repair lowered InUse before the return
// landed, and InUse ended one below the tokens held. It runs in a synctest
// bubble: the store's delays, the settle pauses and the late return are
// instants of one fake clock, so they fall in the same order on every run.
func TestReconcileWaitsOutSlowStore(t *testing.T) {
	synctest.Test(t, testReconcileWaitsOutSlowStore)
}

func testReconcileWaitsOutSlowStore(t *testing.T) {
	ctx := context.Background()
	mem := throttletest.NewMemStore()
	newPolicy(t, mem, "p", 10, time.Minute)
	items := scheduledEvents(t, mem, "p", "s", 3, 1)
	exp := time.Now().Add(time.Minute)
	for _, it := range items {
		_, _ = mem.EventTransition(ctx, transition(it.Event.ID, model.EventScheduled, model.EventDelivering, &exp))
	}
	mem.SetInUse("p", 3)
	// The third event is released; its token return is still on its way.
	_, _ = mem.EventTransition(ctx, transition(items[2].Event.ID, model.EventDelivering, model.EventReleased, nil))
	st := &slowReads{MemStore: mem, delay: 150 * time.Millisecond}
	go func() {
		time.Sleep(time.Second)
		_ = mem.PolicyReleaseTokens(ctx, "p", 1, 0)
		st.landed.Store(true)
	}()
	thr := startThrottle(t, st, throttle.Config{ReconcileInterval: time.Hour, ReconcileSettle: 10 * time.Millisecond},
		func([]throttle.Item) {}, nil)
	if err := thr.Reclaim(ctx); err != nil { // starts the owned policy's bucket, which reconciles first
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a reading after the late return", func() bool { return st.readsLanded.Load() > 0 })
	if n := inUse(t, mem, "p"); n != 2 {
		t.Fatalf("InUse = %d with 2 events holding tokens", n)
	}
}

// countReads counts policy reads (one per reconciliation reading).
type countReads struct {
	*throttletest.MemStore
	n atomic.Int32
}

func (s *countReads) PolicyGetByID(ctx context.Context, id string) (*model.Policy, error) {
	s.n.Add(1)
	return s.MemStore.PolicyGetByID(ctx, id)
}

// Until the shard's events have been claimed under the bucket's fence, a
// start sent by the previous owner may still land, so a token that looks
// leaked is not repaired; once settled, it is.
func TestReconcileWaitsForSettledShard(t *testing.T) {
	mem := throttletest.NewMemStore()
	newPolicy(t, mem, "p", 1, time.Minute)
	mem.SetInUse("p", 1) // taken by a previous owner whose start has not landed
	st := &countReads{MemStore: mem}
	got := make(chan *model.Event, 1)
	thr, err := throttle.New(throttle.Config{PollInterval: 5 * time.Millisecond, ReconcileInterval: time.Hour,
		ReconcileSettle: 5 * time.Millisecond}, throttle.Deps{Store: st, Shards: oneShard{fence: 1}})
	if err != nil {
		t.Fatal(err)
	}
	runThrottle(t, thr, func(items []throttle.Item) {
		for _, it := range items {
			got <- it.Event
		}
	})
	thr.Enqueue(scheduledEvents(t, mem, "p", "s", 1, 1)...)
	// The starved bucket reconciles early, again and again; none may repair.
	waitFor(t, 5*time.Second, "several reconciliations", func() bool { return st.n.Load() >= 5 || len(got) > 0 })
	select {
	case e := <-got:
		t.Fatalf("event %s dispatched on a token repaired before the shard settled", e.ID)
	default:
	}
	if n := inUse(t, mem, "p"); n != 1 {
		t.Fatalf("InUse = %d before the shard settled, want 1", n)
	}
	for s := range thr.Config().Shards {
		thr.MarkSettled(s, 1)
	}
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the leaked token was not repaired once the shard settled")
	}
}

// loseHandOff applies a release that hands its token to the next event,
// then fails the call as a lost reply would, once.
type loseHandOff struct {
	*throttletest.MemStore
	lose atomic.Bool
}

func (s *loseHandOff) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	res, err := s.MemStore.EventTransition(ctx, ts)
	if err == nil && len(ts) == 2 && ts[0].To == model.EventReleased && ts[1].RequiresPrevious &&
		s.lose.CompareAndSwap(true, false) {
		return nil, errLostReply
	}
	return res, err
}

// A release whose reply is lost after it handed its token to the next
// waiting event reads that event back: started, it is dispatched at once
// (not when its token times out) and the release answers released.
func TestReleaseHandOffWithLostReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := throttletest.NewMemStore()
		newPolicy(t, mem, "p", 1, time.Minute)
		items := scheduledEvents(t, mem, "p", "s", 2, 1)
		st := &loseHandOff{MemStore: mem}
		var mu sync.Mutex
		var got []*model.Event
		thr := startThrottle(t, st, throttle.Config{}, func(its []throttle.Item) {
			mu.Lock()
			defer mu.Unlock()
			for _, it := range its {
				got = append(got, it.Event)
			}
		}, nil)
		thr.Enqueue(items...)
		synctest.Wait()
		mu.Lock()
		if len(got) != 1 {
			mu.Unlock()
			t.Fatalf("%d dispatched with maxInFlight 1", len(got))
		}
		first := got[0]
		mu.Unlock()

		st.lose.Store(true)
		released, err := thr.Release(ctx, first, time.Now())
		if st.lose.Load() {
			t.Fatal("no release lost its reply: the test did not test anything")
		}
		if !released || err != nil {
			t.Errorf("Release = %v, %v; want released (the next event's start shows it applied)", released, err)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 2 || got[1].ID == first.ID {
			t.Fatalf("dispatched %d events after the release, want the second one too", len(got))
		}
		if got[1].Status != model.EventDelivering {
			t.Errorf("next event dispatched as %s, want delivering", got[1].Status)
		}
		if h := holding(t, mem, "p"); h != 1 {
			t.Errorf("%d events hold tokens, want 1", h)
		}
		if n := inUse(t, mem, "p"); n != 1 {
			t.Errorf("InUse = %d, want 1", n)
		}
	})
}

// A release whose reply is lost before the next event started puts that
// event back in its queue: it goes out once, on the token the store holds.
func TestReleaseHandOffNotAppliedPutsNextBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := throttletest.NewMemStore()
		newPolicy(t, mem, "p", 1, time.Minute)
		items := scheduledEvents(t, mem, "p", "s", 2, 1)
		st := &failHandOff{MemStore: mem}
		var mu sync.Mutex
		var got []*model.Event
		thr := startThrottle(t, st, throttle.Config{}, func(its []throttle.Item) {
			mu.Lock()
			defer mu.Unlock()
			for _, it := range its {
				got = append(got, it.Event)
			}
		}, nil)
		thr.Enqueue(items...)
		synctest.Wait()
		mu.Lock()
		first := got[0]
		mu.Unlock()

		st.fail.Store(true)
		if released, err := thr.Release(ctx, first, time.Now()); released || !errors.Is(err, model.ErrUnavailable) {
			t.Fatalf("Release = %v, %v; want the failed call's error", released, err)
		}
		// The consumer retries; the event waiting again takes the token.
		if released, err := thr.Release(ctx, first, time.Now()); !released || err != nil {
			t.Fatalf("retried Release = %v, %v", released, err)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 2 || got[1].ID == first.ID {
			t.Fatalf("dispatched %d events, want the second one once", len(got))
		}
		if n := inUse(t, mem, "p"); n != 1 {
			t.Errorf("InUse = %d, want 1", n)
		}
	})
}

// failHandOff fails, once, a release call that hands its token on, before
// it applies, without saying so (a connection closed before the write).
type failHandOff struct {
	*throttletest.MemStore
	fail atomic.Bool
}

func (s *failHandOff) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	if len(ts) == 2 && ts[0].To == model.EventReleased && ts[1].RequiresPrevious && s.fail.CompareAndSwap(true, false) {
		return nil, errLostReply
	}
	return s.MemStore.EventTransition(ctx, ts)
}
