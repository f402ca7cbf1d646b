package emitter_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// fixedQuotas gives every tenant the same maxEventsPerMinute.
type fixedQuotas int

func (q fixedQuotas) TenantQuotas(context.Context, string) (model.TenantQuotas, error) {
	return model.TenantQuotas{MaxEventsPerMinute: int(q)}, nil
}

// switchDisk is a disk guard a test turns on and off.
type switchDisk struct{ full atomic.Bool }

func (d *switchDisk) DiskStatus() (bool, string) {
	if d.full.Load() {
		return false, "free space 1 B of 1 GiB is below the threshold of 50 MiB"
	}
	return true, "ok"
}

type quotaHarness struct {
	st       store.Driver
	clk      *clockwork.FakeClock
	e        *emitter.Emitter
	emitted  chan *model.Fire
	deferred chan *model.Fire
	metrics  *countingMetrics
}

// newQuotaHarness starts an emitter at 10:00:30 with a per-minute quota of
// perMinute events (0: none) and disk as its disk guard.
func newQuotaHarness(t *testing.T, perMinute int, disk emitter.DiskGuard) *quotaHarness {
	t.Helper()
	h := &quotaHarness{
		st: openEmbedded(t), clk: newClock(utc("2025-06-02T10:00:30Z")),
		emitted: make(chan *model.Fire, 64), deferred: make(chan *model.Fire, 64),
		metrics: newCountingMetrics(),
	}
	h.e = newEmitter(t, h.st, h.clk, func(c *emitter.Config, d *emitter.Deps) {
		if perMinute > 0 {
			d.Quotas = fixedQuotas(perMinute)
		}
		d.Disk = disk
		d.Emitted, d.Deferred, d.Metrics = h.emitted, h.deferred, h.metrics
	})
	startEmitter(t, h.e)
	return h
}

