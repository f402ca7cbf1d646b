package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var watchTests = []namedTest{
	{"WatchedFireFinishesOnce", func(t *testing.T, d store.Driver) {
		// A watched fire is listed until FireSetFinished, which of
		// several callers only one wins; an unwatched fire is never
		// listed; FireWatch marks an existing fire, a one-off's
		// included (a driver may keep that fire in the schedule's row).
		ctx := t.Context()
		w := newFire("A", "s1", at(time.Hour))
		w.Watched = true
		plain := newFire("A", "s2", at(time.Hour))
		_, err := d.FireInsert(ctx, w)
		requireNoError(t, err, "FireInsert watched")
		_, err = d.FireInsert(ctx, plain)
		requireNoError(t, err, "FireInsert plain")
		many := newFire("A", "s3", at(time.Hour))
		many.Watched = true
		_, _, err = d.FireInsertMany(ctx, []store.FireNew{{Fire: many, Events: []*model.Event{newEvent("A", "s3", at(time.Hour), 0)}}})
		requireNoError(t, err, "FireInsertMany watched")
		s, f, ev := oneOff("A", "s4", at(2*time.Hour))
		requireNoError(t, CreateSchedule(ctx, d, s, nil, store.FireNew{Fire: f, Events: []*model.Event{ev}}), "ScheduleCreateMany")
		requireNoError(t, d.FireWatch(ctx, f.ID), "FireWatch one-off")
		requireNoError(t, d.FireWatch(ctx, f.ID), "FireWatch again")
		requireIs(t, d.FireWatch(ctx, "nope"), model.ErrNotFound, "FireWatch unknown")

		list := func(after string, limit int) []string {
			t.Helper()
			fs, err := d.FireListWatched(ctx, after, limit)
			requireNoError(t, err, "FireListWatched")
			ids := make([]string, len(fs))
			for i, f := range fs {
				ids[i] = f.ID
				requireEqual(t, f.Watched, true, "Watched of "+f.ID)
			}
			return ids
		}
		requireIDs(t, list("", 10), []string{w.ID, many.ID, f.ID}, "watched fires")
		requireIDs(t, list(w.ID, 1), []string{many.ID}, "watched fires after the first, one")

		fin := at(3 * time.Hour)
		ok, err := d.FireSetFinished(ctx, many.ID, fin)
		requireNoError(t, err, "FireSetFinished")
		requireEqual(t, ok, true, "first FireSetFinished sets")
		ok, err = d.FireSetFinished(ctx, many.ID, fin.Add(time.Hour))
		requireNoError(t, err, "FireSetFinished again")
		requireEqual(t, ok, false, "second FireSetFinished sets")
		ok, err = d.FireSetFinished(ctx, plain.ID, fin)
		requireNoError(t, err, "FireSetFinished unwatched")
		requireEqual(t, ok, false, "FireSetFinished of an unwatched fire sets")
		_, err = d.FireSetFinished(ctx, "nope", fin)
		requireIs(t, err, model.ErrNotFound, "FireSetFinished unknown")
		requireIDs(t, list("", 10), []string{w.ID, f.ID}, "watched fires after a finish")

		got, err := d.FireGet(ctx, "A", many.ID)
		requireNoError(t, err, "FireGet")
		requireEqual(t, got.Watched, true, "Watched")
		if got.FinishedAt == nil {
			t.Fatal("FinishedAt not kept")
		}
		requireTime(t, *got.FinishedAt, fin, "FinishedAt keeps the first")
		got, err = d.FireGet(ctx, "A", plain.ID)
		requireNoError(t, err, "FireGet plain")
		requireEqual(t, got.Watched, false, "Watched of a plain fire")
		got, err = d.FireGet(ctx, "A", f.ID)
		requireNoError(t, err, "FireGet one-off")
		requireEqual(t, got.Watched, true, "Watched of the one-off's fire")
	}},
	{"ListAfter", func(t *testing.T, d store.Driver) {
		// The index of dependent schedules follows creates, updates
		// and deletes.
		ctx := t.Context()
		up := newSchedule("A", "up")
		createSchedule(t, d, up, nil)
		for _, id := range []string{"d2", "d1", "d3"} {
			s := newSchedule("A", id)
			s.Cron = ""
			s.After = &model.After{ScheduleID: "up", When: model.AfterFinished}
			if id == "d3" {
				s.After.ScheduleID = "other"
			}
			createSchedule(t, d, s, nil)
		}
		ids := func(p store.ScheduleListAfterParams) []string {
			t.Helper()
			ss, err := d.ScheduleListAfter(ctx, &p)
			requireNoError(t, err, "ScheduleListAfter")
			out := make([]string, len(ss))
			for i, s := range ss {
				out[i] = s.ID
			}
			return out
		}
		requireIDs(t, ids(store.ScheduleListAfterParams{Upstream: "up", Limit: 10}), []string{"d1", "d2"}, "dependents of up")
		requireIDs(t, ids(store.ScheduleListAfterParams{Limit: 10}), []string{"d1", "d2", "d3"}, "every dependent")
		requireIDs(t, ids(store.ScheduleListAfterParams{After: "d1", Limit: 1}), []string{"d2"}, "a page after d1")

		upd := newSchedule("A", "d2")
		upd.Cron, upd.Version = "0 4 * * *", 2
		requireNoError(t, d.ScheduleUpdate(ctx, upd, 1, nil), "ScheduleUpdate")
		requireNoError(t, d.ScheduleDelete(ctx, "A", "d1"), "ScheduleDelete")
		requireIDs(t, ids(store.ScheduleListAfterParams{Upstream: "up", Limit: 10}), []string{}, "dependents of up after an edit and a delete")
		got, err := d.ScheduleGet(ctx, "A", "d3")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, *got.After, model.After{ScheduleID: "other", When: model.AfterFinished}, "After")
	}},
}
