package emitter_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// TestSavedManyEmitsLikeSaved saves a cron schedule, a one-off, a paused
// schedule and a one-off outside its range in one call: each gets the
// fires a Saved of its own would give it.
func TestSavedManyEmitsLikeSaved(t *testing.T) {
	st := openEmbedded(t)
	ctx := context.Background()
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, st, clk, nil)
	runPass(t, e) // every partition scanned up to 10:03

	every := sched("many-cron", "* * * * *", "UTC", 1)
	once := sched("many-once", "", "UTC", 2, func(s *model.Schedule) { s.RunAt = ptrTime(utc("2025-06-02T12:00:00Z")) })
	paused := sched("many-paused", "* * * * *", "UTC", 1, func(s *model.Schedule) { s.State = model.SchedulePaused })
	ended := sched("many-ended", "", "UTC", 1, func(s *model.Schedule) {
		s.RunAt = ptrTime(utc("2025-06-02T12:00:00Z"))
		s.EndAt = ptrTime(utc("2025-06-02T11:00:00Z"))
	})
	create(t, st, every, once, paused, ended)
	ss := []*model.Schedule{every, once, paused, ended}
	keys := make([][]cron.Key, len(ss))
	for i, s := range ss {
		keys[i] = keysOf(t, s)
	}
	if err := savedMany(ctx, e, ss, keys); err != nil {
		t.Fatal(err)
	}
	checkFires(t, st, every.ID, "10:01 10:02 10:03 10:04")
	checkFires(t, st, once.ID, "12:00")
	checkFires(t, st, paused.ID, "")
	checkFires(t, st, ended.ID, "")
	if fs := firesOf(t, st, once.ID); len(eventsOf(t, st, fs[0].ID)) != 2 {
		t.Fatalf("one-off fire has %d events, want 2", len(eventsOf(t, st, fs[0].ID)))
	}

	if err := savedMany(ctx, e, ss, keys[:1]); err == nil {
		t.Fatal("fewer key lists than schedules: no error")
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

// savedMany emits the fires of ss, stored already, as a create does for
// schedules it finds stored by an earlier attempt (PlanCreates' done with
// each of them recovered): as Saved would, in one batch.
func savedMany(ctx context.Context, e *emitter.Emitter, ss []*model.Schedule, keys [][]cron.Key) error {
	_, done, err := e.PlanCreates(ctx, ss, keys)
	if err != nil {
		return err
	}
	errs := make([]error, len(ss))
	for i := range errs {
		errs[i] = model.ErrConflict
	}
	return done(ctx, errs, ss)
}

// firesWriteCounter counts the emitter's fire writes.
type firesWriteCounter struct {
	emitter.Store
	single, many atomic.Int32
}

func (c *firesWriteCounter) FireInsert(ctx context.Context, f *model.Fire) (bool, error) {
	c.single.Add(1)
	return c.Store.FireInsert(ctx, f)
}

func (c *firesWriteCounter) FireInsertMany(ctx context.Context, fs []store.FireNew) ([]bool, int, error) {
	c.many.Add(1)
	return c.Store.FireInsertMany(ctx, fs)
}

// TestSavedManyWritesOneOffsTogether saves 250 one-offs, one of whose fires
// was recorded before: the new fires are written with their events in
// BatchSize writes, not one write each, and the recorded fire keeps its
// decision and gets its events.
func TestSavedManyWritesOneOffsTogether(t *testing.T) {
	st := openEmbedded(t)
	ctx := context.Background()
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	counter := &firesWriteCounter{Store: st}
	metrics := newCountingMetrics()
	e := newEmitter(t, counter, clk, func(c *emitter.Config, d *emitter.Deps) { d.Metrics = metrics }) // BatchSize 100
	runAt := utc("2025-06-02T12:00:00.250Z")
	var ss []*model.Schedule
	for i := range 250 {
		ss = append(ss, sched(fmt.Sprintf("together-%03d", i), "", "UTC", 1, func(s *model.Schedule) { s.RunAt = ptrTime(runAt) }))
	}
	create(t, st, ss...)
	pre := &model.Fire{ID: model.FireID(ss[7].ID, ss[7].Version, runAt), ScheduleID: ss[7].ID, TenantID: ss[7].TenantID,
		FireTime: runAt, Count: 1, Decision: model.FireTriggered, CreatedAt: clk.Now()}
	if _, err := st.FireInsert(ctx, pre); err != nil {
		t.Fatal(err)
	}
	if err := savedMany(ctx, e, ss, make([][]cron.Key, len(ss))); err != nil {
		t.Fatal(err)
	}
	if n := counter.single.Load(); n != 0 {
		t.Errorf("%d fires written one by one, want 0", n)
	}
	if n := counter.many.Load(); n < 2 || n > 3 {
		t.Errorf("%d FireInsertMany calls for 250 one-off fires with BatchSize 100, want 2 or 3", n)
	}
	for _, s := range ss {
		fs := firesOf(t, st, s.ID)
		if len(fs) != 1 || !fs[0].FireTime.Equal(runAt) {
			t.Fatalf("%s: fires %v, want one at %s", s.ID, fireTimes(fs), runAt)
		}
		if evs := eventsOf(t, st, fs[0].ID); len(evs) != 1 {
			t.Fatalf("%s: fire has %d events, want 1", s.ID, len(evs))
		}
	}
	if f := firesOf(t, st, ss[7].ID)[0]; f.Decision != model.FireTriggered {
		t.Errorf("fire recorded before has decision %s, want %s", f.Decision, model.FireTriggered)
	}
	if n := metrics.fires[model.FireEmitted]; n != 249 {
		t.Errorf("%d fires recorded as emitted, want 249", n)
	}
}
