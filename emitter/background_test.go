package emitter_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Large fires in these tests: 500 events with a threshold of 100, written
// 50 per chunk.
const (
	largeN     = 500
	largeAbove = 100
	largeChunk = 50
)

func largeConfig(c *emitter.Config) {
	c.BackgroundThreshold, c.BackgroundChunk, c.BackgroundWorkers = largeAbove, largeChunk, 2
}

// gatedStore holds every EventInsertMany of the fires whose id contains
// gated until open is closed, and keeps the largest of those writes.
type gatedStore struct {
	emitter.Store
	gated   string
	open    chan struct{}
	entered chan struct{} // closed at the first held write
	once    sync.Once
	maxLen  atomic.Int32
}

func (g *gatedStore) EventInsertMany(ctx context.Context, evs []*model.Event) (int, error) {
	if len(evs) > 0 && strings.Contains(evs[0].FireID, g.gated) {
		g.once.Do(func() { close(g.entered) })
		select {
		case <-g.open:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		for {
			m := g.maxLen.Load()
			if int32(len(evs)) <= m || g.maxLen.CompareAndSwap(m, int32(len(evs))) {
				break
			}
		}
	}
	return g.Store.EventInsertMany(ctx, evs)
}

// requireAllEvents checks that fire f has exactly n events, indexes 0..n-1
// once each, with their deterministic ids.
func requireAllEvents(t *testing.T, st store.Driver, f *model.Fire, n int) {
	t.Helper()
	evs := eventsOf(t, st, f.ID)
	if len(evs) != n {
		t.Fatalf("fire %s has %d events, want %d", f.ID, len(evs), n)
	}
	seen := make([]bool, n)
	for _, ev := range evs {
		if ev.Index < 0 || ev.Index >= n || seen[ev.Index] || ev.ID != model.EventID(f.ID, ev.Index) || ev.Count != n {
			t.Fatalf("event %s: index %d of %d is out of place or twice", ev.ID, ev.Index, ev.Count)
		}
		seen[ev.Index] = true
	}
}

// waitFire waits for the Emitted hook to report the fire id.
func waitFire(t *testing.T, emitted <-chan *model.Fire, id string) *model.Fire {
	t.Helper()
	for {
		select {
		case f := <-emitted:
			if f.ID == id {
				return f
			}
		case <-t.Context().Done():
			t.Fatalf("fire %s was never reported complete", id)
		}
	}
}

func startEmitter(t *testing.T, e *emitter.Emitter) {
	t.Helper()
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	<-e.Ready()
}

func TestLargeTriggerAnswersAtOnce(t *testing.T) {
	raw := openEmbedded(t)
	ctx := context.Background()
	gs := &gatedStore{Store: raw, gated: "big.", open: make(chan struct{}), entered: make(chan struct{})}
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	emitted := make(chan *model.Fire, 16)
	e := newEmitter(t, gs, clk, func(c *emitter.Config, d *emitter.Deps) {
		largeConfig(c)
		d.Emitted = emitted
	})
	big := sched("big", "0 0 1 1 *", "UTC", largeN)
	small := sched("small", "0 0 1 1 *", "UTC", largeAbove)
	create(t, raw, big, small)
	startEmitter(t, e)

	// The emission's writes are held: a trigger that waited for them would
	// never return.
	type result struct {
		f   *model.Fire
		err error
	}
	got := make(chan result, 1)
	go func() {
		f, err := e.Trigger(ctx, big, clk.Now())
		got <- result{f, err}
	}()
	var f *model.Fire
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatal(r.err)
		}
		f = r.f
	case <-time.After(30 * time.Second): // failure detection only
		t.Fatal("Trigger of a large fire waits for its events")
	}
	if f.Remaining != largeN || f.Count != largeN || f.Decision != model.FireTriggered {
		t.Fatalf("triggered fire = %+v, want Remaining = Count = %d", f, largeN)
	}
	<-gs.entered // the background holds the first chunk now
	stored, err := raw.FireGet(ctx, tenant, f.ID)
	if err != nil || stored.Remaining != largeN {
		t.Fatalf("stored fire while emitting: %+v, %v", stored, err)
	}

	// Another schedule's small emission does not wait for the large one.
	sf, err := e.Trigger(ctx, small, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sf.Remaining != 0 {
		t.Fatalf("small fire Remaining = %d, want 0 (written in the call)", sf.Remaining)
	}
	requireAllEvents(t, raw, sf, largeAbove)

	close(gs.open)
	done := waitFire(t, emitted, f.ID)
	if done.Remaining != 0 {
		t.Fatalf("completed fire Remaining = %d", done.Remaining)
	}
	requireAllEvents(t, raw, f, largeN)
	if m := gs.maxLen.Load(); m > largeChunk {
		t.Fatalf("a store write held %d events, chunk is %d", m, largeChunk)
	}
	left, err := raw.FireListEmitting(ctx, 10)
	if err != nil || len(left) != 0 {
		t.Fatalf("fires still emitting after completion: %v, %v", left, err)
	}
}

// crashingStore fails the store calls of a background emission from a
// chosen one on, as a process that died there would stop making them.
type crashingStore struct {
	emitter.Store
	insertsOK   int32 // EventInsertMany calls that succeed (-1: all)
	progressOK  int32 // FireSetRemaining calls that succeed (-1: all)
	inserts     atomic.Int32
	progress    atomic.Int32
	written     atomic.Int64
	crashed     chan struct{}
	crashedOnce sync.Once
}

func (c *crashingStore) crash() error {
	c.crashedOnce.Do(func() { close(c.crashed) })
	return errInjected
}

