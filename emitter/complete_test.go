package emitter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// TestCompleteOneOff: Complete completes a one-off once its event is
// released, only on the holder of partition 0, and deletes it
// CompletedRetention later.
func TestCompleteOneOff(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openEmbedded(t)
	t0 := utc("2030-03-04T10:00:00Z")
	clk := newClock(t0)
	runAt := t0.Add(time.Minute)
	s := sched("oneoff", "", "UTC", 1, func(s *model.Schedule) { s.Cron, s.RunAt = "", &runAt })
	create(t, st, s)
	cfg := func(c *emitter.Config, _ *emitter.Deps) { c.CompletedRetention = time.Hour }
	e := newEmitter(t, st, clk, cfg)
	if err := e.Saved(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	fires := firesOf(t, st, s.ID)
	if len(fires) != 1 {
		t.Fatalf("%d fires, want 1", len(fires))
	}
	ev := eventsOf(t, st, fires[0].ID)[0]
	setClock(clk, runAt.Add(time.Minute))

	complete := func(e *emitter.Emitter, wantCompleted, wantDeleted int) {
		t.Helper()
		c, d, err := e.Complete(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c != wantCompleted || d != wantDeleted {
			t.Fatalf("completed %d, deleted %d; want %d, %d", c, d, wantCompleted, wantDeleted)
		}
	}
	complete(e, 0, 0) // its event waits
	fin := clk.Now()
	errs, err := st.EventTransition(ctx, []store.EventTransition{{ID: ev.ID, From: model.EventPending, To: model.EventReleased, FinishedAt: &fin, At: fin}})
	if err != nil || errs[0] != nil {
		t.Fatalf("release: %v %v", err, errs)
	}
	other := newEmitter(t, st, clk, func(c *emitter.Config, d *emitter.Deps) {
		cfg(c, d)
		d.Partitions = staticPartitions{1: 1}
	})
	complete(other, 0, 0) // not the holder of partition 0
	complete(e, 1, 0)
	got, err := st.ScheduleGet(ctx, tenant, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != model.ScheduleCompleted {
		t.Fatalf("state %s, want completed", got.State)
	}
	setClock(clk, fin.Add(time.Hour-time.Second))
	complete(e, 0, 0)
	setClock(clk, fin.Add(time.Hour+time.Second))
	complete(e, 0, 1)
	if _, err := st.ScheduleGet(ctx, tenant, s.ID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("ScheduleGet after the retention: %v, want ErrNotFound", err)
	}
}
