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

// gatedStore holds back the store calls that release and start (two
// transitions, the second with RequiresPrevious) until the gate opens, so
// that a test sees what happens while such a commit runs.
type gatedStore struct {
	*throttletest.MemStore
	gate    chan struct{}
	opened  sync.Once
	mu      sync.Mutex
	blocked int
}

// open lets the held-back calls through; safe to call twice.
func (g *gatedStore) open() { g.opened.Do(func() { close(g.gate) }) }

func (g *gatedStore) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	if len(ts) == 2 && ts[1].RequiresPrevious {
		g.mu.Lock()
		g.blocked++
		g.mu.Unlock()
		<-g.gate
	}
	return g.MemStore.EventTransition(ctx, ts)
}

func (g *gatedStore) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blocked
}

// earlySetup runs a policy with maxInFlight 1 and n events under a Throttle
// with EarlyDispatch; it returns once the first event holds the token and
// its delivery is recorded (delivered).
func earlySetup(t *testing.T, n int) (*gatedStore, *throttle.Throttle, func() []throttle.Item, *model.Event) {
	t.Helper()
	ctx := context.Background()
	mem := throttletest.NewMemStore()
	st := &gatedStore{MemStore: mem, gate: make(chan struct{})}
	newPolicy(t, mem, "p", 1, time.Minute)
	items := scheduledEvents(t, mem, "p", "s", n, 1)
	var mu sync.Mutex
	var got []throttle.Item
	thr := startThrottle(t, st, throttle.Config{EarlyDispatch: true}, func(its []throttle.Item) {
		mu.Lock()
		got = append(got, its...)
		mu.Unlock()
	}, nil)
	// A failed test must not leave calls held back.
	t.Cleanup(st.open)
	thr.Enqueue(items...)
	dispatched := func() []throttle.Item { mu.Lock(); defer mu.Unlock(); return append([]throttle.Item(nil), got...) }
	waitFor(t, 5*time.Second, "first dispatched", func() bool { return len(dispatched()) == 1 })
	first := dispatched()[0]
	now := time.Now()
	res, err := mem.EventTransition(ctx, []store.EventTransition{{ID: first.Event.ID, From: model.EventDelivering, Fence: 1,
		To: model.EventDelivered, DeliveredAt: &now, Attempts: 1, At: now}})
	if err != nil || res[0] != nil {
		t.Fatalf("mark delivered: %v %v", err, res)
	}
	e, err := mem.EventGetByID(ctx, first.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	return st, thr, dispatched, e
}

// backToDelivering moves first back to delivering, as before the handler's
// outcome write.
func backToDelivering(t *testing.T, st *gatedStore, first *model.Event) {
	t.Helper()
	res, err := st.MemStore.EventTransition(context.Background(), []store.EventTransition{{ID: first.ID,
		From: model.EventDelivered, To: model.EventDelivering, At: time.Now()}})
	if err != nil || res[0] != nil {
		t.Fatalf("back to delivering: %v %v", err, res)
	}
	first.Status = model.EventDelivering
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// With EarlyDispatch, the release of a delivered event sends the next one
// while the commit that releases and starts them still runs; the release
// call and the next event's Started wait for that commit. The next event's
// own release, made meanwhile, waits for it too, and a second release of the
// first event hands out nothing more.
func TestEarlyDispatchSendsBeforeCommit(t *testing.T) {
	synctest.Test(t, testEarlyDispatchSendsBeforeCommit)
}

func testEarlyDispatchSendsBeforeCommit(t *testing.T) {
	ctx := context.Background()
	st, thr, dispatched, first := earlySetup(t, 3)

	type result struct {
		ok  bool
		err error
	}
	rel := make(chan result, 1)
	go func() {
		ok, err := thr.Release(ctx, first, time.Now())
		rel <- result{ok, err}
	}()
	waitFor(t, 5*time.Second, "next sent early", func() bool { return len(dispatched()) == 2 })
	next := dispatched()[1]
	if next.Started == nil || closed(next.Started) {
		t.Fatal("the early-sent event's Started is nil or closed before its start was written")
	}
	if next.Event.Status != model.EventDelivering || next.Policy == nil || next.Event.TokenExpiresAt == nil {
		t.Fatalf("dispatched %s as %s (policy %v)", next.Event.ID, next.Event.Status, next.Policy)
	}
	if st.waiting() != 1 {
		t.Fatalf("%d release-and-start commits waiting, want 1", st.waiting())
	}
	if cur, _ := st.EventGetByID(ctx, next.Event.ID); cur.Status != model.EventScheduled {
		t.Fatalf("next event is %s before the commit, want scheduled", cur.Status)
	}

	// A fast consumer releases the next event (read as still scheduled),
	// and the first event's release is repeated; neither may finish yet.
	stale, _ := st.EventGetByID(ctx, next.Event.ID)
	relNext := make(chan result, 1)
	go func() {
		ok, err := thr.Release(ctx, stale, time.Now())
		relNext <- result{ok, err}
	}()
	relAgain := make(chan result, 1)
	go func() {
		ok, err := thr.Release(ctx, first, time.Now())
		relAgain <- result{ok, err}
	}()
	// Once every goroutine of the bubble is blocked, the first release
	// waits in its commit and the other two behind the event slots that it
	// holds (they never reach the store): whatever was going to return
	// without the commit has returned.
	synctest.Wait()
	select {
	case r := <-rel:
		t.Fatalf("release returned %v before its commit", r)
	case r := <-relNext:
		t.Fatalf("release of the next event returned %v before its start was written", r)
	case r := <-relAgain:
		t.Fatalf("second release returned %v while the first was being written", r)
	default:
	}
	if n := st.waiting(); n != 1 {
		t.Fatalf("%d release-and-start commits waiting, want 1", n)
	}

	st.open()
	if r := <-rel; !r.ok || r.err != nil {
		t.Fatalf("release: %v, %v", r.ok, r.err)
	}
	if !closed(next.Started) {
		t.Fatal("Started not closed after the release returned")
	}
	if r := <-relAgain; r.ok || r.err != nil {
		t.Fatalf("second release of the first event: %v, %v; want false, nil", r.ok, r.err)
	}
	if r := <-relNext; !r.ok || r.err != nil {
		t.Fatalf("release of the next event: %v, %v; want true, nil", r.ok, r.err)
	}
	// The next event's release handed the token to the third event.
	waitFor(t, 5*time.Second, "third dispatched", func() bool { return len(dispatched()) == 3 })
	if d := dispatched(); d[2].Event.ID == d[1].Event.ID || d[2].Event.ID == first.ID {
		t.Fatalf("third dispatch is %s again", d[2].Event.ID)
	}
	synctest.Wait()
	if n := len(dispatched()); n != 3 {
		t.Fatalf("%d dispatched, want 3 (one per token hand-over)", n)
	}
	if n := holding(t, st.MemStore, "p"); n != 1 {
		t.Fatalf("%d events hold tokens, want 1", n)
	}
	if n := inUse(t, st.MemStore, "p"); n != 1 {
		t.Fatalf("InUse %d, want 1", n)
	}
}

// An event whose delivery outcome is not written yet (still delivering) is
// released the usual way: the next event goes only after the commit.
func TestEarlyDispatchWaitsForDeliveredStatus(t *testing.T) {
	synctest.Test(t, testEarlyDispatchWaitsForDeliveredStatus)
}

func testEarlyDispatchWaitsForDeliveredStatus(t *testing.T) {
	ctx := context.Background()
	st, thr, dispatched, first := earlySetup(t, 2)
	backToDelivering(t, st, first)
	done := make(chan bool, 1)
	go func() {
		ok, err := thr.Release(ctx, first, time.Now())
		if err != nil {
			t.Error(err)
		}
		done <- ok
	}()
	waitFor(t, 5*time.Second, "commit reached", func() bool { return st.waiting() == 1 })
	// An early send would come before the commit: by the time every
	// goroutine of the bubble blocks, it would have been dispatched.
	synctest.Wait()
	if n := len(dispatched()); n != 1 {
		t.Fatalf("%d dispatched before the commit, want 1: a delivering event must not be released early", n)
	}
	st.open()
	if !<-done {
		t.Fatal("release lost")
	}
	waitFor(t, 5*time.Second, "next dispatched", func() bool { return len(dispatched()) == 2 })
	if d := dispatched(); d[1].Started != nil {
		t.Fatal("the usual path set Started")
	}
}

// A delivering event whose 2xx the handler reported (Delivered) goes early
// too. If the handler's delivered write lands while the release commits, the
// release is written again from delivered and the token still moves once.
func TestEarlyDispatchAfterReportedDelivery(t *testing.T) {
	ctx := context.Background()
	st, thr, dispatched, first := earlySetup(t, 2)
	backToDelivering(t, st, first)
	thr.Delivered(first.ID)
	done := make(chan bool, 1)
	go func() {
		ok, err := thr.Release(ctx, first, time.Now())
		if err != nil {
			t.Error(err)
		}
		done <- ok
	}()
	waitFor(t, 5*time.Second, "next sent early", func() bool { return len(dispatched()) == 2 })
	// The handler's outcome write wins the race with the release.
	now := time.Now()
	res, err := st.MemStore.EventTransition(ctx, []store.EventTransition{{ID: first.ID, From: model.EventDelivering, Fence: 1,
		To: model.EventDelivered, DeliveredAt: &now, Attempts: 1, At: now}})
	if err != nil || res[0] != nil {
		t.Fatalf("delivered write: %v %v", err, res)
	}
	thr.OutcomeWritten(first.ID)
	st.open()
	if !<-done {
		t.Fatal("release lost to the delivered write")
	}
	if cur, _ := st.EventGetByID(ctx, first.ID); cur.Status != model.EventReleased {
		t.Fatalf("first event is %s, want released", cur.Status)
	}
	if cur, _ := st.EventGetByID(ctx, dispatched()[1].Event.ID); cur.Status != model.EventDelivering {
		t.Fatalf("next event is %s, want delivering", cur.Status)
	}
	if n := holding(t, st.MemStore, "p"); n != 1 {
		t.Fatalf("%d events hold tokens, want 1", n)
	}
}

// lostShards holds every shard under fence 1 until lost is set; then Owns
// answers false (the lease expired by this process's clock) while Held
// still lists them.
type lostShards struct{ lost atomic.Bool }

func (l *lostShards) Held() map[int]int64  { return oneShard{fence: 1}.Held() }
func (l *lostShards) Owns(int, int64) bool { return !l.lost.Load() }

// An instance whose shard lease has expired by its own clock sends nothing
// early: the next event goes only after the commit that releases the first
// one and starts it.
func TestEarlyDispatchNeedsTheShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := throttletest.NewMemStore()
		st := &gatedStore{MemStore: mem, gate: make(chan struct{})}
		newPolicy(t, mem, "p", 1, time.Minute)
		items := scheduledEvents(t, mem, "p", "s", 2, 1)
		shards := &lostShards{}
		thr, err := throttle.New(throttle.Config{EarlyDispatch: true}, throttle.Deps{Store: st, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		for s := range thr.Config().Shards {
			thr.MarkSettled(s, 1)
		}
		var mu sync.Mutex
		var got []throttle.Item
		runThrottle(t, thr, func(its []throttle.Item) {
			mu.Lock()
			got = append(got, its...)
			mu.Unlock()
		})
		t.Cleanup(st.open)
		thr.Enqueue(items...)
		synctest.Wait()
		mu.Lock()
		if len(got) != 1 {
			mu.Unlock()
			t.Fatalf("%d dispatched with maxInFlight 1", len(got))
		}
		first := got[0].Event
		mu.Unlock()
		now := time.Now()
		if res, err := mem.EventTransition(ctx, []store.EventTransition{{ID: first.ID, From: model.EventDelivering, Fence: 1,
			To: model.EventDelivered, DeliveredAt: &now, Attempts: 1, At: now}}); err != nil || res[0] != nil {
			t.Fatalf("mark delivered: %v %v", err, res)
		}
		e, err := mem.EventGetByID(ctx, first.ID)
		if err != nil {
			t.Fatal(err)
		}

		shards.lost.Store(true)
		rel := make(chan error, 1)
		go func() {
			_, err := thr.Release(ctx, e, time.Now())
			rel <- err
		}()
		synctest.Wait()
		if st.waiting() != 1 {
			t.Fatalf("%d release-and-start commits waiting, want 1", st.waiting())
		}
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n != 1 {
			t.Fatalf("%d dispatched while the commit waits: the next event went early without the shard", n)
		}
		st.open()
		if err := <-rel; err != nil {
			t.Fatalf("release: %v", err)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 2 {
			t.Fatalf("%d dispatched after the commit, want 2", len(got))
		}
	})
}