func (c *crashingStore) EventInsertMany(ctx context.Context, evs []*model.Event) (int, error) {
	if n := c.inserts.Add(1); c.insertsOK >= 0 && n > c.insertsOK {
		return 0, c.crash()
	}
	c.written.Add(int64(len(evs)))
	return c.Store.EventInsertMany(ctx, evs)
}

func (c *crashingStore) FireSetRemaining(ctx context.Context, id string, remaining int) error {
	if n := c.progress.Add(1); c.progressOK >= 0 && n > c.progressOK {
		return c.crash()
	}
	return c.Store.FireSetRemaining(ctx, id, remaining)
}

func TestBackgroundEmissionResumesAfterCrash(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		insertsOK, progressOK int32
		// after the crash: the watermark and the events the restarted
		// emitter has to write
		wantRemaining, wantRewritten int
	}{
		{"AfterThreeChunks", 3, -1, largeN - 3*largeChunk, largeN - 3*largeChunk},
		// The fourth chunk is written but its progress is not: it is
		// written again, idempotently.
		{"BetweenChunkAndProgress", -1, 3, largeN - 3*largeChunk, largeN - 3*largeChunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := openEmbedded(t)
			ctx := context.Background()
			clk := newClock(utc("2025-06-02T10:00:30Z"))
			s := sched("big", "0 0 1 1 *", "UTC", largeN)
			create(t, raw, s)

			cs := &crashingStore{Store: raw, insertsOK: tc.insertsOK, progressOK: tc.progressOK, crashed: make(chan struct{})}
			first := newEmitter(t, cs, clk, func(c *emitter.Config, _ *emitter.Deps) { largeConfig(c) })
			if err := first.Start(ctx); err != nil {
				t.Fatal(err)
			}
			f, err := first.Trigger(ctx, s, clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			<-cs.crashed
			first.Stop()

			mid, err := raw.FireGet(ctx, tenant, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if mid.Remaining != tc.wantRemaining {
				t.Fatalf("Remaining after the crash = %d, want %d", mid.Remaining, tc.wantRemaining)
			}
			if n := len(eventsOf(t, raw, f.ID)); n < largeN-mid.Remaining || n == largeN {
				t.Fatalf("%d events after the crash, want at least %d and fewer than %d", n, largeN-mid.Remaining, largeN)
			}

			// A new emitter on the same store finishes the fire at Start.
			emitted := make(chan *model.Fire, 16)
			rest := &crashingStore{Store: raw, insertsOK: -1, progressOK: -1, crashed: make(chan struct{})}
			second := newEmitter(t, rest, clk, func(c *emitter.Config, d *emitter.Deps) {
				largeConfig(c)
				d.Emitted = emitted
			})
			startEmitter(t, second)
			waitFire(t, emitted, f.ID)
			requireAllEvents(t, raw, f, largeN)
			if got := rest.written.Load(); got != int64(tc.wantRewritten) {
				t.Fatalf("the restarted emitter wrote %d events, want %d (from the watermark on)", got, tc.wantRewritten)
			}
		})
	}
}

func TestBackgroundEmissionStopsForDeletedSchedule(t *testing.T) {
	raw := openEmbedded(t)
	ctx := context.Background()
	gs := &gatedStore{Store: raw, gated: "big.", open: make(chan struct{}), entered: make(chan struct{})}
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	emitted := make(chan *model.Fire, 16)
	e := newEmitter(t, gs, clk, func(c *emitter.Config, d *emitter.Deps) {
		largeConfig(c)
		d.Emitted = emitted
	})
	s := sched("big", "0 0 1 1 *", "UTC", largeN)
	create(t, raw, s)
	startEmitter(t, e)
	f, err := e.Trigger(ctx, s, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	<-gs.entered
	// The master deletes the schedule while the first chunk is in hand.
	if _, err := raw.EventCancelPending(ctx, s.ID, "", clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := raw.ScheduleDelete(ctx, tenant, s.ID); err != nil {
		t.Fatal(err)
	}
	close(gs.open)
	done := waitFire(t, emitted, f.ID)
	if done.Remaining != 0 || !strings.Contains(done.Note, "emission stopped after 50 of 500 events: the schedule was deleted") {
		t.Fatalf("fire after its schedule was deleted: %+v", done)
	}
	counts, err := raw.EventCountByFire(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	for status, n := range counts {
		if status != model.EventCancelled && n > 0 {
			t.Fatalf("%d events %s after the schedule was deleted, want none waiting: %v", n, status, counts)
		}
	}
	if counts[model.EventCancelled] != largeChunk {
		t.Fatalf("cancelled = %d, want the chunk in hand (%d): %v", counts[model.EventCancelled], largeChunk, counts)
	}
}

func TestFireStillEmittingIsNotDrained(t *testing.T) {
	raw := openEmbedded(t)
	ctx := context.Background()
	gs := &gatedStore{Store: raw, gated: "big.", open: make(chan struct{}), entered: make(chan struct{})}
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, gs, clk, func(c *emitter.Config, _ *emitter.Deps) { largeConfig(c) })
	s := sched("big", "0 0 1 1 *", "UTC", largeN, func(s *model.Schedule) { s.Overlap = model.OverlapSkip })
	create(t, raw, s)
	startEmitter(t, e)
	t.Cleanup(func() { close(gs.open) }) // before Stop
	first, err := e.Trigger(ctx, s, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	<-gs.entered // nothing of the first fire is written yet
	next, err := e.Trigger(ctx, s, clk.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if next.Decision != model.FireSkippedOverlap || next.Remaining != 0 || !strings.Contains(next.Note, first.ID) {
		t.Fatalf("fire after one still being emitted: %+v, want skipped_overlap naming %s", next, first.ID)
	}
}
