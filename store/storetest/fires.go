package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var fireTests = []namedTest{
	{"InsertGet", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		f := newFire("A", "s1", at(time.Hour))
		ok, err := d.FireInsert(ctx, f)
		requireNoError(t, err, "FireInsert")
		requireEqual(t, ok, true, "FireInsert inserted")

		again := newFire("A", "s1", at(time.Hour))
		again.Count = 99
		again.Decision = model.FireTriggered
		ok, err = d.FireInsert(ctx, again)
		requireNoError(t, err, "FireInsert again")
		requireEqual(t, ok, false, "FireInsert again inserted")

		got, err := d.FireGet(ctx, "A", f.ID)
		requireNoError(t, err, "FireGet")
		requireEqual(t, got.ScheduleID, "s1", "ScheduleID")
		requireEqual(t, got.Count, 2, "Count keeps the first version")
		requireEqual(t, got.Decision, model.FireEmitted, "Decision keeps the first version")
		requireTime(t, got.FireTime, at(time.Hour), "FireTime")
		requireEqual(t, got.LocalTime, f.LocalTime, "LocalTime")

		_, err = d.FireGet(ctx, "B", f.ID)
		requireIs(t, err, model.ErrNotFound, "FireGet of another tenant")
		_, err = d.FireGet(ctx, "A", "nope")
		requireIs(t, err, model.ErrNotFound, "FireGet unknown")
	}},
	{"List", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		var want []string
		for i := range 4 {
			f := newFire("A", "s1", at(time.Duration(i)*time.Hour))
			_, err := d.FireInsert(ctx, f)
			requireNoError(t, err, "FireInsert")
			want = append([]string{f.ID}, want...)
		}
		_, err := d.FireInsert(ctx, newFire("A", "s2", at(0)))
		requireNoError(t, err, "FireInsert s2")

		got, err := d.FireList(ctx, &store.FireListParams{TenantID: "A", ScheduleID: "s1", Limit: 100})
		requireNoError(t, err, "FireList")
		requireIDs(t, fireIDs(got), want, "FireList newest first")

		got, err = d.FireList(ctx, &store.FireListParams{TenantID: "A", ScheduleID: "s1", Limit: 2})
		requireNoError(t, err, "FireList page 1")
		requireIDs(t, fireIDs(got), want[:2], "FireList page 1")
		got, err = d.FireList(ctx, &store.FireListParams{TenantID: "A", ScheduleID: "s1", Limit: 2, Before: got[1].FireTime})
		requireNoError(t, err, "FireList page 2")
		requireIDs(t, fireIDs(got), want[2:], "FireList page 2")

		got, err = d.FireList(ctx, &store.FireListParams{TenantID: "B", ScheduleID: "s1", Limit: 100})
		requireNoError(t, err, "FireList other tenant")
		requireEqual(t, len(got), 0, "FireList of another tenant's schedule")
	}},
	{"LatestBefore", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, h := range []int{1, 2, 4} {
			_, err := d.FireInsert(ctx, newFire("A", "s1", at(time.Duration(h)*time.Hour)))
			requireNoError(t, err, "FireInsert")
		}
		_, err := d.FireInsert(ctx, newFire("A", "s2", at(3*time.Hour)))
		requireNoError(t, err, "FireInsert s2")

		got, err := d.FireLatestBefore(ctx, "s1", at(4*time.Hour))
		requireNoError(t, err, "FireLatestBefore")
		requireTime(t, got.FireTime, at(2*time.Hour), "FireLatestBefore is strictly before")
		requireEqual(t, got.ScheduleID, "s1", "ScheduleID")

		_, err = d.FireLatestBefore(ctx, "s1", at(time.Hour))
		requireIs(t, err, model.ErrNotFound, "FireLatestBefore none")
	}},
	{"SetDecision", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		f := newFire("A", "s1", at(time.Hour))
		_, err := d.FireInsert(ctx, f)
		requireNoError(t, err, "FireInsert")
		requireNoError(t, d.FireSetDecision(ctx, f.ID, model.FireSkippedOverlap, "previous fire still running"), "FireSetDecision")
		got, err := d.FireGet(ctx, "A", f.ID)
		requireNoError(t, err, "FireGet")
		requireEqual(t, got.Decision, model.FireSkippedOverlap, "Decision")
		requireEqual(t, got.Note, "previous fire still running", "Note")
		requireEqual(t, got.Count, f.Count, "Count kept")
		requireIs(t, d.FireSetDecision(ctx, "nope", model.FireLate, ""), model.ErrNotFound, "FireSetDecision unknown")
	}},
}
