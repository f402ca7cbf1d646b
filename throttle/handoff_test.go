package throttle_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
	"github.com/schedulerd/schedulerd/throttle/throttletest"
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

// A release served in the process that owns the bucket hands the token to
// the next waiting event without writing InUse; the bound holds throughout,
// and once nothing waits, tokens go back to the store.
func TestReleaseHandsTokenToLocalBucket(t *testing.T) {
	ctx := context.Background()
	mem := throttletest.NewMemStore()
	st := &countingStore{MemStore: mem}
	newPolicy(t, mem, "p", 2, time.Minute)
	items := scheduledEvents(t, mem, "p", "s", 5, 1)

	var mu sync.Mutex
	var got []throttle.Item
	var over atomic.Bool
	thr, err := throttle.New(throttle.Config{}, throttle.Deps{Store: st, Shards: oneShard{fence: 1},
		Dispatch: func(its []throttle.Item) {
			if n, _ := mem.EventCountHoldingTokens(ctx, "p"); n > 2 {
				over.Store(true)
			}
			mu.Lock()
			got = append(got, its...)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := thr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { thr.Stop(ctx) })
	thr.Enqueue(items...)
	dispatched := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	waitFor(t, 5*time.Second, "two dispatched", func() bool { return dispatched() == 2 })
	time.Sleep(50 * time.Millisecond)
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
		if ok, err := throttle.Release(ctx, st, e, time.Now()); !ok || err != nil {
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

// A release whose store is not the bucket's (another process, in effect)
// returns the token to the store.
func TestReleaseOtherStoreReturnsToken(t *testing.T) {
	ctx := context.Background()
	mem := throttletest.NewMemStore()
	newPolicy(t, mem, "q", 1, time.Minute)
	items := scheduledEvents(t, mem, "q", "s", 2, 1)
	var n atomic.Int64
	thr := startThrottle(t, mem, throttle.Config{}, func(its []throttle.Item) { n.Add(int64(len(its))) }, nil)
	thr.Enqueue(items...)
	waitFor(t, 5*time.Second, "one dispatched", func() bool { return n.Load() == 1 })
	other := &countingStore{MemStore: mem}
	e, _ := mem.EventGetByID(ctx, items[0].Event.ID)
	if e.Status != model.EventDelivering {
		e, _ = mem.EventGetByID(ctx, items[1].Event.ID)
	}
	if ok, err := throttle.Release(ctx, other, e, time.Now()); !ok || err != nil {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if other.returned.Load() != 1 {
		t.Fatalf("token not returned to the store")
	}
	thr.Released("q")
	waitFor(t, 5*time.Second, "second dispatched", func() bool { return n.Load() == 2 })
}
