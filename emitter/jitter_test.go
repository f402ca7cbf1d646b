package emitter_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
)

// TestJitterOffsetsTheLaunch: two schedules on one cron with a jitter get
// each fire's offset from model.JitterOffset (different for the two), and
// their events launch at fire time + offset, the window and the spread
// starting there. The fire keeps its time (and id). A second emitter
// scanning the same window, and Saved, find the fires recorded and add
// nothing; a triggered fire launches at once.
func TestJitterOffsetsTheLaunch(t *testing.T) {
	st := openEmbedded(t)
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, st, clk, nil)
	const jitter, window, n = 4 * time.Minute, 10 * time.Minute, 4
	opts := func(s *model.Schedule) { s.Jitter, s.Window, s.Spread = jitter, window, true }
	a, b := sched("jit-a", "*/5 * * * *", "UTC", n, opts), sched("jit-b", "*/5 * * * *", "UTC", n, opts)
	create(t, st, a, b)
	runPass(t, e)

	differ := 0
	for _, s := range []*model.Schedule{a, b} {
		fs := firesOf(t, st, s.ID)
		if len(fs) == 0 {
			t.Fatalf("%s: no fires", s.ID)
		}
		for _, f := range fs {
			off := model.JitterOffset(s.ID, f.FireTime, jitter)
			if f.Jitter != off || f.ID != model.FireID(s.ID, s.Version, f.FireTime) || f.FireTime.Second() != 0 {
				t.Fatalf("fire %s at %v: jitter %v, want %v", f.ID, f.FireTime, f.Jitter, off)
			}
			if s == a && off != model.JitterOffset(b.ID, f.FireTime, jitter) {
				differ++
			}
			base := f.FireTime.Add(off)
			evs := eventsOf(t, st, f.ID)
			if len(evs) != n {
				t.Fatalf("fire %s: %d events", f.ID, len(evs))
			}
			for _, ev := range evs {
				if want := base.Add(time.Duration(ev.Index) * window / n); !ev.LaunchAt.Equal(want) {
					t.Errorf("event %s launches at %v, want %v", ev.ID, ev.LaunchAt, want)
				}
				if ev.Deadline == nil || !ev.Deadline.Equal(base.Add(window)) {
					t.Errorf("event %s deadline %v, want %v", ev.ID, ev.Deadline, base.Add(window))
				}
			}
		}
	}
	if differ == 0 {
		t.Fatal("the two schedules got the same offsets")
	}

	// Another instance rescanning, and a save, agree: nothing new.
	before := len(firesOf(t, st, a.ID))
	other := newEmitter(t, st, clk, nil)
	if got := runPass(t, other); got.Fires != 0 || got.Events != 0 {
		t.Fatalf("rescan emitted %+v", got)
	}
	if err := other.Saved(context.Background(), a, keysOf(t, a)); err != nil {
		t.Fatal(err)
	}
	if got := len(firesOf(t, st, a.ID)); got != before {
		t.Fatalf("%d fires after the rescan and Saved, want %d", got, before)
	}

	f, err := e.Trigger(context.Background(), a, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if f.Jitter != 0 {
		t.Fatalf("triggered fire has jitter %v", f.Jitter)
	}
	if evs := eventsOf(t, st, f.ID); len(evs) != n || !evs[0].LaunchAt.Equal(f.FireTime) {
		t.Fatalf("triggered fire's first event launches at %v, want %v", evs[0].LaunchAt, f.FireTime)
	}
}

// TestTriggerWithOverrides: a trigger's count, payload and note replace
// the schedule's for that fire only, also for the events of a fire large
// enough to be written after the fire is recorded (which reads the
// schedule again).
func TestTriggerWithOverrides(t *testing.T) {
	st := openEmbedded(t)
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, st, clk, func(c *emitter.Config, _ *emitter.Deps) { c.BackgroundThreshold = 5 })
	s := sched("trig", "0 3 * * *", "UTC", 2)
	create(t, st, s)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		o     emitter.TriggerOptions
		count int
		note  string
		pay   string
	}{
		{"Defaults", emitter.TriggerOptions{}, 2, "triggered", string(s.Payload)},
		{"Small", emitter.TriggerOptions{EventCount: 3, Payload: json.RawMessage(`{"invoice":42}`), Note: "re-run invoice 42"}, 3, "re-run invoice 42", `{"invoice":42}`},
		{"Large", emitter.TriggerOptions{EventCount: 12, Payload: json.RawMessage(`[1,2]`)}, 12, "triggered", `[1,2]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk.Advance(time.Second) // one fire per second
			f, err := e.TriggerWith(ctx, s, clk.Now(), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.FireGet(ctx, tenant, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Count != tc.count || got.Note != tc.note || got.Decision != model.FireTriggered {
				t.Fatalf("fire %+v, want count %d note %q", got, tc.count, tc.note)
			}
			evs := eventsOf(t, st, f.ID)
			if len(evs) != tc.count {
				t.Fatalf("%d events, want %d", len(evs), tc.count)
			}
			for _, ev := range evs {
				if string(ev.Payload) != tc.pay || ev.Count != tc.count {
					t.Fatalf("event %s: payload %s count %d, want %s and %d", ev.ID, ev.Payload, ev.Count, tc.pay, tc.count)
				}
			}
		})
	}
	if got, err := st.ScheduleGet(ctx, tenant, s.ID); err != nil || got.EventCount != 2 || string(got.Payload) != string(s.Payload) {
		t.Fatalf("the schedule changed: %+v, %v", got, err)
	}
}

// TestTriggerNoteKeptWhenSkipped: under overlap skip a trigger that comes
// while the previous fire runs is skipped; its note follows the reason,
// which still names the running fire first.
func TestTriggerNoteKeptWhenSkipped(t *testing.T) {
	st := openEmbedded(t)
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, st, clk, nil)
	s := sched("skip", "0 3 * * *", "UTC", 2, func(s *model.Schedule) { s.Overlap = model.OverlapSkip })
	create(t, st, s)
	ctx := context.Background()
	first, err := e.Trigger(ctx, s, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	f, err := e.TriggerWith(ctx, s, clk.Now(), emitter.TriggerOptions{Note: "re-run invoice 42"})
	if err != nil {
		t.Fatal(err)
	}
	want := "overlap=skip: previous fire " + first.ID + " has 2 unfinished events; re-run invoice 42"
	if f.Decision != model.FireSkippedOverlap || f.Note != want {
		t.Fatalf("fire %s %q, want skipped_overlap %q", f.Decision, f.Note, want)
	}
	// The next fire still finds the running one through the skipped fire.
	clk.Advance(time.Second)
	next, err := e.Trigger(ctx, s, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if next.Decision != model.FireSkippedOverlap || !strings.Contains(next.Note, first.ID) {
		t.Fatalf("next fire %s %q, want skipped_overlap naming %s", next.Decision, next.Note, first.ID)
	}
}
