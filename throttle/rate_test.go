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
	"github.com/schedulerd/schedulerd/throttle"
)

func ratePolicy(t *testing.T, st *throttletest.MemStore, id string, max int, perSecond float64, burst int) {
	t.Helper()
	p := &model.Policy{ID: id, TenantID: "t1", Name: id, MaxInFlight: max, TokenTimeout: time.Hour,
		RatePerSecond: perSecond, Burst: burst, Version: 1}
	if err := st.PolicyCreate(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// countAt sleeps (on the bubble's clock) until start+at, lets the throttle do
// all it can, and returns how many events went.
func countAt(start time.Time, at time.Duration, n *atomic.Int64) int64 {
	time.Sleep(time.Until(start.Add(at)))
	synctest.Wait()
	return n.Load()
}

func TestPolicyRate(t *testing.T) {
	ctx := context.Background()

	runInBubble(t, "BurstThenOnePerPeriod", func(t *testing.T) {
		st := throttletest.NewMemStore()
		const burst, perSecond = 5, 10.0
		const period = time.Second / 10
		ratePolicy(t, st, "p", 1000, perSecond, burst)
		var sent atomic.Int64
		thr := startThrottle(t, st, throttle.Config{PollInterval: time.Hour}, func(items []throttle.Item) {
			sent.Add(int64(len(items)))
		}, nil)
		start := time.Now()
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 40, 1)...)
		if got := countAt(start, 0, &sent); got != burst {
			t.Fatalf("%d events went at once, want the burst %d", got, burst)
		}
		// Half-way through each period: exactly one more per period.
		for k := range 20 {
			if got := countAt(start, time.Duration(k)*period+period/2, &sent); got != int64(burst+k) {
				t.Fatalf("after %v: %d events went, want %d", time.Duration(k)*period+period/2, got, burst+k)
			}
		}
	})

	runInBubble(t, "DefaultBurstIsCeilOfRate", func(t *testing.T) {
		st := throttletest.NewMemStore()
		ratePolicy(t, st, "p", 1000, 2.5, 0)
		var sent atomic.Int64
		thr := startThrottle(t, st, throttle.Config{PollInterval: time.Hour}, func(items []throttle.Item) {
			sent.Add(int64(len(items)))
		}, nil)
		start := time.Now()
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 10, 1)...)
		if got := countAt(start, 0, &sent); got != 3 {
			t.Fatalf("%d events went at once, want ceil(2.5) = 3", got)
		}
		// 2.5 a second: the next one 400ms later.
		if got := countAt(start, 350*time.Millisecond, &sent); got != 3 {
			t.Fatalf("%d events went before 400ms, want 3", got)
		}
		if got := countAt(start, 450*time.Millisecond, &sent); got != 4 {
			t.Fatalf("%d events went by 450ms, want 4", got)
		}
	})

	runInBubble(t, "MaxInFlightStillBounds", func(t *testing.T) {
		st := throttletest.NewMemStore()
		ratePolicy(t, st, "p", 2, 100, 10)
		got := make(chan *model.Event, 10)
		thr := startThrottle(t, st, throttle.Config{PollInterval: 10 * time.Millisecond}, func(items []throttle.Item) {
			for _, it := range items {
				got <- it.Event
			}
		}, nil)
		start := time.Now()
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 5, 1)...)
		time.Sleep(time.Until(start.Add(time.Second)))
		synctest.Wait()
		if len(got) != 2 {
			t.Fatalf("%d events went with maxInFlight 2 and rate tokens to spare", len(got))
		}
		first := <-got
		cur, _ := st.EventGetByID(ctx, first.ID)
		if ok, err := thr.Release(ctx, cur, time.Now()); !ok || err != nil {
			t.Fatalf("release = %v, %v", ok, err)
		}
		synctest.Wait()
		if len(got) != 2 {
			t.Fatalf("%d events out after one release, want 2", len(got))
		}
	})

	runInBubble(t, "ReleasesHandOffOnlyAtTheRate", func(t *testing.T) {
		// Every event is released as soon as it goes, so tokens go round
		// through the hand-off: the rate still decides.
		st := throttletest.NewMemStore()
		const period = time.Second / 4
		ratePolicy(t, st, "p", 1, 4, 1)
		var sent atomic.Int64
		var thr *throttle.Throttle
		thr = startThrottle(t, st, throttle.Config{PollInterval: time.Hour}, func(items []throttle.Item) {
			for _, it := range items {
				sent.Add(1)
				go func(e *model.Event) {
					cur, _ := st.EventGetByID(ctx, e.ID)
					if ok, err := thr.Release(ctx, cur, time.Now()); !ok || err != nil {
						t.Errorf("release = %v, %v", ok, err)
					}
				}(it.Event)
			}
		}, nil)
		start := time.Now()
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 20, 1)...)
		for k := range 12 {
			if got := countAt(start, time.Duration(k)*period+period/2, &sent); got != int64(k+1) {
				t.Fatalf("after %v: %d events went, want %d", time.Duration(k)*period+period/2, got, k+1)
			}
		}
	})
}

