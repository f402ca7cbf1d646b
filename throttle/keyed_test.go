package throttle_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/internal/testkit/throttletest"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

func newKeyedPolicy(t *testing.T, st *throttletest.MemStore, id string, perKey, total int) *model.Policy {
	t.Helper()
	p := &model.Policy{ID: id, TenantID: "t1", Name: id, MaxInFlight: perKey, TokenTimeout: time.Minute, Version: 1,
		ConcurrencyKey: "/customerId", MaxInFlightTotal: total}
	if err := st.PolicyCreate(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// nextIndex numbers keyed events in order of creation, so that without
// round robin across keys the earlier ones would all go first.
var nextIndex atomic.Int64

// keyedEvents inserts n scheduled events of the policy whose payload's
// customerId is key (none for key "-") and returns them as bucket items.
func keyedEvents(t *testing.T, st *throttletest.MemStore, policyID, key string, n int, prio int) []throttle.Item {
	t.Helper()
	now := time.Now()
	items := make([]throttle.Item, n)
	evs := make([]*model.Event, n)
	for i := range n {
		e := &model.Event{ID: fmt.Sprintf("%s.%s.%d.%d", policyID, key, prio, i), ScheduleID: "s", Index: int(nextIndex.Add(1)), Priority: prio,
			PolicyID: policyID, Status: model.EventScheduled, Fence: 1, LaunchAt: now}
		if key != "-" {
			e.Payload = []byte(fmt.Sprintf(`{"customerId":%q}`, key))
		}
		evs[i] = e
		c := *e
		items[i] = throttle.Item{Event: &c, Fence: 1}
	}
	if _, err := st.EventInsertMany(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	return items
}

// heldByKey counts the policy's token-holding events per customerId.
func heldByKey(t *testing.T, st *throttletest.MemStore, policyID string) map[string]int {
	t.Helper()
	evs, err := st.EventFindTokenExpired(context.Background(), policyID, time.Unix(0, math.MaxInt64), 1<<20)
	if err != nil {
		t.Error(err)
		return nil
	}
	out := map[string]int{}
	for _, e := range evs {
		out[model.ConcurrencyKeyOf("/customerId", e.ScheduleID, e.Payload)]++
	}
	return out
}

func customer(e *model.Event) string {
	return model.ConcurrencyKeyOf("/customerId", e.ScheduleID, e.Payload)
}

func TestKeyedBoundHoldsWithRandomReleases(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(testseed.Get(t, "THROTTLE_TEST_SEED", 1), 1))
	var rngMu sync.Mutex
	st := throttletest.NewMemStore()
	const perKey, total, keys, each = 2, 25, 20, 15
	newKeyedPolicy(t, st, "p", perKey, total)
	var thr *throttle.Throttle
	var released sync.WaitGroup
	released.Add(keys * each)
	var overKey, overTotal atomic.Int64
	dispatch := func(items []throttle.Item) {
		for _, it := range items {
			held := heldByKey(t, st, "p")
			sum := 0
			for _, n := range held {
				sum += n
			}
			if held[customer(it.Event)] > perKey {
				overKey.Add(1)
			}
			if sum > total {
				overTotal.Add(1)
			}
			go func(e *model.Event) {
				defer released.Done()
				rngMu.Lock()
				d := time.Duration(rng.IntN(2000)) * time.Microsecond
				storeOnly := rng.IntN(4) == 0
				rngMu.Unlock()
				time.Sleep(d) // the consumer's work
				cur, _ := st.EventGetByID(ctx, e.ID)
				if storeOnly {
					// Another instance's release: the owner learns of it
					// by a wake-up.
					if _, err := throttle.Release(ctx, st, cur, time.Now()); err != nil {
						t.Error(err)
					}
					thr.Released("p")
					return
				}
				if _, err := thr.Release(ctx, cur, time.Now()); err != nil {
					t.Error(err)
				}
			}(it.Event)
		}
	}
	thr = startThrottle(t, st, throttle.Config{PollInterval: time.Second}, dispatch, nil)
	var all []throttle.Item
	for k := range keys {
		all = append(all, keyedEvents(t, st, "p", fmt.Sprint("c", k), each, 0)...)
	}
	thr.Enqueue(all...)
	done := make(chan struct{})
	go func() { released.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("not every event was delivered and released; %d waiting", thr.Waiting("p"))
	}
	if overKey.Load() > 0 || overTotal.Load() > 0 {
		t.Fatalf("%d dispatches saw more than %d tokens of one key, %d more than %d in all", overKey.Load(), perKey, overTotal.Load(), total)
	}
	if n := inUse(t, st, "p"); n != 0 {
		t.Fatalf("InUse = %d at the end", n)
	}
}

func TestKeyed(t *testing.T) {
	ctx := context.Background()

	runInBubble(t, "RoundRobinAcrossKeys", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newKeyedPolicy(t, st, "p", 1, 1) // one event at a time in all
		var order []string
		var thr *throttle.Throttle
		thr = startThrottle(t, st, throttle.Config{PollInterval: time.Hour}, func(items []throttle.Item) {
			for _, it := range items {
				order = append(order, customer(it.Event))
				cur, _ := st.EventGetByID(ctx, it.Event.ID)
				go func() { _, _ = thr.Release(ctx, cur, time.Now()) }()
			}
		}, nil)
		var all []throttle.Item
		all = append(all, keyedEvents(t, st, "p", "big", 30, 0)...)
		all = append(all, keyedEvents(t, st, "p", "b", 5, 0)...)
		all = append(all, keyedEvents(t, st, "p", "-", 5, 0)...) // no customerId: key ""
		thr.Enqueue(all...)
		synctest.Wait()
		if len(order) != 40 {
			t.Fatalf("%d of 40 dispatched", len(order))
		}
		// Round robin: the small keys are done within their first 15.
		first := map[string]int{}
		for _, k := range order[:15] {
			first[k]++
		}
		if first["b"] != 5 || first[""] != 5 || first["big"] != 5 {
			t.Fatalf("first 15 dispatches by key: %v (order %v)", first, order)
		}
	})

	runInBubble(t, "PriorityBeforeKeys", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newKeyedPolicy(t, st, "p", 1, 1)
		var order []int
		var thr *throttle.Throttle
		thr = startThrottle(t, st, throttle.Config{PollInterval: time.Hour}, func(items []throttle.Item) {
			for _, it := range items {
				order = append(order, it.Event.Priority)
				cur, _ := st.EventGetByID(ctx, it.Event.ID)
				go func() { _, _ = thr.Release(ctx, cur, time.Now()) }()
			}
		}, nil)
		var all []throttle.Item
		all = append(all, keyedEvents(t, st, "p", "a", 3, 0)...)
		all = append(all, keyedEvents(t, st, "p", "b", 3, 5)...)
		thr.Enqueue(all...)
		synctest.Wait()
		want := []int{5, 5, 5, 0, 0, 0}
		if fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("priorities in dispatch order %v, want %v", order, want)
		}
	})

	runInBubble(t, "KeyAtBoundDoesNotBlockOthers", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newKeyedPolicy(t, st, "p", 2, 0)
		got := map[string]int{}
		thr := startThrottle(t, st, throttle.Config{PollInterval: time.Hour}, func(items []throttle.Item) {
			for _, it := range items {
				got[customer(it.Event)]++
			}
		}, nil)
		var all []throttle.Item
		for _, k := range []string{"a", "b", "c"} {
			all = append(all, keyedEvents(t, st, "p", k, 10, 0)...)
		}
		thr.Enqueue(all...)
		synctest.Wait()
		if got["a"] != 2 || got["b"] != 2 || got["c"] != 2 {
			t.Fatalf("dispatched by key %v, want 2 of each (no total bound)", got)
		}
		if n := inUse(t, st, "p"); n != 6 {
			t.Fatalf("InUse = %d, want the total 6", n)
		}
	})

	runInBubble(t, "TakeoverCountsHoldersByKey", func(t *testing.T) {
		// A previous owner left two events of key a holding tokens: the
		// new owner lets no more of a out until one is released, and b
		// goes at once.
		st := throttletest.NewMemStore()
		newKeyedPolicy(t, st, "p", 2, 10)
		prev := keyedEvents(t, st, "p", "a", 2, 9)
		if n, _ := st.PolicyAcquireTokens(ctx, "p", 2); n != 2 {
			t.Fatalf("acquired %d", n)
		}
		exp := time.Now().Add(time.Minute)
		for _, it := range prev {
			if _, err := st.EventTransition(ctx, transition(it.Event.ID, model.EventScheduled, model.EventDelivered, &exp)); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]int{}
		thr := startThrottle(t, st, throttle.Config{PollInterval: time.Hour}, func(items []throttle.Item) {
			for _, it := range items {
				got[customer(it.Event)]++
			}
		}, nil)
		var all []throttle.Item
		all = append(all, keyedEvents(t, st, "p", "a", 3, 0)...)
		all = append(all, keyedEvents(t, st, "p", "b", 3, 0)...)
		thr.Enqueue(all...)
		synctest.Wait()
		if got["a"] != 0 || got["b"] != 2 {
			t.Fatalf("dispatched by key %v, want no a (2 held from before) and 2 b", got)
		}
		cur, _ := st.EventGetByID(ctx, prev[0].Event.ID)
		if ok, err := throttle.Release(ctx, st, cur, time.Now()); !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
		thr.Released("p")
		synctest.Wait()
		if got["a"] != 1 {
			t.Fatalf("after releasing one of a: dispatched by key %v, want 1 a", got)
		}
		if n := inUse(t, st, "p"); n != 4 {
			t.Fatalf("InUse = %d, want 4 (1+1 of a, 2 of b)", n)
		}
	})

	runInBubble(t, "ManyKeysAllServed", func(t *testing.T) {
		st := throttletest.NewMemStore()
		newKeyedPolicy(t, st, "p", 1, 0)
		var thr *throttle.Throttle
		thr = startThrottle(t, st, throttle.Config{PollInterval: time.Hour}, func(items []throttle.Item) {
			for _, it := range items {
				cur, _ := st.EventGetByID(ctx, it.Event.ID)
				go func() { _, _ = thr.Release(ctx, cur, time.Now()) }()
			}
		}, nil)
		var all []throttle.Item
		for k := range 500 {
			all = append(all, keyedEvents(t, st, "p", fmt.Sprint("k", k), 2, 0)...)
		}
		thr.Enqueue(all...)
		synctest.Wait()
		if n := thr.Waiting("p"); n != 0 {
			t.Fatalf("%d still waiting", n)
		}
		if n := holding(t, st, "p"); n != 0 {
			t.Fatalf("%d still holding", n)
		}
	})
}
