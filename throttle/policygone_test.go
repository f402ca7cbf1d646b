package throttle_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/internal/testkit/throttletest"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// logBuffer collects log lines; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// deletableStore answers for a deleted policy once gone is set.
type deletableStore struct {
	*throttletest.MemStore
	gone atomic.Bool
}

func (d *deletableStore) PolicyGetByID(ctx context.Context, id string) (*model.Policy, error) {
	if d.gone.Load() {
		return nil, model.ErrNotFound
	}
	return d.MemStore.PolicyGetByID(ctx, id)
}

func (d *deletableStore) PolicyAcquireTokens(ctx context.Context, id string, want int) (int, error) {
	if d.gone.Load() {
		return 0, model.ErrNotFound
	}
	return d.MemStore.PolicyAcquireTokens(ctx, id, want)
}

// A deleted policy's bucket stops reconciling: no warning at every
// interval, one line at info, and no bucket left.
func TestDeletedPolicyStopsReconciling(t *testing.T) {
	mem := throttletest.NewMemStore()
	st := &deletableStore{MemStore: mem}
	newPolicy(t, mem, "p", 1, time.Minute)
	var logs logBuffer
	thr, err := throttle.New(throttle.Config{ReconcileInterval: 5 * time.Millisecond, PollInterval: 5 * time.Millisecond},
		throttle.Deps{Store: st, Shards: oneShard{fence: 1}, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	for s := range thr.Config().Shards {
		thr.MarkSettled(s, 1)
	}
	var dispatched atomic.Int32
	runThrottle(t, thr, func(items []throttle.Item) { dispatched.Add(int32(len(items))) })
	items := scheduledEvents(t, mem, "p", "s", 2, 1)
	thr.Enqueue(items...)
	waitFor(t, 5*time.Second, "the first event dispatched", func() bool { return dispatched.Load() == 1 })
	st.gone.Store(true)
	waitFor(t, 5*time.Second, "the bucket dropped", func() bool { return logs.count("bucket is dropped") == 1 })
	if n := logs.count("token reconciliation failed"); n != 0 {
		t.Errorf("%d reconciliation warnings for a deleted policy", n)
	}
	if n := thr.Waiting("p"); n != 0 {
		t.Errorf("%d events still wait for the deleted policy", n)
	}
	if e, _ := mem.EventGetByID(context.Background(), items[1].Event.ID); e.Status != model.EventDead {
		t.Errorf("waiting event of the deleted policy is %s, want dead", e.Status)
	}
}

// A deleted adaptive policy's controller is dropped with its bucket.
func TestDeletedPolicyDropsItsLimit(t *testing.T) {
	mem := throttletest.NewMemStore()
	st := &deletableStore{MemStore: mem}
	if err := mem.PolicyCreate(context.Background(), &model.Policy{ID: "p", TenantID: "t1", Name: "p", MaxInFlight: 4, TokenTimeout: time.Minute,
		Version: 1, Adaptive: &model.AdaptiveLimit{Min: 1, Max: 4}}); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	thr, err := throttle.New(throttle.Config{ReconcileInterval: 5 * time.Millisecond, PollInterval: 5 * time.Millisecond},
		throttle.Deps{Store: st, Shards: oneShard{fence: 1}, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	for s := range thr.Config().Shards {
		thr.MarkSettled(s, 1)
	}
	var dispatched atomic.Int32
	runThrottle(t, thr, func(items []throttle.Item) { dispatched.Add(int32(len(items))) })
	thr.Enqueue(scheduledEvents(t, mem, "p", "s", 6, 1)...)
	waitFor(t, 5*time.Second, "the first events dispatched", func() bool { return dispatched.Load() == 4 })
	thr.Observe("p", throttle.OutcomeOverloaded, 0)
	if ls, ok := thr.Limit("p"); !ok || ls.Limit != 3 {
		t.Fatalf("limit %+v, %v; want 3 after a 429", ls, ok)
	}
	st.gone.Store(true)
	waitFor(t, 5*time.Second, "the bucket dropped", func() bool { return logs.count("bucket is dropped") == 1 })
	if ls, ok := thr.Limit("p"); ok {
		t.Fatalf("the deleted policy still has a limit: %+v", ls)
	}
}
