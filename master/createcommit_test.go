package master_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// writeLog records the schedule, fire and event writes made through it.
type writeLog struct {
	*embedded.Store
	mu    sync.Mutex
	calls []string
}

func (w *writeLog) note(call string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, call)
}

func (w *writeLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.calls
	w.calls = nil
	return c
}

func (w *writeLog) ScheduleCreate(ctx context.Context, s *model.Schedule, cs []model.Child) error {
	w.note("ScheduleCreate")
	return w.Store.ScheduleCreate(ctx, s, cs)
}

func (w *writeLog) ScheduleCreateWithFires(ctx context.Context, s *model.Schedule, cs []model.Child, fs []store.FireNew) ([]bool, int, error) {
	w.note("ScheduleCreateWithFires")
	return w.Store.ScheduleCreateWithFires(ctx, s, cs, fs)
}

func (w *writeLog) FireInsert(ctx context.Context, f *model.Fire) (bool, error) {
	w.note("FireInsert")
	return w.Store.FireInsert(ctx, f)
}

func (w *writeLog) FireInsertMany(ctx context.Context, fs []store.FireNew) ([]bool, int, error) {
	w.note("FireInsertMany")
	return w.Store.FireInsertMany(ctx, fs)
}

func (w *writeLog) EventInsertMany(ctx context.Context, es []*model.Event) (int, error) {
	w.note("EventInsertMany")
	return w.Store.EventInsertMany(ctx, es)
}

// TestOneOffCreateIsOneCommit checks that a one-off create writes the
// schedule, its fire and its events in one store write, that they are
// the fire and events the emitter's Saved would write (a Saved afterwards
// adds nothing), and that a cron create still has its fires emitted by
// Saved after the write.
func TestOneOffCreateIsOneCommit(t *testing.T) {
	var (
		wl  *writeLog
		em  *emitter.Emitter
		out = make(chan *model.Fire, 16)
	)
	h := newHarness(t, func(_ *master.Config, d *master.Deps) {
		wl = &writeLog{Store: d.Store.(*embedded.Store)}
		var err error
		em, err = emitter.New(emitter.Config{Partitions: 4, Owner: "test"}, emitter.Deps{Store: wl, Emitted: out})
		if err != nil {
			t.Fatal(err)
		}
		d.Store, d.Emitter = wl, em
	})
	tenantID, c := h.tenant("acme")
	wl.take()

	runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	o := h.schedule(c, client.ScheduleCreate{Name: "once", RunAt: &runAt, EventCount: ptr(3), Target: httpTarget()})
	if got, want := wl.take(), []string{"ScheduleCreateWithFires"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("one-off create wrote %q, want %q", got, want)
	}
	f, err := wl.FireLatestBefore(h.ctx, o.Id, runAt.Add(time.Hour))
	if err != nil {
		t.Fatalf("the one-off's fire: %v", err)
	}
	if f.ID != model.FireID(o.Id, 1, runAt) || f.Decision != model.FireEmitted || f.Count != 3 {
		t.Fatalf("fire %+v, want %s emitted with 3 events", f, model.FireID(o.Id, 1, runAt))
	}
	select {
	case got := <-out:
		if got.ID != f.ID {
			t.Fatalf("Emitted got %s, want %s", got.ID, f.ID)
		}
	default:
		t.Fatal("the fire written with the create was not signalled")
	}
	counts, err := wl.EventCountByFire(h.ctx, f.ID)
	if err != nil || counts[model.EventPending] != 3 {
		t.Fatalf("events of the fire %v (%v), want 3 pending", counts, err)
	}

	// Saved on the stored schedule finds the same fire and events.
	s, err := wl.ScheduleGet(h.ctx, tenantID, o.Id)
	if err != nil {
		t.Fatal(err)
	}
	if err := em.Saved(h.ctx, s, nil); err != nil {
		t.Fatalf("Saved: %v", err)
	}
	fs, err := wl.FireList(h.ctx, &store.FireListParams{TenantID: tenantID, ScheduleID: o.Id, Limit: 10})
	if err != nil || len(fs) != 1 || fs[0].ID != f.ID {
		t.Fatalf("fires after Saved: %d (%v), want only %s", len(fs), err, f.ID)
	}
	if counts, err := wl.EventCountByFire(h.ctx, f.ID); err != nil || counts[model.EventPending] != 3 {
		t.Fatalf("events after Saved %v (%v), want still 3 pending", counts, err)
	}
	select {
	case got := <-out:
		t.Fatalf("Saved signalled %s again", got.ID)
	default:
	}

	wl.take()
	h.schedule(c, client.ScheduleCreate{Name: "cron", Cron: ptr("0 3 * * *"), Target: httpTarget()})
	if got := wl.take(); len(got) == 0 || got[0] != "ScheduleCreate" {
		t.Fatalf("cron create wrote %q, want ScheduleCreate first", got)
	}
}
