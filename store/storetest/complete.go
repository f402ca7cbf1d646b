package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// completeTests cover ScheduleComplete, ScheduleDeleteCompleted and how
// completed schedules count (ScheduleCountByTenant).
var completeTests = []namedTest{
	{"CompletesFinishedOneOffs", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		runAt := at(time.Hour)
		// o1: released; o2: dead; o3: still holds its token; o4: never
		// fired; o5: due later; c1: a cron schedule past its endAt;
		// c2: a cron schedule without one.
		evs := map[string]*model.Event{}
		for _, id := range []string{"o1", "o2", "o3"} {
			s, f, e := oneOff("A", id, runAt)
			evs[id] = e
			createSchedule(t, d, s, nil, store.FireNew{Fire: f, Events: []*model.Event{e}})
		}
		o4, _, _ := oneOff("A", "o4", runAt)
		createSchedule(t, d, o4, nil)
		o5, _, _ := oneOff("A", "o5", at(3*time.Hour))
		createSchedule(t, d, o5, nil)
		c1 := newSchedule("A", "c1")
		c1.EndAt = ptr(runAt)
		createSchedule(t, d, c1, nil)
		createSchedule(t, d, newSchedule("A", "c2"), nil)
		createSchedule(t, d, newSchedule("B", "b1"), nil)
		countIs(t, d, "A", 7)

		now := at(2 * time.Hour)
		p := &store.ScheduleCompleteParams{Now: now, MissedBefore: at(0), At: now, Limit: 100}
		res, err := d.ScheduleComplete(ctx, p)
		requireNoError(t, err, "ScheduleComplete with every event waiting")
		requireEqual(t, res.Completed, 0, "completed while events wait")
		requireEqual(t, res.Examined, 5, "examined (o1-o4, c1: ends not after now)")

		fin := now
		for id, to := range map[string]model.EventStatus{"o1": model.EventReleased, "o2": model.EventDead, "o3": model.EventDelivering} {
			tr := store.EventTransition{ID: evs[id].ID, From: model.EventPending, To: to, At: fin}
			if to.Finished() {
				tr.FinishedAt = &fin
			}
			requireNoError(t, transition(t, d, tr), "transition "+id)
		}
		res, err = d.ScheduleComplete(ctx, p)
		requireNoError(t, err, "ScheduleComplete")
		requireEqual(t, res.Completed, 2, "completed (o1 released, o2 dead)")
		for id, want := range map[string]model.ScheduleState{
			"o1": model.ScheduleCompleted, "o2": model.ScheduleCompleted, "o3": model.ScheduleActive,
			"o4": model.ScheduleActive, "o5": model.ScheduleActive, "c1": model.ScheduleActive,
		} {
			got, err := d.ScheduleGet(ctx, "A", id)
			requireNoError(t, err, "ScheduleGet "+id)
			requireEqual(t, got.State, want, "state of "+id)
			if want == model.ScheduleCompleted {
				requireEqual(t, got.Version, int64(2), "version of completed "+id)
				requireTime(t, got.UpdatedAt, now, "updatedAt of completed "+id)
			}
		}
		countIs(t, d, "A", 5)
		n, err := d.ScheduleCountByTenant(ctx, "A", 3)
		requireNoError(t, err, "ScheduleCountByTenant with max")
		requireEqual(t, n, 3, "ScheduleCountByTenant(A, 3)")
		countIs(t, d, "B", 1)

		// Past the catch-up limit: what never fired, and the cron
		// schedule past its endAt, fire no more.
		p.MissedBefore = runAt.Add(time.Minute)
		res, err = d.ScheduleComplete(ctx, p)
		requireNoError(t, err, "ScheduleComplete past the catch-up limit")
		requireEqual(t, res.Completed, 2, "completed (o4, c1)")
		countIs(t, d, "A", 3) // o3, o5, c2
	}},
	{"CompleteWalksFromAfter", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for i, id := range []string{"o1", "o2", "o3"} {
			s, _, _ := oneOff("A", id, at(time.Duration(i+1)*time.Minute))
			createSchedule(t, d, s, nil)
		}
		p := &store.ScheduleCompleteParams{Now: at(time.Hour), MissedBefore: at(time.Hour), At: at(time.Hour), Limit: 2}
		res, err := d.ScheduleComplete(ctx, p)
		requireNoError(t, err, "ScheduleComplete")
		requireEqual(t, res.Examined, 2, "examined with limit 2")
		requireEqual(t, res.Completed, 2, "completed with limit 2")
		requireEqual(t, res.Last.ID, "o2", "last looked at")
		requireTime(t, res.Last.End, at(2*time.Minute), "last end")
		p.After = res.Last
		res, err = d.ScheduleComplete(ctx, p)
		requireNoError(t, err, "ScheduleComplete after o2")
		requireEqual(t, res.Examined, 1, "examined after o2")
		requireEqual(t, res.Completed, 1, "completed after o2")
		requireEqual(t, res.Last.ID, "o3", "last looked at after o2")
		countIs(t, d, "A", 0)
	}},
	{"DeleteCompleted", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		runAt := at(time.Hour)
		s, f, e := oneOff("A", "o1", runAt)
		createSchedule(t, d, s, nil, store.FireNew{Fire: f, Events: []*model.Event{e}})
		fin := runAt
		requireNoError(t, transition(t, d, store.EventTransition{ID: e.ID, From: model.EventPending, To: model.EventReleased, FinishedAt: &fin, At: fin}), "release")
		keep, _, _ := oneOff("A", "o2", runAt)
		createSchedule(t, d, keep, nil)
		done := at(2 * time.Hour)
		res, err := d.ScheduleComplete(ctx, &store.ScheduleCompleteParams{Now: done, MissedBefore: runAt, At: done, Limit: 10})
		requireNoError(t, err, "ScheduleComplete")
		requireEqual(t, res.Completed, 1, "completed")

		n, err := d.ScheduleDeleteCompleted(ctx, &store.ScheduleDeleteCompletedParams{Before: done, Limit: 10})
		requireNoError(t, err, "ScheduleDeleteCompleted before the completion")
		requireEqual(t, n, 0, "deleted before the completion")
		n, err = d.ScheduleDeleteCompleted(ctx, &store.ScheduleDeleteCompletedParams{Before: done.Add(time.Second), Limit: 10})
		requireNoError(t, err, "ScheduleDeleteCompleted")
		requireEqual(t, n, 1, "deleted")
		_, err = d.ScheduleGet(ctx, "A", "o1")
		requireIs(t, err, model.ErrNotFound, "ScheduleGet of a deleted completed schedule")
		_, err = d.FireGet(ctx, "A", f.ID)
		requireIs(t, err, model.ErrNotFound, "FireGet of a deleted completed schedule's fire")
		fires, err := d.FireList(ctx, &store.FireListParams{TenantID: "A", ScheduleID: "o1", Limit: 10})
		requireNoError(t, err, "FireList")
		requireEqual(t, len(fires), 0, "fires left")
		_, err = d.ScheduleGet(ctx, "A", "o2")
		requireNoError(t, err, "ScheduleGet of the active one-off")
		n, err = d.ScheduleDeleteCompleted(ctx, &store.ScheduleDeleteCompletedParams{Before: done.Add(time.Hour), Limit: 10})
		requireNoError(t, err, "ScheduleDeleteCompleted again")
		requireEqual(t, n, 0, "deleted again")
	}},
	{"CompletedUpdatedCountsAgain", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		s, _, _ := oneOff("A", "o1", at(time.Hour))
		createSchedule(t, d, s, nil)
		done := at(2 * time.Hour)
		res, err := d.ScheduleComplete(ctx, &store.ScheduleCompleteParams{Now: done, MissedBefore: done, At: done, Limit: 10})
		requireNoError(t, err, "ScheduleComplete")
		requireEqual(t, res.Completed, 1, "completed")
		countIs(t, d, "A", 0)

		// A new runAt makes it active again: it counts, is not deleted,
		// and completes again only once its new end has come.
		got, err := d.ScheduleGet(ctx, "A", "o1")
		requireNoError(t, err, "ScheduleGet")
		upd := *got
		upd.State, upd.RunAt, upd.Version, upd.UpdatedAt = model.ScheduleActive, ptr(at(5*time.Hour)), got.Version+1, done
		requireNoError(t, d.ScheduleUpdate(ctx, &upd, got.Version, nil), "ScheduleUpdate")
		countIs(t, d, "A", 1)
		n, err := d.ScheduleDeleteCompleted(ctx, &store.ScheduleDeleteCompletedParams{Before: at(10 * time.Hour), Limit: 10})
		requireNoError(t, err, "ScheduleDeleteCompleted")
		requireEqual(t, n, 0, "deleted after the update")
		res, err = d.ScheduleComplete(ctx, &store.ScheduleCompleteParams{Now: at(4 * time.Hour), MissedBefore: at(4 * time.Hour), At: at(4 * time.Hour), Limit: 10})
		requireNoError(t, err, "ScheduleComplete before the new end")
		requireEqual(t, res.Examined, 0, "examined before the new end")
	}},
}

// oneOff returns one-off id of tenant running at runAt with one event, its
// fire and that event (pending).
func oneOff(tenantID, id string, runAt time.Time) (*model.Schedule, *model.Fire, *model.Event) {
	s := newSchedule(tenantID, id)
	s.Cron, s.RunAt, s.EventCount = "", ptr(runAt), 1
	f := newFire(tenantID, id, runAt)
	f.Count = 1
	return s, f, newEvent(tenantID, id, runAt, 0)
}

func countIs(t *testing.T, d store.Driver, tenantID string, want int) {
	t.Helper()
	n, err := d.ScheduleCountByTenant(t.Context(), tenantID, 0)
	requireNoError(t, err, "ScheduleCountByTenant")
	requireEqual(t, n, want, "ScheduleCountByTenant("+tenantID+")")
}
