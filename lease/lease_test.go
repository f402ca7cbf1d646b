package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/lease"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
)

func openStore(t *testing.T) *embedded.Store {
	t.Helper()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newBalancers(t *testing.T, st lease.Store, clk *clockwork.FakeClock, n, units int) []*lease.Balancer {
	t.Helper()
	var out []*lease.Balancer
	for i := 0; i < n; i++ {
		b, err := lease.New(lease.Config{Group: "g", Units: units, Owner: fmt.Sprintf("inst-%d", i), TTL: 15 * time.Second}, lease.Deps{Store: st, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func tickAll(t *testing.T, ctx context.Context, bs []*lease.Balancer, rounds int) {
	t.Helper()
	for r := 0; r < rounds; r++ {
		for _, b := range bs {
			if err := b.Tick(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkPartition asserts that the balancers hold disjoint unit sets that
// together cover every unit, each within its fair share.
func checkPartition(t *testing.T, bs []*lease.Balancer, units int) {
	t.Helper()
	owner := map[int]int{}
	share := (units + len(bs) - 1) / len(bs)
	for i, b := range bs {
		held := b.Held()
		if len(held) > share {
			t.Errorf("balancer %d holds %d units, fair share is %d", i, len(held), share)
		}
		for u := range held {
			if j, dup := owner[u]; dup {
				t.Errorf("unit %d held by %d and %d", u, j, i)
			}
			owner[u] = i
		}
	}
	if len(owner) != units {
		t.Errorf("%d of %d units held", len(owner), units)
	}
}

func TestBalancer(t *testing.T) {
	ctx := context.Background()

	t.Run("SpreadsUnitsFairlyAndDisjointly", func(t *testing.T) {
		clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		bs := newBalancers(t, openStore(t), clk, 3, 16)
		tickAll(t, ctx, bs, 3)
		checkPartition(t, bs, 16)
	})

	t.Run("DeadInstanceUnitsTakenAfterTTLWithNewFences", func(t *testing.T) {
		clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		bs := newBalancers(t, openStore(t), clk, 3, 12)
		tickAll(t, ctx, bs, 3)
		checkPartition(t, bs, 12)
		dead := bs[2].Held()
		if len(dead) == 0 {
			t.Fatal("third balancer holds nothing")
		}
		// The third instance stops ticking (crash). Before the TTL runs out
		// its units stay its own.
		clk.Advance(10 * time.Second)
		tickAll(t, ctx, bs[:2], 1)
		for u := range dead {
			for _, b := range bs[:2] {
				if _, ok := b.Held()[u]; ok {
					t.Fatalf("unit %d taken before the dead owner's lease expired", u)
				}
			}
		}
		clk.Advance(6 * time.Second)
		tickAll(t, ctx, bs[:2], 2)
		checkPartition(t, bs[:2], 12)
		for u, oldFence := range dead {
			for _, b := range bs[:2] {
				if f, ok := b.Held()[u]; ok && f <= oldFence {
					t.Errorf("unit %d taken over with fence %d, not above the old %d", u, f, oldFence)
				}
			}
		}
		for u, f := range dead {
			// Owns checks expiry by the clock: the dead owner's leases
			// have expired, so it must not act on them any more.
			if bs[2].Owns(u, f) {
				t.Errorf("dead balancer still claims unit %d", u)
			}
		}
	})

	t.Run("StopHandsUnitsOverAtOnce", func(t *testing.T) {
		clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		bs := newBalancers(t, openStore(t), clk, 2, 8)
		tickAll(t, ctx, bs, 3)
		checkPartition(t, bs, 8)
		bs[1].Stop()
		if n := len(bs[1].Held()); n != 0 {
			t.Fatalf("stopped balancer still holds %d units", n)
		}
		// No clock advance: released leases are free at once, and the
		// stopped member no longer counts.
		tickAll(t, ctx, bs[:1], 1)
		checkPartition(t, bs[:1], 8)
	})

	t.Run("RestartWithSameOwnerGetsNewFences", func(t *testing.T) {
		clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		st := openStore(t)
		first := newBalancers(t, st, clk, 1, 4)[0]
		tickAll(t, ctx, []*lease.Balancer{first}, 1)
		before := first.Held()
		// A new process with the same owner name (embedded store, fixed
		// instance id) must not inherit the old fences.
		second := newBalancers(t, st, clk, 1, 4)[0]
		if err := second.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer second.Stop()
		after := second.Held()
		if len(after) != 4 {
			t.Fatalf("restarted balancer holds %d of 4 units", len(after))
		}
		for u, f := range after {
			if f <= before[u] {
				t.Errorf("unit %d: fence %d after restart, not above %d", u, f, before[u])
			}
		}
	})

	t.Run("StartedBalancerReadyThenStopReleases", func(t *testing.T) {
		clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		st := openStore(t)
		bs := newBalancers(t, st, clk, 2, 4)
		if err := bs[0].Start(ctx); err != nil {
			t.Fatal(err)
		}
		<-bs[0].Ready()
		if n := len(bs[0].Held()); n != 4 {
			t.Fatalf("started balancer holds %d of 4 units", n)
		}
		bs[0].Stop()
		bs[0].Stop() // twice: no-op
		// Released, not expired: the other instance takes every unit
		// without the clock moving.
		tickAll(t, ctx, bs[1:], 1)
		checkPartition(t, bs[1:], 4)
	})

	t.Run("RefenceTakesTheUnitAgainUnderANewFence", func(t *testing.T) {
		clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		b := newBalancers(t, openStore(t), clk, 1, 4)[0]
		tickAll(t, ctx, []*lease.Balancer{b}, 1)
		before := b.Held()
		b.Refence(2)
		if _, ok := b.Held()[2]; ok || b.Owns(2, before[2]) {
			t.Fatal("unit 2 still held right after Refence")
		}
		select {
		case <-b.Changed():
		default:
			t.Fatal("Refence did not signal a change")
		}
		tickAll(t, ctx, []*lease.Balancer{b}, 1)
		after := b.Held()
		if f, ok := after[2]; !ok || f <= before[2] {
			t.Fatalf("unit 2 after Refence and a tick: fence %d held %v, want a fence above %d", f, ok, before[2])
		}
		for u, f := range before {
			if u != 2 && after[u] != f {
				t.Errorf("unit %d changed fence %d -> %d", u, f, after[u])
			}
		}
	})

	t.Run("GivenBackUnitsStopAtOnceAndMoveATickLater", func(t *testing.T) {
		// An instance over its share stops the units' work at once but
		// keeps their leases one tick, so that work in flight under them
		// ends before another instance can take them.
		clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		bs := newBalancers(t, openStore(t), clk, 2, 8)
		tickAll(t, ctx, bs[:1], 1)
		before := bs[0].Held()
		tickAll(t, ctx, bs[1:], 1) // joins: a member, no free unit yet
		<-bs[0].Changed()          // drained: the first tick's change
		tickAll(t, ctx, bs[:1], 1)
		kept := bs[0].Held()
		if len(kept) != 4 {
			t.Fatalf("over its share, the first balancer holds %d units, want 4", len(kept))
		}
		select {
		case <-bs[0].Changed():
		default:
			t.Fatal("giving units back did not signal a change")
		}
		var gone []int
		for u, f := range before {
			if _, ok := kept[u]; !ok {
				gone = append(gone, u)
				if bs[0].Owns(u, f) {
					t.Errorf("unit %d given back but still owned", u)
				}
			}
		}
		tickAll(t, ctx, bs[1:], 1)
		if n := len(bs[1].Held()); n != 0 {
			t.Fatalf("the new balancer took %d units in the tick they were given back, want 0", n)
		}
		clk.Advance(5 * time.Second)
		tickAll(t, ctx, bs, 1)
		checkPartition(t, bs, 8)
		for _, u := range gone {
			if f, ok := bs[1].Held()[u]; !ok || f <= before[u] {
				t.Errorf("unit %d: taken %v with fence %d, want a fence above %d", u, ok, f, before[u])
			}
		}
	})

	t.Run("GivenBackUnitNotTakenAgainUnderItsFence", func(t *testing.T) {
		// A unit given back whose release fails stays out of this
		// instance's hands, even once its lease expired: taken again by
		// the same owner it would keep its fence, and the events claimed
		// under that fence would stay claimed by nobody.
		clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		st := &failingRelease{Store: openStore(t)}
		bs := newBalancers(t, st, clk, 2, 2)
		tickAll(t, ctx, bs[:1], 1)
		before := bs[0].Held()
		tickAll(t, ctx, bs[1:], 1)
		st.fail.Store(true)
		tickAll(t, ctx, bs[:1], 1) // gives one unit back; its release fails
		var gone int
		for u := range before {
			if _, ok := bs[0].Held()[u]; !ok {
				gone = u
			}
		}
		// The second instance dies; the first is alone again, and the
		// unit's lease expires.
		clk.Advance(20 * time.Second)
		tickAll(t, ctx, bs[:1], 2)
		if f, ok := bs[0].Held()[gone]; ok && f == before[gone] {
			t.Fatalf("unit %d taken again under its old fence %d while its release failed", gone, f)
		}
		st.fail.Store(false)
		tickAll(t, ctx, bs[:1], 2)
		if f, ok := bs[0].Held()[gone]; !ok || f <= before[gone] {
			t.Fatalf("unit %d after its release: held %v with fence %d, want a fence above %d", gone, ok, f, before[gone])
		}
	})

	t.Run("StopReleasesUnitsBeingGivenBack", func(t *testing.T) {
		clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		bs := newBalancers(t, openStore(t), clk, 2, 8)
		tickAll(t, ctx, bs[:1], 1)
		tickAll(t, ctx, bs[1:], 1)
		tickAll(t, ctx, bs[:1], 1) // gives 4 back
		bs[0].Stop()
		// No clock advance: every lease, the ones being given back
		// included, is free at once.
		tickAll(t, ctx, bs[1:], 1)
		checkPartition(t, bs[1:], 8)
	})

	t.Run("RejectsBadConfig", func(t *testing.T) {
		for name, cfg := range map[string]lease.Config{
			"NoGroup":    {Units: 1, Owner: "a"},
			"NoUnits":    {Group: "g", Owner: "a"},
			"NoOwner":    {Group: "g", Units: 1},
			"LongInterv": {Group: "g", Units: 1, Owner: "a", TTL: time.Second, Interval: 2 * time.Second},
			"NegDrain":   {Group: "g", Units: 1, Owner: "a", DrainTimeout: -time.Second},
		} {
			if _, err := lease.New(cfg, lease.Deps{Store: openStore(t)}); err == nil {
				t.Errorf("%s: no error", name)
			}
		}
	})
}

// HolderOf names each unit's holder with the address it advertises, and
// sees a unit that moved to another instance once its answer is a second
// old.
func TestHolderOf(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	clk := clockwork.NewFakeClock()
	var bs []*lease.Balancer
	for i, addr := range []string{"http://a:1", "http://b:2"} {
		b, err := lease.New(lease.Config{Group: "g", Units: 4, Owner: fmt.Sprintf("inst-%d", i), TTL: 15 * time.Second, Addr: addr},
			lease.Deps{Store: st, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	tickAll(t, ctx, bs, 3)
	checkPartition(t, bs, 4)
	want := map[string]string{"inst-0": "http://a:1", "inst-1": "http://b:2"}
	for i, b := range bs {
		for u, fence := range b.Held() {
			for _, asker := range bs {
				h, ok, err := asker.HolderOf(ctx, u)
				if err != nil || !ok {
					t.Fatalf("HolderOf(%d) = %v, %v", u, ok, err)
				}
				if h.Owner != fmt.Sprintf("inst-%d", i) || h.Fence != fence || h.Addr != want[h.Owner] {
					t.Errorf("HolderOf(%d) = %+v, want inst-%d under fence %d at %s", u, h, i, fence, want[h.Owner])
				}
			}
		}
	}
	// inst-1 stops: its units go to inst-0, which HolderOf shows after
	// its cache time.
	bs[1].Stop()
	tickAll(t, ctx, bs[:1], 1)
	clk.Advance(time.Second)
	for u := range 4 {
		h, ok, err := bs[0].HolderOf(ctx, u)
		if err != nil || !ok || h.Owner != "inst-0" || h.Addr != "http://a:1" {
			t.Errorf("after inst-1 stopped, HolderOf(%d) = %+v, %v, %v; want inst-0", u, h, ok, err)
		}
	}
}

// barrierRenews holds each LeaseRenew until want of them are in flight at
// once (or 10 s passed, which fails the test: renewals one after another
// never get there).
type barrierRenews struct {
	*embedded.Store
	want     int
	mu       sync.Mutex
	inFlight int
	all      chan struct{}
	timedOut atomic.Bool
}

func (s *barrierRenews) LeaseRenew(ctx context.Context, name, owner string, fence int64, now time.Time, ttl time.Duration) (model.Lease, error) {
	s.mu.Lock()
	s.inFlight++
	if s.inFlight == s.want {
		close(s.all)
	}
	s.mu.Unlock()
	select {
	case <-s.all:
	case <-time.After(10 * time.Second):
		s.timedOut.Store(true)
		s.mu.Lock()
		if s.inFlight < s.want {
			s.inFlight = s.want // the rest need not wait as well
			close(s.all)
		}
		s.mu.Unlock()
	}
	return s.Store.LeaseRenew(ctx, name, owner, fence, now, ttl)
}

func TestRenewalsGoTogether(t *testing.T) {
	// Renewals that reach the store together share its commits.
	ctx := context.Background()
	clk := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const units = 8
	st := &barrierRenews{Store: openStore(t), want: units, all: make(chan struct{})}
	bs := newBalancers(t, st, clk, 1, units)
	tickAll(t, ctx, bs, 1) // takes the units
	if n := len(bs[0].Held()); n != units {
		t.Fatalf("holds %d units, want %d", n, units)
	}
	clk.Advance(5 * time.Second)
	tickAll(t, ctx, bs, 1) // renews them
	if st.timedOut.Load() {
		t.Fatalf("renewals were not in flight together (want %d at once)", units)
	}
	if n := len(bs[0].Held()); n != units {
		t.Fatalf("holds %d units after renewing, want %d", n, units)
	}
}

// failingRelease is a store whose LeaseRelease fails while fail is set.
type failingRelease struct {
	*embedded.Store
	fail atomic.Bool
}

func (s *failingRelease) LeaseRelease(ctx context.Context, name, owner string, fence int64) error {
	if s.fail.Load() {
		return errors.New("release refused by the test")
	}
	return s.Store.LeaseRelease(ctx, name, owner, fence)
}
