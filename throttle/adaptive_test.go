package throttle_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/throttletest"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

func TestAdaptiveLimit(t *testing.T) {
	ctx := context.Background()
	// run enqueues 30 events of a policy of at most 10 tokens, lets the
	// owner dispatch, signals one 429, then releases four of the
	// dispatched events one by one; it returns how many events were
	// dispatched after each step.
	run := func(t *testing.T, adaptive *model.AdaptiveLimit) []int {
		st := throttletest.NewMemStore()
		p := &model.Policy{ID: "p", TenantID: "t1", Name: "p", MaxInFlight: 10, TokenTimeout: time.Hour, Version: 1, Adaptive: adaptive}
		if err := st.PolicyCreate(ctx, p); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []throttle.Item
		dispatched := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(got)
		}
		thr := startThrottle(t, st, throttle.Config{}, func(items []throttle.Item) {
			mu.Lock()
			got = append(got, items...)
			mu.Unlock()
		}, nil)
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 30, 1)...)
		settle := func() {
			time.Sleep(5 * time.Second) // fake time: reconciliation and polls run
			synctest.Wait()
		}
		settle()
		steps := []int{dispatched()}
		thr.Observe("p", throttle.OutcomeOverloaded, 0)
		for i := range 4 {
			mu.Lock()
			id := got[i].Event.ID
			mu.Unlock()
			e, err := st.EventGetByID(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := thr.Release(ctx, e, time.Now()); !ok || err != nil {
				t.Fatalf("release %s = %v, %v", id, ok, err)
			}
			settle()
			steps = append(steps, dispatched())
		}
		return steps
	}
	same := func(a, b []int) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}

	runInBubble(t, "DecreaseHoldsReleasedTokensBack", func(t *testing.T) {
		// Limit 10 → 9 on the 429: the first release brings the tokens
		// out down to 9, the next ones go to waiting events.
		if got, want := run(t, &model.AdaptiveLimit{Min: 1, Max: 10}), []int{10, 10, 11, 12, 13}; !same(got, want) {
			t.Fatalf("dispatched after each step = %v, want %v", got, want)
		}
	})
	runInBubble(t, "NotAdaptiveUnchanged", func(t *testing.T) {
		if got, want := run(t, nil), []int{10, 11, 12, 13, 14}; !same(got, want) {
			t.Fatalf("dispatched after each step = %v, want %v", got, want)
		}
	})
	runInBubble(t, "LimitReported", func(t *testing.T) {
		st := throttletest.NewMemStore()
		p := &model.Policy{ID: "p", TenantID: "t1", Name: "p", MaxInFlight: 10, TokenTimeout: time.Hour, Version: 1, Adaptive: &model.AdaptiveLimit{Min: 1, Max: 10}}
		if err := st.PolicyCreate(ctx, p); err != nil {
			t.Fatal(err)
		}
		thr := startThrottle(t, st, throttle.Config{}, func([]throttle.Item) {}, nil)
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 1, 1)...)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		thr.Observe("p", throttle.OutcomeTimeout, 0)
		ls, ok := thr.Limit("p")
		if !ok || ls.Limit != 9 || ls.Reason != throttle.LimitReasonTimeout {
			t.Fatalf("Limit = %+v, %v; want 9 after a timeout", ls, ok)
		}
	})
	runInBubble(t, "LimitRecorded", func(t *testing.T) {
		st := throttletest.NewMemStore()
		p := &model.Policy{ID: "p", TenantID: "t1", Name: "p", MaxInFlight: 10, TokenTimeout: time.Hour, Version: 1, Adaptive: &model.AdaptiveLimit{Min: 1, Max: 10}}
		if err := st.PolicyCreate(ctx, p); err != nil {
			t.Fatal(err)
		}
		rec := &limitRecorder{}
		thr, err := throttle.New(throttle.Config{}, throttle.Deps{Store: st, Shards: oneShard{fence: 1}, Limits: rec, Metrics: rec})
		if err != nil {
			t.Fatal(err)
		}
		runThrottle(t, thr, func([]throttle.Item) {})
		thr.Enqueue(scheduledEvents(t, st, "p", "s", 1, 1)...)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		thr.Observe("p", throttle.OutcomeTimeout, 0)
		synctest.Wait() // the store write runs off the delivery path
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.exported != 9 || rec.stored != 9 || rec.reason != throttle.LimitReasonTimeout {
			t.Fatalf("exported %d, stored %d (%s); want 9 (timeout) in both", rec.exported, rec.stored, rec.reason)
		}
	})
}

// limitRecorder is the throttle's Metrics and Limits: it keeps the last
// effective limit each was told.
type limitRecorder struct {
	throttle.NopMetrics
	mu       sync.Mutex
	exported int
	stored   int
	reason   string
}

