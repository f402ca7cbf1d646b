package emitter_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// manyFailer fails the FireInsertMany call with the given 1-based number.
type manyFailer struct {
	emitter.Store
	failAt, calls atomic.Int32
}

func (m *manyFailer) FireInsertMany(ctx context.Context, fs []store.FireNew) ([]bool, int, error) {
	if m.calls.Add(1) == m.failAt.Load() {
		return nil, 0, errInjected
	}
	return m.Store.FireInsertMany(ctx, fs)
}

// backfillState is every fire of s with its decision and event counts.
func backfillState(t *testing.T, st store.Driver, s *model.Schedule) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	p := &store.FireListParams{TenantID: s.TenantID, ScheduleID: s.ID, Limit: 1000}
	for {
		fs, err := st.FireList(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			counts, err := st.EventCountByFire(ctx, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			out[f.ID] = fmt.Sprintf("%s %s remaining=%d %v", f.FireTime.Format(time.RFC3339), f.Decision, f.Remaining, counts)
		}
		if len(fs) < p.Limit {
			return out
		}
		p.Before = fs[len(fs)-1].FireTime
	}
}

func tenMinuteTimes(from time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = from.Add(time.Duration(i) * 10 * time.Minute)
	}
	return out
}

// TestBackfillRepeatAfterCrashMakesTheSameFires: a backfill that fails
// between its writes (of the fires written with their events, and of the
// events written after their fire) and is then repeated ends with exactly
// the fires and events of a backfill that never failed; a further repeat
// creates nothing.
func TestBackfillRepeatAfterCrashMakesTheSameFires(t *testing.T) {
	now := utc("2026-06-10T12:00:00Z")
	times := tenMinuteTimes(utc("2026-06-01T00:00:00Z"), 60)
	cfg := func(c *emitter.Config, _ *emitter.Deps) {
		c.BackgroundThreshold, c.BackgroundChunk, c.BatchSize = 30, 5, 10
	}
	s := sched("bf", "*/10 * * * *", "UTC", 5)

	clean := openEmbedded(t)
	create(t, clean, s)
	e := newEmitter(t, clean, newClock(now), cfg)
	got, err := e.Backfill(context.Background(), s, times, emitter.BackfillOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Fires != 60 || got.Events != 30 || got.Instants != 60 {
		t.Fatalf("clean backfill: %+v, want 60 fires and 30 events written with them", got)
	}
	want := backfillState(t, clean, s)
	if len(want) != 60 {
		t.Fatalf("clean backfill left %d fires, want 60", len(want))
	}

	for _, tc := range []struct {
		name  string
		setup func(*faultyStore, *manyFailer)
	}{
		{"BetweenFireWrites", func(_ *faultyStore, m *manyFailer) { m.failAt.Store(2) }},
		{"BetweenEventWrites", func(f *faultyStore, _ *manyFailer) { f.failInsertAt.Store(4) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openEmbedded(t)
			create(t, st, s)
			faulty := &faultyStore{Store: st}
			failer := &manyFailer{Store: faulty}
			tc.setup(faulty, failer)
			clk := newClock(now)
			e := newEmitter(t, failer, clk, cfg)
			if _, err := e.Backfill(context.Background(), s, times, emitter.BackfillOptions{}); err == nil {
				t.Fatal("backfill with an injected failure succeeded")
			}
			clk.Advance(time.Minute)
			if _, err := e.Backfill(context.Background(), s, times, emitter.BackfillOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := backfillState(t, st, s); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after a failure and a repeat:\n%v\nwant\n%v", got, want)
			}
			again, err := e.Backfill(context.Background(), s, times, emitter.BackfillOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if again.Fires != 0 || again.Events != 0 || again.Existing != 60 {
				t.Fatalf("repeat: %+v, want nothing new and 60 existing", again)
			}
		})
	}
}

// TestBackfillEventsLaunchFromNow: backfill fires are for past instants;
// their events launch from when they were recorded (plus the jitter), so
// that a window or a deadline is not over before they start, and overlap
// and skip do not apply to them.
func TestBackfillEventsLaunchFromNow(t *testing.T) {
	// Written with their fires, and by the background writer (threshold 1).
	for _, threshold := range []int{0, 1} {
		t.Run(fmt.Sprintf("BackgroundThreshold=%d", threshold), func(t *testing.T) {
			backfillLaunchFromNow(t, threshold)
		})
	}
}

func backfillLaunchFromNow(t *testing.T, threshold int) {
	st := openEmbedded(t)
	now := utc("2026-06-10T12:00:00Z")
	s := sched("late", "0 * * * *", "UTC", 2, func(s *model.Schedule) {
		s.Window, s.Jitter, s.Overlap = 10*time.Minute, 5*time.Minute, model.OverlapCancel
		s.SkipUntil = ptrTime(now)
	})
	create(t, st, s)
	e := newEmitter(t, st, newClock(now), func(c *emitter.Config, _ *emitter.Deps) { c.BackgroundThreshold = threshold })
	times := []time.Time{utc("2026-06-09T10:00:00Z"), utc("2026-06-09T11:00:00Z")}
	got, err := e.Backfill(context.Background(), s, times, emitter.BackfillOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Fires != 2 || got.Events+got.EventsPending != 4 {
		t.Fatalf("backfill: %+v, want 2 fires with 2 events each", got)
	}
	for _, at := range times {
		f, err := st.FireGet(context.Background(), s.TenantID, model.FireID(s.ID, s.Version, at))
		if err != nil {
			t.Fatal(err)
		}
		if f.Decision != model.FireBackfill || f.Jitter != model.JitterOffset(s.ID, at, s.Jitter) {
			t.Fatalf("fire at %s: %s jitter %s, want backfill with the schedule's jitter", at, f.Decision, f.Jitter)
		}
		for i := range 2 {
			ev, err := st.EventGet(context.Background(), s.TenantID, model.EventID(f.ID, i))
			if err != nil {
				t.Fatal(err)
			}
			base := now.Add(f.Jitter)
			if ev.Status != model.EventPending || ev.LaunchAt.Before(base) || ev.Deadline == nil || !ev.Deadline.Equal(base.Add(s.Window)) {
				t.Fatalf("event %d of the fire at %s: %s launch %s deadline %v, want pending from %s", i, at, ev.Status, ev.LaunchAt, ev.Deadline, base)
			}
		}
	}
}

// TestBackfillKeepsTheTenantsPerMinuteQuota: the fires of a backfill whose
// events would take the tenant over maxEventsPerMinute are recorded at once
// with their events deferred to later minutes, as for any fire; the
// background writer writes them as the minutes pass, never more than the
// quota in a minute.
func TestBackfillKeepsTheTenantsPerMinuteQuota(t *testing.T) {
	st := openEmbedded(t)
	now := utc("2026-06-10T12:00:30Z")
	clk := newClock(now)
	s := sched("quota", "0 * * * *", "UTC", 2)
	create(t, st, s)
	e := newEmitter(t, st, clk, func(_ *emitter.Config, d *emitter.Deps) { d.Quotas = fixedQuotas(5) })
	stored := func() int {
		n := 0
		for _, v := range backfillState(t, st, s) {
			if strings.Contains(v, "pending:2") {
				n += 2
			}
		}
		return n
	}
	times := tenMinuteTimes(utc("2026-06-09T00:00:00Z"), 6) // 12 events
	got, err := e.Backfill(context.Background(), s, times, emitter.BackfillOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Fires != 6 || got.Events > 5 || got.Events+got.EventsPending != 12 {
		t.Fatalf("backfill: %+v, want 6 fires and at most 5 events written in this minute", got)
	}
	if n := stored(); n > 5 {
		t.Fatalf("%d events stored in the first minute, quota 5", n)
	}
	// Each minute the repeat (which the background writer would do on its
	// own) writes at most the quota more.
	for minute := 1; minute <= 3; minute++ {
		clk.Advance(time.Minute)
		before := stored()
		if _, err := e.Backfill(context.Background(), s, times, emitter.BackfillOptions{}); err != nil {
			t.Fatal(err)
		}
		if d := stored() - before; d > 5 {
			t.Fatalf("minute %d: %d events written, quota 5", minute, d)
		}
	}
	if n := stored(); n != 12 {
		t.Fatalf("after three more minutes %d events exist, want 12: %v", n, backfillState(t, st, s))
	}
}
