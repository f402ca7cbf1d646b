package throttle_test

import (
	"context"
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

// countingStore counts the token writes that reach the store.
type countingStore struct {
	*throttletest.MemStore
	returned atomic.Int64
	acquired atomic.Int64
}

func (c *countingStore) PolicyReleaseTokens(ctx context.Context, policyID string, n, timedOut int) error {
	c.returned.Add(int64(n))
	return c.MemStore.PolicyReleaseTokens(ctx, policyID, n, timedOut)
}

func (c *countingStore) PolicyAcquireTokens(ctx context.Context, policyID string, want int) (int, error) {
	n, err := c.MemStore.PolicyAcquireTokens(ctx, policyID, want)
	c.acquired.Add(int64(n))
	return n, err
}

// A release through the Throttle that owns the bucket hands the token to
// the next waiting event without writing InUse; the bound holds throughout,
// and once nothing waits, tokens go back to the store.
func TestReleaseHandsTokenToLocalBucket(t *testing.T) {
	synctest.Test(t, testReleaseHandsTokenToLocalBucket)
}

func testReleaseHandsTokenToLocalBucket(t *testing.T) {
	ctx := context.Background()
	mem := throttletest.NewMemStore()
	st := &countingStore{MemStore: mem}
	newPolicy(t, mem, "p", 2, time.Minute)
	items := scheduledEvents(t, mem, "p", "s", 5, 1)

	var mu sync.Mutex
	var got []throttle.Item
	var over atomic.Bool
	thr := startThrottle(t, st, throttle.Config{}, func(its []throttle.Item) {
		if n, _ := mem.EventCountHoldingTokens(ctx, "p"); n > 2 {
			over.Store(true)
		}
		mu.Lock()
		got = append(got, its...)
		mu.Unlock()
	}, nil)
	thr.Enqueue(items...)
	dispatched := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	waitFor(t, 5*time.Second, "two dispatched", func() bool { return dispatched() >= 2 })
	// Every goroutine of the bubble blocked: the bucket is starved.
	synctest.Wait()
	if d := dispatched(); d != 2 {
		t.Fatalf("%d dispatched with maxInFlight 2", d)
	}
	if a := st.acquired.Load(); a != 2 {
		t.Fatalf("%d tokens acquired from the store, want 2", a)
	}

	release := func(i int) {
		t.Helper()
		mu.Lock()
		id := got[i].Event.ID
		mu.Unlock()
		e, err := mem.EventGetByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := thr.Release(ctx, e, time.Now()); !ok || err != nil {
			t.Fatalf("release %s: %v, %v", id, ok, err)
		}
	}
	// Three releases while events wait: each token goes straight to the
	// next event.
	for i := range 3 {
		release(i)
		waitFor(t, 5*time.Second, "next dispatched", func() bool { return dispatched() == 3+i })
		if n := inUse(t, mem, "p"); n != 2 {
			t.Fatalf("InUse %d after a hand-off, want 2", n)
		}
	}
	if r, a := st.returned.Load(), st.acquired.Load(); r != 0 || a != 2 {
		t.Fatalf("store saw %d tokens returned and %d acquired, want 0 and 2 (hand-offs write no token count)", r, a)
	}
	// Nothing waits any more: the last two releases return their tokens.
	release(3)
	release(4)
	if n := inUse(t, mem, "p"); n != 0 {
		t.Fatalf("InUse %d after the last releases, want 0", n)
	}
	if over.Load() {
		t.Fatal("more than maxInFlight events held tokens at a dispatch")
	}
}

// Only a release through the Throttle that runs the bucket hands the token
// over: the store-only package function, and another Throttle on the same
// store, write it back and start nothing; the bucket takes it when woken.
func TestReleaseHandsOffOnlyThroughOwningThrottle(t *testing.T) {
	ctx := context.Background()
	mem := throttletest.NewMemStore()
	st := &callStore{countingStore: &countingStore{MemStore: mem}}
	newPolicy(t, mem, "q", 1, time.Minute)
	items := scheduledEvents(t, mem, "q", "s", 4, 1)
	got := make(chan *model.Event, len(items))
	newThrottle := func() *throttle.Throttle {
		t.Helper()
		// No polling: the bucket moves only when woken or handed a token.
		return startThrottle(t, st, throttle.Config{PollInterval: time.Hour}, func(its []throttle.Item) {
			for _, it := range its {
				got <- it.Event
			}
		}, nil)
	}
	owner, other := newThrottle(), newThrottle()
	owner.Enqueue(items...)
	next := func() *model.Event {
		t.Helper()
		select {
		case e := <-got:
			cur, err := mem.EventGetByID(ctx, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			return cur
		case <-time.After(5 * time.Second):
			t.Fatal("no event dispatched")
			return nil
		}
	}
	// release releases e and reports the transitions of its store call
	// and how many events wait in the store afterwards.
	release := func(e *model.Event, rel func() (bool, error)) (calls [][]store.EventTransition, scheduled int) {
		t.Helper()
		st.mu.Lock()
		st.calls = nil
		st.mu.Unlock()
		if ok, err := rel(); !ok || err != nil {
			t.Fatalf("release %s: %v, %v", e.ID, ok, err)
		}
		st.mu.Lock()
		calls = st.calls
		st.mu.Unlock()
		for _, it := range items {
			if cur, _ := mem.EventGetByID(ctx, it.Event.ID); cur.Status == model.EventScheduled {
				scheduled++
			}
		}
		return calls, scheduled
	}
	storeOnly := func(name string, e *model.Event, rel func() (bool, error), returned int64) {
		t.Helper()
		calls, scheduled := release(e, rel)
		if len(calls) != 1 || len(calls[0]) != 1 {
			t.Fatalf("%s: release made calls %+v, want one with the release alone", name, calls)
		}
		if r := st.returned.Load(); r != returned {
			t.Fatalf("%s: %d tokens returned to the store, want %d", name, r, returned)
		}
		if n := inUse(t, mem, "q"); n != 0 {
			t.Fatalf("%s: InUse %d after the release, want 0", name, n)
		}
		if want := len(items) - int(returned); scheduled != want {
			t.Fatalf("%s: %d events still scheduled, want %d (nothing started)", name, scheduled, want)
		}
		// The owner's bucket takes the token from the store once woken.
		owner.Released("q")
	}

	first := next()
	storeOnly("package Release", first, func() (bool, error) { return throttle.Release(ctx, st, first, time.Now()) }, 1)
	second := next()
	storeOnly("another Throttle", second, func() (bool, error) { return other.Release(ctx, second, time.Now()) }, 2)
	third := next()

	// Through the owner: the next event starts in the release's call.
	calls, scheduled := release(third, func() (bool, error) { return owner.Release(ctx, third, time.Now()) })
	if len(calls) != 1 || len(calls[0]) != 2 || !calls[0][1].RequiresPrevious {
		t.Fatalf("owner's release made calls %+v, want one: release, then a start with RequiresPrevious", calls)
	}
	if scheduled != 0 {
		t.Fatalf("%d events still scheduled after the owner's release, want 0", scheduled)
	}
	if r := st.returned.Load(); r != 2 {
		t.Fatalf("%d tokens returned to the store, want still 2", r)
	}
	if n := inUse(t, mem, "q"); n != 1 {
		t.Fatalf("InUse %d after the hand-off, want 1", n)
	}
	if e := next(); e.ID != calls[0][1].ID {
		t.Fatalf("dispatched %s, want %s", e.ID, calls[0][1].ID)
	}
}

// callStore records the EventTransition calls.
type callStore struct {
	*countingStore
	mu    sync.Mutex
	calls [][]store.EventTransition
}

func (c *callStore) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	c.mu.Lock()
	c.calls = append(c.calls, append([]store.EventTransition(nil), ts...))
	c.mu.Unlock()
	return c.countingStore.EventTransition(ctx, ts)
}

// A release through the Throttle that runs the bucket starts the next
// waiting event in the same store call (release, then scheduled → delivering
// with RequiresPrevious); if that start loses, the token goes to the next
// event; if the release loses, the event it took goes back to the queue.
func TestReleaseStartsNextInSameCall(t *testing.T) {
	synctest.Test(t, testReleaseStartsNextInSameCall)
}

func testReleaseStartsNextInSameCall(t *testing.T) {
	ctx := context.Background()
	mem := throttletest.NewMemStore()
	st := &callStore{countingStore: &countingStore{MemStore: mem}}
	newPolicy(t, mem, "p", 1, time.Minute)
	items := scheduledEvents(t, mem, "p", "s", 4, 1)

	var mu sync.Mutex
	var got []throttle.Item
	thr := startThrottle(t, st, throttle.Config{}, func(its []throttle.Item) {
		for _, it := range its {
			if it.Event.Status != model.EventDelivering || it.Policy == nil || it.Event.TokenExpiresAt == nil {
				t.Errorf("dispatched %s in status %s (policy %v)", it.Event.ID, it.Event.Status, it.Policy)
			}
		}
		mu.Lock()
		got = append(got, its...)
		mu.Unlock()
	}, nil)
	thr.Enqueue(items...)
	dispatched := func() []throttle.Item { mu.Lock(); defer mu.Unlock(); return append([]throttle.Item(nil), got...) }
	waitFor(t, 5*time.Second, "one dispatched", func() bool { return len(dispatched()) >= 1 })
	// The bucket has taken the one token and waits for a release.
	synctest.Wait()
	if n := len(dispatched()); n != 1 {
		t.Fatalf("%d dispatched with maxInFlight 1", n)
	}
	get := func(id string) *model.Event {
		t.Helper()
		e, err := mem.EventGetByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	// 1. The release of the first event starts one waiting event in the
	// same call: when Release returns, it is already delivering.
	first := get(dispatched()[0].Event.ID)
	st.mu.Lock()
	st.calls = nil
	st.mu.Unlock()
	if ok, err := thr.Release(ctx, first, time.Now()); !ok || err != nil {
		t.Fatalf("release: %v, %v", ok, err)
	}
	st.mu.Lock()
	calls := st.calls
	st.mu.Unlock()
	if len(calls) != 1 || len(calls[0]) != 2 || calls[0][0].ID != first.ID || !calls[0][1].RequiresPrevious {
		t.Fatalf("release made calls %+v, want one call: release, then a start with RequiresPrevious", calls)
	}
	next := calls[0][1].ID
	if s := get(next).Status; s != model.EventDelivering {
		t.Fatalf("next event %s is %s after the release returned, want delivering", next, s)
	}
	waitFor(t, 5*time.Second, "next dispatched", func() bool { d := dispatched(); return len(d) == 2 && d[1].Event.ID == next })

	// 2. A second release of the same event loses: nothing is started, the
	// event it took waits again.
	if ok, err := thr.Release(ctx, first, time.Now()); ok || err != nil {
		t.Fatalf("second release: %v, %v; want false, nil", ok, err)
	}
	if n := inUse(t, mem, "p"); n != 1 {
		t.Fatalf("InUse %d, want 1", n)
	}
	// A lost release that still started the event it took would have
	// dispatched it before every goroutine of the bubble blocked.
	synctest.Wait()
	if d := dispatched(); len(d) != 2 {
		t.Fatalf("%d dispatched after a lost release, want 2", len(d))
	}

	// 3. A waiting event cancelled in the store meanwhile: its start loses
	// and the token goes to the last one.
	var waiting []string
	for _, it := range items {
		if s := get(it.Event.ID).Status; s == model.EventScheduled {
			waiting = append(waiting, it.Event.ID)
		}
	}
	if len(waiting) != 2 {
		t.Fatalf("%d events waiting, want 2", len(waiting))
	}
	now := time.Now()
	res, err := mem.EventTransition(ctx, []store.EventTransition{{ID: waiting[0], From: model.EventScheduled, To: model.EventCancelled, FinishedAt: &now, At: now}})
	if err != nil || res[0] != nil {
		t.Fatalf("cancel %s: %v %v", waiting[0], err, res)
	}
	st.mu.Lock()
	st.calls = nil
	st.mu.Unlock()
	if ok, err := thr.Release(ctx, get(next), time.Now()); !ok || err != nil {
		t.Fatalf("release: %v, %v", ok, err)
	}
	st.mu.Lock()
	calls = st.calls
	st.mu.Unlock()
	if len(calls) == 0 || len(calls[0]) != 2 || calls[0][1].ID != waiting[0] {
		t.Fatalf("release made calls %+v, want one that starts the cancelled %s", calls, waiting[0])
	}
	waitFor(t, 5*time.Second, "last dispatched", func() bool { d := dispatched(); return len(d) == 3 && d[2].Event.ID == waiting[1] })
	if n := inUse(t, mem, "p"); n != 1 {
		t.Fatalf("InUse %d, want 1", n)
	}
	if n, _ := mem.EventCountHoldingTokens(ctx, "p"); n != 1 {
		t.Fatalf("%d events hold tokens, want 1", n)
	}
	if r := st.returned.Load(); r != 0 {
		t.Fatalf("%d tokens returned to the store, want 0", r)
	}
}
