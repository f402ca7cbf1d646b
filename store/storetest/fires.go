package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var fireTests = []namedTest{
	{"KeepsJitterAndPayload", func(t *testing.T, d store.Driver) {
		// A fire's jitter offset and own payload come back from every
		// write that makes a fire: FireInsert, FireInsertMany and a one-off
		// created with its fire (which a driver may keep in the schedule's
		// row).
		ctx := t.Context()
		one := newFire("A", "s1", at(time.Hour))
		one.Jitter = 7*time.Minute + 123*time.Millisecond
		one.Payload = json.RawMessage(`{"override":1}`)
		_, err := d.FireInsert(ctx, one)
		requireNoError(t, err, "FireInsert")
		many := newFire("A", "s2", at(time.Hour))
		many.Jitter = 42 * time.Second
		_, _, err = d.FireInsertMany(ctx, []store.FireNew{{Fire: many, Events: []*model.Event{newEvent("A", "s2", at(time.Hour), 0)}}})
		requireNoError(t, err, "FireInsertMany")
		s, f, ev := oneOff("A", "s3", at(2*time.Hour))
		s.Jitter, f.Jitter, f.Payload = time.Hour, 59*time.Minute, json.RawMessage(`[3]`)
		requireNoError(t, CreateSchedule(ctx, d, s, nil, store.FireNew{Fire: f, Events: []*model.Event{ev}}), "ScheduleCreateMany")
		for _, want := range []*model.Fire{one, many, f} {
			got, err := d.FireGet(ctx, "A", want.ID)
			requireNoError(t, err, "FireGet "+want.ID)
			requireEqual(t, got.Jitter, want.Jitter, "Jitter of FireGet "+want.ID)
			requireEqual(t, string(got.Payload), string(want.Payload), "Payload of FireGet "+want.ID)
			list, err := d.FireList(ctx, &store.FireListParams{TenantID: "A", ScheduleID: want.ScheduleID, Limit: 10})
			requireNoError(t, err, "FireList "+want.ScheduleID)
			requireEqual(t, len(list), 1, "fires of "+want.ScheduleID)
			requireEqual(t, list[0].Jitter, want.Jitter, "Jitter of FireList "+want.ScheduleID)
			requireEqual(t, string(list[0].Payload), string(want.Payload), "Payload of FireList "+want.ScheduleID)
			latest, err := d.FireLatestBefore(ctx, want.ScheduleID, want.FireTime.Add(time.Millisecond))
			requireNoError(t, err, "FireLatestBefore "+want.ScheduleID)
			requireEqual(t, latest.Jitter, want.Jitter, "Jitter of FireLatestBefore "+want.ScheduleID)
		}
		got, err := d.ScheduleGet(ctx, "A", "s3")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, got.Jitter, time.Hour, "schedule Jitter")
	}},
	{"KeepsTraceParent", func(t *testing.T, d store.Driver) {
		// A fire's trace context comes back from every write that makes a
		// fire, and stays through the writes of its background emission.
		ctx := t.Context()
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		one := newFire("A", "s1", at(time.Hour))
		one.Count, one.Remaining, one.TraceParent = 5, 5, tp
		_, err := d.FireInsert(ctx, one)
		requireNoError(t, err, "FireInsert")
		many := newFire("A", "s2", at(time.Hour))
		many.TraceParent = tp
		_, _, err = d.FireInsertMany(ctx, []store.FireNew{{Fire: many, Events: []*model.Event{newEvent("A", "s2", at(time.Hour), 0)}}})
		requireNoError(t, err, "FireInsertMany")
		s, f, ev := oneOff("A", "s3", at(2*time.Hour))
		f.TraceParent = tp
		requireNoError(t, CreateSchedule(ctx, d, s, nil, store.FireNew{Fire: f, Events: []*model.Event{ev}}), "ScheduleCreateMany")
		plain := newFire("A", "s4", at(time.Hour))
		_, err = d.FireInsert(ctx, plain)
		requireNoError(t, err, "FireInsert without trace context")
		for _, want := range []*model.Fire{one, many, f, plain} {
			got, err := d.FireGet(ctx, "A", want.ID)
			requireNoError(t, err, "FireGet "+want.ID)
			requireEqual(t, got.TraceParent, want.TraceParent, "TraceParent of FireGet "+want.ID)
			list, err := d.FireList(ctx, &store.FireListParams{TenantID: "A", ScheduleID: want.ScheduleID, Limit: 10})
			requireNoError(t, err, "FireList "+want.ScheduleID)
			requireEqual(t, len(list), 1, "fires of "+want.ScheduleID)
			requireEqual(t, list[0].TraceParent, want.TraceParent, "TraceParent of FireList "+want.ScheduleID)
		}
		emitting, err := d.FireListEmitting(ctx, 10)
		requireNoError(t, err, "FireListEmitting")
		requireEqual(t, len(emitting), 1, "fires being emitted")
		requireEqual(t, emitting[0].TraceParent, tp, "TraceParent of FireListEmitting")
		requireNoError(t, d.FireSetRemaining(ctx, one.ID, 2), "FireSetRemaining")
		requireNoError(t, d.FireSetDecision(ctx, one.ID, model.FireEmitted, "noted"), "FireSetDecision")
		got, err := d.FireGet(ctx, "A", one.ID)
		requireNoError(t, err, "FireGet after progress")
		requireEqual(t, got.Remaining, 2, "Remaining after progress")
		requireEqual(t, got.TraceParent, tp, "TraceParent after progress")
	}},
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
	{"InsertMany", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		old := newFire("A", "s1", at(time.Hour))
		ok, err := d.FireInsert(ctx, old)
		requireNoError(t, err, "FireInsert")
		requireEqual(t, ok, true, "FireInsert inserted")

		again := newFire("A", "s1", at(time.Hour))
		again.Count = 99
		fresh := newFire("B", "s2", at(2*time.Hour))
		lone := newFire("A", "s3", at(3*time.Hour))
		lone.Decision = model.FireSkippedOverlap
		inserted, n, err := d.FireInsertMany(ctx, []store.FireNew{
			{Fire: again, Events: []*model.Event{newEvent("A", "s1", at(time.Hour), 0)}},
			{Fire: fresh, Events: []*model.Event{newEvent("B", "s2", at(2*time.Hour), 0), newEvent("B", "s2", at(2*time.Hour), 1)}},
			{Fire: lone},
		})
		requireNoError(t, err, "FireInsertMany")
		requireEqual(t, len(inserted), 3, "FireInsertMany results")
		requireEqual(t, inserted[0], false, "existing fire inserted")
		requireEqual(t, inserted[1], true, "new fire inserted")
		requireEqual(t, inserted[2], true, "fire without events inserted")
		requireEqual(t, n, 2, "events stored")

		got, err := d.FireGet(ctx, "A", old.ID)
		requireNoError(t, err, "FireGet existing")
		requireEqual(t, got.Count, 2, "Count keeps the first version")
		counts, err := d.EventCountByFire(ctx, old.ID)
		requireNoError(t, err, "EventCountByFire existing")
		requireEqual(t, counts[model.EventPending], 0, "events of an existing fire are not written")

		got, err = d.FireGet(ctx, "B", fresh.ID)
		requireNoError(t, err, "FireGet new")
		requireEqual(t, got.ScheduleID, "s2", "ScheduleID")
		counts, err = d.EventCountByFire(ctx, fresh.ID)
		requireNoError(t, err, "EventCountByFire new")
		requireEqual(t, counts[model.EventPending], 2, "events of the new fire")
		e, err := d.EventGet(ctx, "B", model.EventID(fresh.ID, 1))
		requireNoError(t, err, "EventGet")
		requireEqual(t, e.Index, 1, "event Index")

		latest, err := d.FireLatestBefore(ctx, "s3", at(4*time.Hour))
		requireNoError(t, err, "FireLatestBefore")
		requireEqual(t, latest.ID, lone.ID, "FireLatestBefore finds the new fire")
		requireEqual(t, latest.Decision, model.FireSkippedOverlap, "Decision")

		inserted, n, err = d.FireInsertMany(ctx, []store.FireNew{{Fire: fresh, Events: []*model.Event{newEvent("B", "s2", at(2*time.Hour), 0)}}})
		requireNoError(t, err, "FireInsertMany again")
		requireEqual(t, inserted[0], false, "FireInsertMany again inserted")
		requireEqual(t, n, 0, "FireInsertMany again events")

		inserted, n, err = d.FireInsertMany(ctx, nil)
		requireNoError(t, err, "FireInsertMany of nothing")
		requireEqual(t, len(inserted)+n, 0, "FireInsertMany of nothing")
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
	{"Emitting", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		big := newFire("A", "s1", at(time.Hour))
		big.Count, big.Remaining = 100, 100
		other := newFire("B", "s2", at(time.Hour))
		other.Count, other.Remaining = 50, 20
		done := newFire("A", "s1", at(2*time.Hour))
		for _, f := range []*model.Fire{big, other, done} {
			_, err := d.FireInsert(ctx, f)
			requireNoError(t, err, "FireInsert")
		}
		got, err := d.FireListEmitting(ctx, 100)
		requireNoError(t, err, "FireListEmitting")
		requireIDs(t, fireIDs(got), []string{big.ID, other.ID}, "FireListEmitting: fires with Remaining, by id, across tenants")
		requireEqual(t, got[1].Remaining, 20, "Remaining read back")

		requireNoError(t, d.FireSetRemaining(ctx, big.ID, 40), "FireSetRemaining 40")
		requireNoError(t, d.FireSetRemaining(ctx, big.ID, 70), "FireSetRemaining 70 (higher)")
		f, err := d.FireGet(ctx, "A", big.ID)
		requireNoError(t, err, "FireGet")
		requireEqual(t, f.Remaining, 40, "Remaining never moves back up")
		requireEqual(t, f.Count, 100, "Count kept")

		requireNoError(t, d.FireSetRemaining(ctx, big.ID, 0), "FireSetRemaining 0")
		got, err = d.FireListEmitting(ctx, 100)
		requireNoError(t, err, "FireListEmitting after done")
		requireIDs(t, fireIDs(got), []string{other.ID}, "FireListEmitting leaves out a finished fire")
		got, err = d.FireListEmitting(ctx, 1)
		requireNoError(t, err, "FireListEmitting limit")
		requireEqual(t, len(got), 1, "FireListEmitting limit")

		requireIs(t, d.FireSetRemaining(ctx, "nope", 0), model.ErrNotFound, "FireSetRemaining unknown")
	}},
}