// rerated overrides the rate of the policies it reads, as a PATCH would.
type rerated struct {
	*throttletest.MemStore
	mu        sync.Mutex
	perSecond float64
	burst     int
}

func (r *rerated) set(perSecond float64, burst int) {
	r.mu.Lock()
	r.perSecond, r.burst = perSecond, burst
	r.mu.Unlock()
}

func (r *rerated) apply(p *model.Policy) {
	r.mu.Lock()
	p.RatePerSecond, p.Burst = r.perSecond, r.burst
	r.mu.Unlock()
}

func (r *rerated) PolicyGetByID(ctx context.Context, id string) (*model.Policy, error) {
	p, err := r.MemStore.PolicyGetByID(ctx, id)
	if err == nil {
		r.apply(p)
	}
	return p, err
}

func (r *rerated) PolicyListAll(ctx context.Context) ([]*model.Policy, error) {
	ps, err := r.MemStore.PolicyListAll(ctx)
	for _, p := range ps {
		r.apply(p)
	}
	return ps, err
}

func TestPolicyRateChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := throttletest.NewMemStore()
		ratePolicy(t, mem, "p", 1000, 0.01, 1)
		st := &rerated{MemStore: mem}
		st.set(0.01, 1) // one event per 100 s
		var sent atomic.Int64
		thr := startThrottle(t, st, throttle.Config{PollInterval: time.Hour, ReconcileInterval: time.Hour}, func(items []throttle.Item) {
			sent.Add(int64(len(items)))
		}, nil)
		start := time.Now()
		thr.Enqueue(scheduledEvents(t, mem, "p", "s", 20, 1)...)
		if got := countAt(start, time.Second, &sent); got != 1 {
			t.Fatalf("%d events went in the first second at 0.01/s, want 1", got)
		}
		// The owner reads the policy again (as every reclaim pass does):
		// the waiting bucket takes the new rate at once, not after its
		// 100 s wait.
		st.set(10, 4)
		if err := thr.Reclaim(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The new burst is not granted on top: the bucket keeps the
		// tokens it had (none) and refills at 10/s from now.
		if got := countAt(start, time.Second+50*time.Millisecond, &sent); got != 1 {
			t.Fatalf("%d events 50ms after the change, want 1", got)
		}
		if got := countAt(start, time.Second+150*time.Millisecond, &sent); got != 2 {
			t.Fatalf("%d events 150ms after the change to 10/s, want 2", got)
		}
		// Removing the rate lets the rest go at once (maxInFlight 1000).
		st.set(0, 0)
		if err := thr.Reclaim(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := countAt(start, time.Second+200*time.Millisecond, &sent); got != 20 {
			t.Fatalf("%d events after the rate was removed, want 20", got)
		}
	})
}
