package throttle_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/throttletest"
	"github.com/schedulerd/schedulerd/throttle"
)

// Events taken over after their launch time (Item.HoldUntil) may have been
// sent early by the shard's previous owner. With early dispatch the bucket
// sets aside the first of them it would hand a token to, up to the policy's
// maxInFlight per schedule, until their hold ends: the tokens go to the
// events behind them, and once the hold is over they come first again and
// are sent. Without early dispatch nothing is set aside.
func TestTakenOverEventsSetAside(t *testing.T) {
	t.Run("EarlyDispatch", func(t *testing.T) { synctest.Test(t, testTakenOverSetAside) })
	t.Run("WithoutEarlyDispatch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			got := takenOverOrder(t, false, func(*throttle.Throttle, func() []string) {})
			if want := []string{"0", "1", "2", "3", "4"}; !slices.Equal(got, want) {
				t.Fatalf("dispatched %v, want %v: nothing is set aside", got, want)
			}
		})
	})
}

func testTakenOverSetAside(t *testing.T) {
	got := takenOverOrder(t, true, func(thr *throttle.Throttle, dispatched func() []string) {
		// Events 0 and 1 are set aside (maxInFlight 2 a schedule), 2 is
		// taken over too but beyond them, 3 and 4 were claimed for the first
		// time: 2 and 3 take the two tokens.
		if d := dispatched(); !slices.Equal(d, []string{"2", "3"}) {
			t.Fatalf("dispatched %v, want [2 3]", d)
		}
		if n := thr.Waiting("p"); n != 3 {
			t.Fatalf("waiting %d, want 3 (two set aside, one queued)", n)
		}
	})
	if want := []string{"2", "3", "4", "0", "1"}; !slices.Equal(got, want) {
		t.Fatalf("dispatched %v, want %v", got, want)
	}
}

// takenOverOrder runs a policy of maxInFlight 2 with five waiting events of
// one schedule, the first three taken over (held for a minute), and
// returns the order they are dispatched in while each is released as soon
// as the next has nothing else to wait for. check runs once the first
// tokens are out, before any release.
func takenOverOrder(t *testing.T, early bool, check func(thr *throttle.Throttle, dispatched func() []string)) []string {
	ctx := context.Background()
	st := throttletest.NewMemStore()
	newPolicy(t, st, "p", 2, time.Hour)
	items := scheduledEvents(t, st, "p", "s", 5, 1)
	hold := time.Now().Add(time.Minute)
	for i := range items[:3] {
		items[i].HoldUntil = hold
	}
	var mu sync.Mutex
	var got []string
	thr := startThrottle(t, st, throttle.Config{EarlyDispatch: early}, func(its []throttle.Item) {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range its {
			got = append(got, it.Event.ID[len("p.s."):])
		}
	}, nil)
	dispatched := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	thr.Enqueue(items...)
	synctest.Wait()
	check(thr, dispatched)
	released := 0
	for range 20 {
		d := dispatched()
		if released == len(items) {
			break
		}
		if released < len(d) {
			e, err := st.EventGetByID(ctx, "p.s."+d[released])
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := thr.Release(ctx, e, time.Now()); err != nil || !ok {
				t.Fatalf("release %s: %v, %v", e.ID, ok, err)
			}
			released++
			synctest.Wait()
			continue
		}
		// Nothing more goes before the hold ends.
		time.Sleep(time.Until(hold))
		synctest.Wait()
	}
	if n := inUse(t, st, "p"); n != 0 {
		t.Fatalf("InUse %d after every release, want 0", n)
	}
	return dispatched()
}
