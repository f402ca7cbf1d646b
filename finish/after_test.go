package finish_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/finish"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// failFinish is a store whose FireSetFinished fails while fail is set: an
// instance that crashed after writing what a finished fire brings and
// before marking it.
type failFinish struct {
	finish.Store
	fail bool
}

func (f *failFinish) FireSetFinished(ctx context.Context, id string, at time.Time) (bool, error) {
	if f.fail {
		return false, errors.New("crashed before the mark")
	}
	return f.Store.FireSetFinished(ctx, id, at)
}

// TestAfterFiresOncePerUpstreamFire: a finished upstream fire gives each
// dependent one fire, id derived from the upstream fire's, whose events
// inherit the upstream's deadline (its window end); an instance that
// crashed before the mark, a second instance and later sweeps write no
// second fire. A dependent on "succeeded" does not fire after an upstream
// fire with a dead event.
func TestAfterFiresOncePerUpstreamFire(t *testing.T) {
	r := newRig(t)
	r.deliver(t)
	ctx := context.Background()
	up := newSchedule("up", target(t, map[int]bool{1: true}), 2)
	up.Window = time.Hour
	create(t, r.st, up)
	sinks := target(t, nil)
	onFinish := newSchedule("down", sinks, 3)
	onFinish.Cron, onFinish.After = "", &model.After{ScheduleID: "up", When: model.AfterFinished}
	create(t, r.st, onFinish)
	onSuccess := newSchedule("strict", sinks, 1)
	onSuccess.Cron, onSuccess.After = "", &model.After{ScheduleID: "up", When: model.AfterSucceeded}
	create(t, r.st, onSuccess)
	// A dependent has no clock: a save emits nothing.
	if err := r.em.Saved(ctx, onFinish, nil); err != nil {
		t.Fatalf("save of a dependent: %v", err)
	}

	// The first sweep learns the dependents; fires from then on are
	// watched when recorded.
	sweep(t, r.fin)
	if !r.fin.Watched(up) {
		t.Fatal("the upstream's fires are not watched")
	}
	f, err := r.em.Trigger(ctx, up, time.Now().UTC().Truncate(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "upstream events finished", func() bool { return finished(t, r.st, f.ID, 2) })

	crashed := &failFinish{Store: r.st, fail: true}
	broken, err := finish.New(finish.Config{Shards: shards}, finish.Deps{Store: crashed, Emitter: r.em})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broken.Sweep(ctx); err == nil {
		t.Fatal("the sweep that could not mark the fire reported no error")
	}
	other := newRigOn(t, r.st) // a second instance
	for _, fin := range []*finish.Finisher{other.fin, r.fin, r.fin} {
		if st := sweep(t, fin); st.AfterFires != 0 {
			t.Fatalf("sweep after the first: %+v, want no new fire", st)
		}
	}

	id := model.AfterFireID("down", f.ID)
	df, err := r.st.FireGet(ctx, "t1", id)
	if err != nil {
		t.Fatalf("dependent fire %s: %v", id, err)
	}
	if df.Decision != model.FireAfter || df.Count != 3 || df.ScheduleID != "down" {
		t.Fatalf("dependent fire %+v", df)
	}
	evs, err := r.st.EventList(ctx, &store.EventListParams{TenantID: "t1", FireID: id, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantDeadline := f.FireTime.Add(f.Jitter).Add(time.Hour)
	if len(evs) != 3 {
		t.Fatalf("%d events of the dependent fire, want 3", len(evs))
	}
	for _, e := range evs {
		if e.Deadline == nil || !e.Deadline.Equal(wantDeadline) {
			t.Errorf("event %s deadline %v, want the upstream's %v", e.ID, e.Deadline, wantDeadline)
		}
	}
	fs, err := r.st.FireList(ctx, &store.FireListParams{TenantID: "t1", ScheduleID: "down", Limit: 10})
	if err != nil || len(fs) != 1 {
		t.Fatalf("fires of the dependent: %v (%v), want one", fs, err)
	}
	if _, err := r.st.FireGet(ctx, "t1", model.AfterFireID("strict", f.ID)); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the dependent on success fired after a fire with a dead event: %v", err)
	}
}

// TestAfterSucceeded: a dependent on "succeeded" fires after an upstream
// fire whose every event was released, and a chain fires link by link.
func TestAfterSucceeded(t *testing.T) {
	r := newRig(t)
	r.deliver(t)
	ctx := context.Background()
	ok := target(t, nil)
	up := newSchedule("a", ok, 1)
	create(t, r.st, up)
	b := newSchedule("b", ok, 1)
	b.Cron, b.After = "", &model.After{ScheduleID: "a", When: model.AfterSucceeded}
	create(t, r.st, b)
	c := newSchedule("c", ok, 1)
	c.Cron, c.After = "", &model.After{ScheduleID: "b", When: model.AfterFinished}
	create(t, r.st, c)
	sweep(t, r.fin)
	f, err := r.em.Trigger(ctx, up, time.Now().UTC().Truncate(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a finished", func() bool { return finished(t, r.st, f.ID, 1) })
	sweep(t, r.fin)
	bf := model.AfterFireID("b", f.ID)
	got, err := r.st.FireGet(ctx, "t1", bf)
	if err != nil {
		t.Fatalf("b's fire: %v", err)
	}
	if !got.Watched {
		t.Fatal("b's fire is not watched, though c fires after b")
	}
	waitFor(t, "b finished", func() bool { return finished(t, r.st, bf, 1) })
	sweep(t, r.fin)
	if _, err := r.st.FireGet(ctx, "t1", model.AfterFireID("c", bf)); err != nil {
		t.Fatalf("c's fire after b's: %v", err)
	}
}
