package emitter_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/storetest"
)

const (
	tenant     = "tenant-1"
	partitions = 4
)

func newClock(t time.Time) *clockwork.FakeClock { return clockwork.NewFakeClockAt(t) }

// setClock moves clk to t, backwards too.
func setClock(clk *clockwork.FakeClock, t time.Time) { clk.Advance(t.Sub(clk.Now())) }

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func openEmbedded(t testing.TB) store.Driver {
	t.Helper()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatalf("open embedded store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func testLogger(t testing.TB) zerolog.Logger {
	if testing.Verbose() {
		return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	}
	return zerolog.Nop()
}

// newEmitter makes an emitter over st with P = partitions holding them all,
// unless deps.Partitions is set by mod.
func newEmitter(t testing.TB, st emitter.Store, clk *clockwork.FakeClock, mod func(*emitter.Config, *emitter.Deps)) *emitter.Emitter {
	t.Helper()
	cfg := emitter.Config{Partitions: partitions, Shards: 8, Owner: "test", BatchSize: 100}
	deps := emitter.Deps{Store: st, Clock: clk, Logger: testLogger(t)}
	if mod != nil {
		mod(&cfg, &deps)
	}
	e, err := emitter.New(cfg, deps)
	if err != nil {
		t.Fatalf("emitter.New: %v", err)
	}
	return e
}

// sched builds an active cron schedule; options tweak it.
func sched(id, expr, tz string, n int, opts ...func(*model.Schedule)) *model.Schedule {
	s := &model.Schedule{
		ID: id, TenantID: tenant, Name: id, Cron: expr, Timezone: tz, EventCount: n,
		Target:      model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:1/hook"},
		Payload:     []byte(`{"job":"` + id + `"}`),
		MaxAttempts: 3, Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow,
		State: model.ScheduleActive, Partition: model.PartitionOf(id, partitions), Version: 1,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// keysOf compiles a schedule's children keys as the master does and hands
// them to Saved; nil for a one-off.
func keysOf(t testing.TB, s *model.Schedule) []cron.Key {
	t.Helper()
	if s.IsOneOff() || s.Interval > 0 {
		return nil
	}
	if len(s.Crons) > 0 {
		c, err := schedule.FromSchedule(s, 0)
		if err != nil {
			t.Fatalf("crons %q: %v", s.Crons, err)
		}
		return c.Keys
	}
	expr, err := cron.Parse(s.Cron)
	if err != nil {
		t.Fatalf("parse %q: %v", s.Cron, err)
	}
	keys, err := expr.Children(0)
	if err != nil {
		t.Fatalf("children of %q: %v", s.Cron, err)
	}
	return keys
}

// childrenOf splits a schedule as the master does.
func childrenOf(t testing.TB, s *model.Schedule) []model.Child {
	t.Helper()
	if s.IsOneOff() {
		return nil
	}
	if s.Interval > 0 {
		return []model.Child{}
	}
	keys := keysOf(t, s)
	out := make([]model.Child, 0, len(keys))
	for _, k := range keys {
		out = append(out, model.Child{
			ScheduleID: s.ID, TenantID: s.TenantID, ScheduleVersion: s.Version,
			Partition: s.Partition, Timezone: s.Timezone,
			LaunchExpression: k.LaunchExpression(), Minute: int(k.Minute),
		})
	}
	return out
}

type scheduleWriter interface {
	ScheduleCreateMany(ctx context.Context, items []store.ScheduleNew) ([]error, error)
}

func create(t testing.TB, st scheduleWriter, ss ...*model.Schedule) {
	t.Helper()
	for _, s := range ss {
		if err := storetest.CreateSchedule(context.Background(), st, s, childrenOf(t, s)); err != nil {
			t.Fatalf("create %s: %v", s.ID, err)
		}
	}
}

// firesOf returns a schedule's fires, oldest first.
func firesOf(t testing.TB, st store.Driver, scheduleID string) []*model.Fire {
	t.Helper()
	var out []*model.Fire
	var before time.Time
	for {
		page, err := st.FireList(context.Background(), &store.FireListParams{TenantID: tenant, ScheduleID: scheduleID, Before: before, Limit: 1000})
		if err != nil {
			t.Fatalf("fire list: %v", err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			break
		}
		before = page[len(page)-1].FireTime
	}
	slices.Reverse(out)
	return out
}

func fireTimes(fs []*model.Fire) []time.Time {
	out := make([]time.Time, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.FireTime.UTC())
	}
	return out
}

// eventsOf returns a fire's events ordered by id.
func eventsOf(t testing.TB, st store.Driver, fireID string) []*model.Event {
	t.Helper()
	var out []*model.Event
	after := ""
	for {
		page, err := st.EventList(context.Background(), &store.EventListParams{TenantID: tenant, FireID: fireID, After: after, Limit: 1000})
		if err != nil {
			t.Fatalf("event list: %v", err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].ID
	}
	return out
}

func runPass(t testing.TB, e *emitter.Emitter) emitter.PassStats {
	t.Helper()
	st, err := e.RunPass(context.Background())
	if err != nil {
		t.Fatalf("RunPass: %v", err)
	}
	return st
}

func minutes(from time.Time, step time.Duration, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = from.Add(time.Duration(i) * step)
	}
	return out
}

func equalTimes(a, b []time.Time) bool {
	return slices.EqualFunc(a, b, time.Time.Equal)
}

// faultyStore wraps a store and fails chosen calls.
type faultyStore struct {
	emitter.Store
	failAdvance   atomic.Int32 // fail this many WatermarkAdvance calls
	failInsertAt  atomic.Int32 // fail the EventInsertMany call with this 1-based number (0: never)
	insertCalls   atomic.Int32
	maxBatch      atomic.Int32
	eventsWritten atomic.Int64
}

var errInjected = errors.New("injected failure")

func (f *faultyStore) WatermarkAdvance(ctx context.Context, w model.Watermark) error {
	if f.failAdvance.Add(-1) >= 0 {
		return errInjected
	}
	return f.Store.WatermarkAdvance(ctx, w)
}

func (f *faultyStore) EventInsertMany(ctx context.Context, evs []*model.Event) (int, error) {
	n := f.insertCalls.Add(1)
	if n == f.failInsertAt.Load() {
		return 0, errInjected
	}
	for {
		m := f.maxBatch.Load()
		if int32(len(evs)) <= m || f.maxBatch.CompareAndSwap(m, int32(len(evs))) {
			break
		}
	}
	f.eventsWritten.Add(int64(len(evs)))
	return f.Store.EventInsertMany(ctx, evs)
}

// countingMetrics records counters for assertions.
type countingMetrics struct {
	emitter.NopMetrics
	mu      sync.Mutex
	skipped map[emitter.SkipReason]int
	fires   map[model.FireDecision]int
	lost    int
	defers  map[emitter.DeferReason]int
}

func newCountingMetrics() *countingMetrics {
	return &countingMetrics{skipped: map[emitter.SkipReason]int{}, fires: map[model.FireDecision]int{}, defers: map[emitter.DeferReason]int{}}
}

func (m *countingMetrics) FiresDeferred(r emitter.DeferReason, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.defers[r] += n
}

func (m *countingMetrics) deferred(r emitter.DeferReason) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.defers[r]
}

func (m *countingMetrics) FiresSkipped(r emitter.SkipReason, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.skipped[r] += n
}

func (m *countingMetrics) FiresRecorded(d model.FireDecision, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fires[d] += n
}

func (m *countingMetrics) PartitionLost(int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lost++
}
