package emitter_test

import (
	"context"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
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
	if err := e.SavedMany(ctx, ss, keys); err != nil {
		t.Fatal(err)
	}
	checkFires(t, st, every.ID, "10:01 10:02 10:03 10:04")
	checkFires(t, st, once.ID, "12:00")
	checkFires(t, st, paused.ID, "")
	checkFires(t, st, ended.ID, "")
	if fs := firesOf(t, st, once.ID); len(eventsOf(t, st, fs[0].ID)) != 2 {
		t.Fatalf("one-off fire has %d events, want 2", len(eventsOf(t, st, fs[0].ID)))
	}

	if err := e.SavedMany(ctx, ss, keys[:1]); err == nil {
		t.Fatal("SavedMany with fewer key lists than schedules: no error")
	}
}

func ptrTime(t time.Time) *time.Time { return &t }