func (r *limitRecorder) EffectiveLimit(_ string, limit int) {
	r.mu.Lock()
	r.exported = limit
	r.mu.Unlock()
}

func (r *limitRecorder) PolicySetLimit(_ context.Context, _ string, limit int, reason string, _ time.Time) error {
	r.mu.Lock()
	r.stored, r.reason = limit, reason
	r.mu.Unlock()
	return nil
}

// adaptiveRun is an adaptive policy's throttle over the in-memory store,
// with the events it dispatched.
type adaptiveRun struct {
	st  *throttletest.MemStore
	thr *throttle.Throttle
	mu  sync.Mutex
	got []throttle.Item
}

// startAdaptiveRun enqueues n events of an adaptive policy (min 1, max
// ceiling; maxInFlight ceiling) whose owner starts at limit, and lets the
// owner dispatch. Call it in a synctest bubble.
func startAdaptiveRun(t *testing.T, ceiling, limit, n int) *adaptiveRun {
	r := &adaptiveRun{st: throttletest.NewMemStore()}
	p := &model.Policy{ID: "p", TenantID: "t1", Name: "p", MaxInFlight: ceiling, TokenTimeout: time.Hour, Version: 1,
		Adaptive: &model.AdaptiveLimit{Min: 1, Max: ceiling}, EffectiveLimit: limit}
	if err := r.st.PolicyCreate(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	r.thr = startThrottle(t, r.st, throttle.Config{}, func(items []throttle.Item) {
		r.mu.Lock()
		r.got = append(r.got, items...)
		r.mu.Unlock()
	}, nil)
	r.thr.Enqueue(scheduledEvents(t, r.st, "p", "s", n, 1)...)
	r.settle()
	return r
}

// settle lets fake time pass: reconciliation and polls run.
func (r *adaptiveRun) settle() {
	time.Sleep(5 * time.Second)
	synctest.Wait()
}

// release releases dispatched event i as delivered held ago.
func (r *adaptiveRun) release(t *testing.T, i int, held time.Duration) {
	t.Helper()
	r.mu.Lock()
	id := r.got[i].Event.ID
	r.mu.Unlock()
	e, err := r.st.EventGetByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-held)
	e.DeliveredAt = &at
	if ok, err := r.thr.Release(context.Background(), e, time.Now()); !ok || err != nil {
		t.Fatalf("release %s = %v, %v", id, ok, err)
	}
}

// TestAdaptiveReleaseLatencyLowersLimit: a window of releases ten times
// slower than the first lowers the limit of a policy whose consumer
// releases its events; it fails when Release does not report the time the
// consumer held the event.
func TestAdaptiveReleaseLatencyLowersLimit(t *testing.T) {
	runInBubble(t, "Slower", func(t *testing.T) {
		r := startAdaptiveRun(t, 10, 10, 40)
		for i := range 10 {
			r.release(t, i, 10*time.Millisecond)
		}
		r.settle()
		if ls, _ := r.thr.Limit("p"); ls.Limit != 10 {
			t.Fatalf("limit %+v after a window of 10 ms releases, want 10", ls)
		}
		for i := 10; i < 20; i++ {
			r.release(t, i, 100*time.Millisecond)
		}
		if ls, _ := r.thr.Limit("p"); ls.Limit != 9 || ls.Reason != throttle.LimitReasonLatency {
			t.Fatalf("limit %+v after a window of 100 ms releases, want 9 latency", ls)
		}
	})
}

// TestAdaptiveLimitGrowsOnlyUnderLoad: healthy answers raise the limit only
// when the owner had at least half of it out, as counted from its
// acquisitions; answers from a quiet policy leave the limit where it is.
func TestAdaptiveLimitGrowsOnlyUnderLoad(t *testing.T) {
	healthyWindows := func(r *adaptiveRun, windows int) throttle.LimitState {
		for range windows {
			ls, _ := r.thr.Limit("p")
			for range ls.Limit {
				r.thr.Observe("p", throttle.OutcomeOK, time.Millisecond)
			}
		}
		ls, _ := r.thr.Limit("p")
		return ls
	}
	runInBubble(t, "Quiet", func(t *testing.T) {
		r := startAdaptiveRun(t, 40, 20, 9) // 9 of 20 tokens out
		if ls := healthyWindows(r, 10); ls.Limit != 20 {
			t.Fatalf("limit %+v after 10 healthy windows with 9 of 20 tokens out, want 20", ls)
		}
	})
	runInBubble(t, "Loaded", func(t *testing.T) {
		r := startAdaptiveRun(t, 40, 20, 10) // 10 of 20 tokens out
		if ls := healthyWindows(r, 1); ls.Limit != 21 || ls.Reason != throttle.LimitReasonHealthy {
			t.Fatalf("limit %+v after a healthy window with 10 of 20 tokens out, want 21 healthy", ls)
		}
	})
}
