package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// fireDeadlineTests cover a fire's deadline: kept by every write that
// makes a fire, found by FireDeadlineDue until closed, a miss recorded
// once, and the waiting events of a fire expired.
var fireDeadlineTests = []namedTest{
	{"DueUntilDone", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		early := newFire("A", "s1", at(time.Hour))
		early.Deadline, early.OnDeadline = ptr(at(2*time.Hour)), model.DeadlineExpire
		_, err := d.FireInsert(ctx, early)
		requireNoError(t, err, "FireInsert")
		late := newFire("A", "s2", at(time.Hour))
		late.Deadline = ptr(at(3 * time.Hour))
		_, _, err = d.FireInsertMany(ctx, []store.FireNew{{Fire: late, Events: []*model.Event{newEvent("A", "s2", at(time.Hour), 0)}}})
		requireNoError(t, err, "FireInsertMany")
		s, f, ev := oneOff("A", "s3", at(time.Hour))
		f.Deadline = ptr(at(4 * time.Hour))
		ev.ExpireAt = f.Deadline
		requireNoError(t, CreateSchedule(ctx, d, s, nil, store.FireNew{Fire: f, Events: []*model.Event{ev}}), "ScheduleCreateMany")
		plain := newFire("A", "s4", at(time.Hour)) // no deadline
		_, err = d.FireInsert(ctx, plain)
		requireNoError(t, err, "FireInsert plain")

		got, err := d.FireGet(ctx, "A", early.ID)
		requireNoError(t, err, "FireGet")
		requireTimePtr(t, got.Deadline, early.Deadline, "Deadline")
		requireEqual(t, got.OnDeadline, model.DeadlineExpire, "OnDeadline")
		requireTimePtr(t, getEvent(t, d, ev.ID).ExpireAt, ev.ExpireAt, "ExpireAt of the one-off's event")

		due, err := d.FireDeadlineDue(ctx, at(3*time.Hour), 10)
		requireNoError(t, err, "FireDeadlineDue")
		requireEqual(t, strings.Join(fireIDs(due), " "), early.ID+" "+late.ID, "due at 3h, earliest first")

		miss := &model.DeadlineMiss{At: at(2*time.Hour + time.Second), Remaining: 2}
		rec, err := d.FireDeadlineDone(ctx, early.ID, miss)
		requireNoError(t, err, "FireDeadlineDone")
		requireEqual(t, rec, true, "first miss recorded")
		rec, err = d.FireDeadlineDone(ctx, early.ID, &model.DeadlineMiss{At: at(5 * time.Hour), Remaining: 1})
		requireNoError(t, err, "FireDeadlineDone again")
		requireEqual(t, rec, false, "second miss recorded")
		got, err = d.FireGet(ctx, "A", early.ID)
		requireNoError(t, err, "FireGet after miss")
		if got.DeadlineMissed == nil || !got.DeadlineMissed.At.Equal(miss.At) || got.DeadlineMissed.Remaining != 2 {
			t.Fatalf("DeadlineMissed = %+v, want %+v", got.DeadlineMissed, miss)
		}
		_, err = d.FireDeadlineDone(ctx, late.ID, nil)
		requireNoError(t, err, "FireDeadlineDone without miss")
		due, err = d.FireDeadlineDue(ctx, at(10*time.Hour), 10)
		requireNoError(t, err, "FireDeadlineDue after done")
		requireEqual(t, strings.Join(fireIDs(due), " "), f.ID, "due after two are done")
		_, err = d.FireDeadlineDone(ctx, "nope", nil)
		requireIs(t, err, model.ErrNotFound, "FireDeadlineDone unknown")
	}},
	{"ExpireWaiting", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		f := newFire("A", "s1", at(time.Hour))
		evs := []*model.Event{newEvent("A", "s1", at(time.Hour), 0), newEvent("A", "s1", at(time.Hour), 1), newEvent("A", "s1", at(time.Hour), 2)}
		evs[1].Status = model.EventDelivering
		evs[2].Status = model.EventRetrying
		for _, e := range evs {
			e.ExpireAt = ptr(at(2 * time.Hour))
		}
		_, _, err := d.FireInsertMany(ctx, []store.FireNew{{Fire: f, Events: evs}})
		requireNoError(t, err, "FireInsertMany")
		n, err := d.EventExpireWaiting(ctx, "s1", f.ID, at(2*time.Hour), "deadline passed")
		requireNoError(t, err, "EventExpireWaiting")
		requireEqual(t, n, 2, "expired")
		for i, want := range []model.EventStatus{model.EventExpired, model.EventDelivering, model.EventExpired} {
			e := getEvent(t, d, evs[i].ID)
			requireEqual(t, e.Status, want, "status of "+e.ID)
			if want == model.EventExpired {
				requireEqual(t, e.LastError, "deadline passed", "LastError of "+e.ID)
				requireTimePtr(t, e.FinishedAt, ptr(at(2*time.Hour)), "FinishedAt of "+e.ID)
			}
		}
		counts, err := d.EventCountByFire(ctx, f.ID)
		requireNoError(t, err, "EventCountByFire")
		requireEqual(t, counts[model.EventExpired], 2, "expired count")
		// Expired events can be redriven, without their expiry.
		requireNoError(t, transition(t, d, store.RedriveExpired(evs[0].ID, at(3*time.Hour))), "redrive expired")
		red := getEvent(t, d, evs[0].ID)
		requireEqual(t, red.Status, model.EventPending, "redriven status")
		requireTimePtr(t, red.ExpireAt, nil, "ExpireAt after the redrive")
	}},
}