func (h *quotaHarness) trigger(t *testing.T, s *model.Schedule) *model.Fire {
	t.Helper()
	f, err := h.e.Trigger(context.Background(), s, h.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// waitDeferred waits for the Deferred hook to report the fire id and
// returns the events it has then.
func (h *quotaHarness) waitDeferred(t *testing.T, id string) int {
	t.Helper()
	for {
		select {
		case f := <-h.deferred:
			if f.ID == id {
				return len(eventsOf(t, h.st, id))
			}
		case <-t.Context().Done():
			t.Fatalf("fire %s was never reported deferred", id)
		}
	}
}

// createdIn checks that every event of fire id was written in the minute
// that starts at m.
func createdIn(t *testing.T, st store.Driver, id string, m time.Time) {
	t.Helper()
	for _, ev := range eventsOf(t, st, id) {
		if ev.CreatedAt.Before(m) || !ev.CreatedAt.Before(m.Add(time.Minute)) {
			t.Fatalf("event %s written at %s, want in the minute of %s", ev.ID, ev.CreatedAt, m)
		}
	}
}

func TestQuotaDefersFireToNextMinute(t *testing.T) {
	h := newQuotaHarness(t, 100, nil)
	a := sched("qa", "0 0 1 1 *", "UTC", 60)
	b := sched("qb", "0 0 1 1 *", "UTC", 60)
	create(t, h.st, a, b)

	fa := h.trigger(t, a)
	if fa.Remaining != 0 || strings.Contains(fa.Note, "deferred") {
		t.Fatalf("first fire %+v is deferred, want emitted at once", fa)
	}
	requireAllEvents(t, h.st, fa, 60)

	fb := h.trigger(t, b)
	const note = "deferred: tenant over maxEventsPerMinute (100)"
	if fb.Remaining != 60 || fb.Decision != model.FireTriggered || !strings.Contains(fb.Note, note) {
		t.Fatalf("second fire = %+v, want Remaining 60 and note %q", fb, note)
	}
	if n := h.waitDeferred(t, fb.ID); n != 0 {
		t.Fatalf("deferred fire has %d events in its first minute, want 0", n)
	}

	setClock(h.clk, utc("2025-06-02T10:01:00Z"))
	waitFire(t, h.emitted, fb.ID)
	requireAllEvents(t, h.st, fb, 60)
	createdIn(t, h.st, fa.ID, utc("2025-06-02T10:00:00Z"))
	createdIn(t, h.st, fb.ID, utc("2025-06-02T10:01:00Z"))
	got, err := h.st.FireGet(context.Background(), tenant, fb.ID)
	if err != nil || got.Remaining != 0 || !strings.Contains(got.Note, note) {
		t.Fatalf("stored fire = %+v, %v; want complete, still noting the deferral", got, err)
	}
	if n := h.metrics.deferred(emitter.DeferQuota); n != 1 {
		t.Fatalf("fires deferred for the quota counted %d times, want 1", n)
	}
}

func TestQuotaKeepsOrderOfDeferredFires(t *testing.T) {
	h := newQuotaHarness(t, 100, nil)
	a := sched("oa", "0 0 1 1 *", "UTC", 60)
	b := sched("ob", "0 0 1 1 *", "UTC", 60)
	c := sched("oc", "0 0 1 1 *", "UTC", 30)
	create(t, h.st, a, b, c)

	h.trigger(t, a)
	fb := h.trigger(t, b)
	// 30 more would fit this minute, but b waits before it.
	fc := h.trigger(t, c)
	if fb.Remaining != 60 || fc.Remaining != 30 || !strings.Contains(fc.Note, "deferred: ") {
		t.Fatalf("fires %+v and %+v, want both deferred", fb, fc)
	}
	h.waitDeferred(t, fb.ID)
	if n := len(eventsOf(t, h.st, fc.ID)); n != 0 {
		t.Fatalf("the later fire has %d events before the earlier deferred one", n)
	}

	setClock(h.clk, utc("2025-06-02T10:01:00Z"))
	var order []string
	for len(order) < 2 {
		select {
		case f := <-h.emitted:
			if f.ID == fb.ID || f.ID == fc.ID {
				order = append(order, f.ID)
			}
		case <-t.Context().Done():
			t.Fatalf("deferred fires completed: %v", order)
		}
	}
	if order[0] != fb.ID || order[1] != fc.ID {
		t.Fatalf("deferred fires completed in order %v, want %s then %s", order, fb.ID, fc.ID)
	}
	requireAllEvents(t, h.st, fb, 60)
	requireAllEvents(t, h.st, fc, 30)
}

func TestQuotaSpreadsFireLargerThanQuotaOverMinutes(t *testing.T) {
	h := newQuotaHarness(t, 100, nil)
	s := sched("big", "0 0 1 1 *", "UTC", 250)
	create(t, h.st, s)

	f := h.trigger(t, s)
	if f.Remaining != 250 {
		t.Fatalf("fire = %+v, want Remaining 250", f)
	}
	minute := utc("2025-06-02T10:00:00Z")
	for i, want := range []int{100, 200} {
		if n := h.waitDeferred(t, f.ID); n != want {
			t.Fatalf("minute %d: %d events written, want %d", i, n, want)
		}
		minute = minute.Add(time.Minute)
		setClock(h.clk, minute)
	}
	waitFire(t, h.emitted, f.ID)
	requireAllEvents(t, h.st, f, 250)
	perMinute := map[time.Time]int{}
	for _, ev := range eventsOf(t, h.st, f.ID) {
		perMinute[ev.CreatedAt.Truncate(time.Minute)]++
	}
	for _, m := range []struct {
		at string
		n  int
	}{{"2025-06-02T10:00:00Z", 100}, {"2025-06-02T10:01:00Z", 100}, {"2025-06-02T10:02:00Z", 50}} {
		if perMinute[utc(m.at)] != m.n {
			t.Fatalf("events written per minute %v, want %d at %s", perMinute, m.n, m.at)
		}
	}
}

func TestDiskGuardDefersAndResumes(t *testing.T) {
	disk := &switchDisk{}
	disk.full.Store(true)
	h := newQuotaHarness(t, 0, disk)
	s := sched("dg", "0 0 1 1 *", "UTC", 40)
	create(t, h.st, s)

	f := h.trigger(t, s)
	if f.Remaining != 40 || !strings.Contains(f.Note, "deferred: disk guard") {
		t.Fatalf("fire = %+v, want deferred by the disk guard", f)
	}
	if n := h.waitDeferred(t, f.ID); n != 0 {
		t.Fatalf("%d events written while the disk is full", n)
	}
	// Still full at the next minute: still waiting.
	setClock(h.clk, utc("2025-06-02T10:01:00Z"))
	if n := h.waitDeferred(t, f.ID); n != 0 {
		t.Fatalf("%d events written while the disk is full", n)
	}
	disk.full.Store(false)
	setClock(h.clk, utc("2025-06-02T10:02:00Z"))
	waitFire(t, h.emitted, f.ID)
	requireAllEvents(t, h.st, f, 40)
	if n := h.metrics.deferred(emitter.DeferDisk); n != 1 {
		t.Fatalf("fires deferred by the disk guard counted %d times, want 1", n)
	}
}

func TestPastOneOffIsLate(t *testing.T) {
	st := openEmbedded(t)
	now := utc("2025-06-02T10:00:30Z")
	clk := newClock(now)
	e := newEmitter(t, st, clk, nil)
	runAt := utc("2021-03-04T05:06:07Z")
	s := sched("past", "", "UTC", 3, func(s *model.Schedule) {
		s.Cron, s.RunAt, s.Misfire, s.Window = "", &runAt, model.MisfireFireAll, 10*time.Minute
	})
	create(t, st, s)
	if err := e.Saved(context.Background(), s, nil); err != nil {
		t.Fatal(err)
	}
	fs := firesOf(t, st, s.ID)
	if len(fs) != 1 || fs[0].Decision != model.FireLate || !fs[0].FireTime.Equal(runAt) || !strings.HasPrefix(fs[0].Note, "late by ") {
		t.Fatalf("fires = %+v, want one late fire at runAt", fs)
	}
	evs := eventsOf(t, st, fs[0].ID)
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
	for _, ev := range evs {
		if !ev.LaunchAt.Equal(now) || ev.Deadline == nil || !ev.Deadline.Equal(now.Add(10*time.Minute)) || !ev.FireTime.Equal(runAt) {
			t.Fatalf("event %+v: want launch at acceptance %s, deadline a window later, fire time runAt", ev, now)
		}
	}
}

func TestFutureOneOffIsNotLate(t *testing.T) {
	st := openEmbedded(t)
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, st, clk, nil)
	runAt := utc("2025-06-02T10:05:00Z")
	s := sched("future", "", "UTC", 2, func(s *model.Schedule) { s.Cron, s.RunAt = "", &runAt })
	create(t, st, s)
	if err := e.Saved(context.Background(), s, nil); err != nil {
		t.Fatal(err)
	}
	fs := firesOf(t, st, s.ID)
	if len(fs) != 1 || fs[0].Decision != model.FireEmitted {
		t.Fatalf("fires = %+v, want one emitted fire", fs)
	}
	for _, ev := range eventsOf(t, st, fs[0].ID) {
		if !ev.LaunchAt.Equal(runAt) {
			t.Fatalf("event launches at %s, want runAt %s", ev.LaunchAt, runAt)
		}
	}
}

// countingTenants counts TenantGet calls.
type countingTenants struct {
	store.Driver
	gets atomic.Int32
}

func (c *countingTenants) TenantGet(ctx context.Context, id string) (*model.Tenant, error) {
	c.gets.Add(1)
	return c.Driver.TenantGet(ctx, id)
}

func TestQuotaCache(t *testing.T) {
	ctx := context.Background()
	st := &countingTenants{Driver: openEmbedded(t)}
	clk := newClock(utc("2025-06-02T10:00:00Z"))
	own := &model.Tenant{ID: "own", Name: "own", Quotas: model.TenantQuotas{MaxEventsPerMinute: 7}, CreatedAt: clk.Now()}
	if err := st.TenantCreate(ctx, own); err != nil {
		t.Fatal(err)
	}
	def := model.TenantQuotas{MaxSchedules: 1, MaxEventsPerFire: 2, MaxEventsPerMinute: 3, MaxEventsStored: 4}
	c := emitter.NewQuotaCache(st, def, 10*time.Second, clk)

	t.Run("TenantValueOverDefault", func(t *testing.T) {
		q, err := c.TenantQuotas(ctx, "own")
		if err != nil || q != (model.TenantQuotas{MaxSchedules: 1, MaxEventsPerFire: 2, MaxEventsPerMinute: 7, MaxEventsStored: 4}) {
			t.Fatalf("quotas = %+v, %v", q, err)
		}
	})
	t.Run("UnknownTenantGetsDefaults", func(t *testing.T) {
		q, err := c.TenantQuotas(ctx, "nobody")
		if err != nil || q != def {
			t.Fatalf("quotas = %+v, %v; want the defaults", q, err)
		}
	})
	t.Run("CachedUntilTTL", func(t *testing.T) {
		before := st.gets.Load()
		if _, err := c.TenantQuotas(ctx, "own"); err != nil {
			t.Fatal(err)
		}
		if st.gets.Load() != before {
			t.Fatal("the store was read again within the TTL")
		}
		clk.Advance(10 * time.Second)
		if _, err := c.TenantQuotas(ctx, "own"); err != nil {
			t.Fatal(err)
		}
		if st.gets.Load() != before+1 {
			t.Fatal("the store was not read again after the TTL")
		}
	})
}

func TestDeferredFireResumesAfterRestart(t *testing.T) {
	h := newQuotaHarness(t, 100, nil)
	a := sched("ra", "0 0 1 1 *", "UTC", 60)
	b := sched("rb", "0 0 1 1 *", "UTC", 60)
	create(t, h.st, a, b)
	h.trigger(t, a)
	fb := h.trigger(t, b)
	h.waitDeferred(t, fb.ID)
	h.e.Stop()

	setClock(h.clk, utc("2025-06-02T10:01:00Z"))
	emitted := make(chan *model.Fire, 16)
	e2 := newEmitter(t, h.st, h.clk, func(_ *emitter.Config, d *emitter.Deps) {
		d.Quotas, d.Emitted = fixedQuotas(100), emitted
	})
	startEmitter(t, e2)
	waitFire(t, emitted, fb.ID)
	requireAllEvents(t, h.st, fb, 60)
	createdIn(t, h.st, fb.ID, utc("2025-06-02T10:01:00Z"))
}
