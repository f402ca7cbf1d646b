package master_test

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// writeLog records the schedule, fire and event writes made through it.
type writeLog struct {
	*embedded.Store
	mu          sync.Mutex
	calls       []string
	latestReads atomic.Int64
	// WatermarkGet calls: Saved reads it for a cron schedule
	watermarkReads atomic.Int64
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

func (w *writeLog) ScheduleCreateMany(ctx context.Context, items []store.ScheduleNew) ([]error, error) {
	w.note("ScheduleCreateMany")
	return w.Store.ScheduleCreateMany(ctx, items)
}

// FireLatestBefore is counted, not logged: it is a read.
func (w *writeLog) FireLatestBefore(ctx context.Context, scheduleID string, t time.Time) (*model.Fire, error) {
	w.latestReads.Add(1)
	return w.Store.FireLatestBefore(ctx, scheduleID, t)
}

func (w *writeLog) WatermarkGet(ctx context.Context, partition int) (model.Watermark, error) {
	w.watermarkReads.Add(1)
	return w.Store.WatermarkGet(ctx, partition)
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
	if got, want := wl.take(), []string{"ScheduleCreateMany"}; !reflect.DeepEqual(got, want) {
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
	if got := wl.take(); len(got) == 0 || got[0] != "ScheduleCreateMany" {
		t.Fatalf("cron create wrote %q, want ScheduleCreate first", got)
	}
}

// TestBatchOneOffsAreOneCommit checks that the one-offs of a batch have
// their fires planned, without a read per schedule, and written with the
// schedules in their one ScheduleCreateMany; that they are the fires and
// events Saved would write (a Saved afterwards adds nothing); and
// that a cron item still goes through Saved.
func TestBatchOneOffsAreOneCommit(t *testing.T) {
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

	runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	item := func(name string, events int) string {
		return `{"name":"` + name + `","runAt":"` + runAt.Format(time.RFC3339) + `","eventCount":` + strconv.Itoa(events) +
			`,"target":{"type":"http","url":"https://consumer.example.com/hook"}}`
	}
	res := postBatch(t, h, c, `{"items":[`+strings.Join([]string{item("a", 1), item("b", 3), `{"name":"bad","cron":"61 * * * *","target":{"type":"http","url":"https://consumer.example.com/hook"}}`, item("c", 2)}, ",")+`]}`)
	if res.Created != 3 || res.Failed != 1 {
		t.Fatalf("created %d, failed %d; want 3 and 1", res.Created, res.Failed)
	}
	if got, want := wl.take(), []string{"ScheduleCreateMany"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("the batch wrote %q, want %q", got, want)
	}
	if n, w := wl.latestReads.Load(), wl.watermarkReads.Load(); n != 0 || w != 0 {
		t.Fatalf("the batch read the latest fire %d times and watermarks %d times, want none (planned)", n, w)
	}
	signalled := map[string]bool{}
	for range 3 {
		select {
		case f := <-out:
			signalled[f.ID] = true
		default:
			t.Fatalf("only %d fires signalled, want 3", len(signalled))
		}
	}
	var ss []*model.Schedule
	var keys [][]cron.Key
	for i, want := range map[int]int{0: 1, 1: 3, 3: 2} {
		sc := res.Items[i].Schedule
		id := model.FireID(sc.Id, 1, runAt)
		f, err := wl.FireLatestBefore(h.ctx, sc.Id, runAt.Add(time.Hour))
		if err != nil || f.ID != id || f.Decision != model.FireEmitted || f.Count != want {
			t.Fatalf("item %d: fire %+v (%v), want %s emitted with %d events", i, f, err, id, want)
		}
		if !signalled[id] {
			t.Fatalf("item %d: fire %s not signalled", i, id)
		}
		if counts, err := wl.EventCountByFire(h.ctx, id); err != nil || counts[model.EventPending] != want {
			t.Fatalf("item %d: events %v (%v), want %d pending", i, counts, err, want)
		}
		m, err := wl.ScheduleGet(h.ctx, tenantID, sc.Id)
		if err != nil {
			t.Fatal(err)
		}
		ss, keys = append(ss, m), append(keys, nil)
	}

	// Saved on the stored schedules finds the same fires and events.
	for i, m := range ss {
		if err := em.Saved(h.ctx, m, keys[i]); err != nil {
			t.Fatalf("Saved: %v", err)
		}
	}
	for _, m := range ss {
		fs, err := wl.FireList(h.ctx, &store.FireListParams{TenantID: tenantID, ScheduleID: m.ID, Limit: 10})
		if err != nil || len(fs) != 1 || fs[0].ID != model.FireID(m.ID, 1, runAt) {
			t.Fatalf("fires of %s after Saved: %d (%v), want only its first", m.Name, len(fs), err)
		}
		if counts, err := wl.EventCountByFire(h.ctx, fs[0].ID); err != nil || counts[model.EventPending] != m.EventCount {
			t.Fatalf("events of %s after Saved %v (%v), want still %d pending", m.Name, counts, err, m.EventCount)
		}
	}
	select {
	case f := <-out:
		t.Fatalf("Saved signalled %s again", f.ID)
	default:
	}

	wl.take()
	res = postBatch(t, h, c, `{"items":[{"name":"nightly","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"}}]}`)
	if res.Created != 1 {
		t.Fatalf("cron item: %+v", res.Items[0])
	}
	if got := wl.take(); len(got) == 0 || got[0] != "ScheduleCreateMany" || slices.Contains(got[1:], "ScheduleCreateMany") {
		t.Fatalf("cron batch wrote %q, want ScheduleCreateMany first", got)
	}
	if wl.watermarkReads.Load() == 0 {
		t.Fatal("the cron item was not handed to Saved (no watermark read)")
	}
}
