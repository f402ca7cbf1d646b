package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var scheduleTests = []namedTest{
	{"CreateGet", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		s := newSchedule("A", "s1")
		s.PolicyID = "p1"
		s.StartAt = ptr(at(time.Hour))
		s.Spread = true
		s.Priority = 7
		createSchedule(t, d, s, childrenOf(s, model.ChildKey{LaunchExpression: "H:3", Minute: 0}))

		got, err := d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, got.ID, s.ID, "ID")
		requireEqual(t, got.TenantID, s.TenantID, "TenantID")
		requireEqual(t, got.Name, s.Name, "Name")
		requireEqual(t, got.Cron, s.Cron, "Cron")
		requireEqual(t, got.Timezone, s.Timezone, "Timezone")
		requireEqual(t, got.EventCount, s.EventCount, "EventCount")
		requireEqual(t, got.PolicyID, s.PolicyID, "PolicyID")
		requireEqual(t, got.Window, s.Window, "Window")
		requireEqual(t, got.Spread, s.Spread, "Spread")
		requireEqual(t, got.Priority, s.Priority, "Priority")
		requireEqual(t, got.Target, s.Target, "Target")
		requireJSON(t, got.Payload, s.Payload, "Payload")
		requireEqual(t, got.MaxAttempts, s.MaxAttempts, "MaxAttempts")
		requireTimePtr(t, got.StartAt, s.StartAt, "StartAt")
		requireTimePtr(t, got.EndAt, nil, "EndAt")
		requireTimePtr(t, got.RunAt, nil, "RunAt")
		requireEqual(t, got.State, s.State, "State")
		requireEqual(t, got.Version, s.Version, "Version")
		requireTime(t, got.CreatedAt, s.CreatedAt, "CreatedAt")

		dup := newSchedule("A", "s1")
		dup.Name = "dup"
		requireIs(t, CreateSchedule(ctx, d, dup, nil), model.ErrConflict, "duplicate create")
		got, err = d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet after duplicate")
		requireEqual(t, got.Name, s.Name, "Name after duplicate")

		_, err = d.ScheduleGet(ctx, "B", "s1")
		requireIs(t, err, model.ErrNotFound, "ScheduleGet of another tenant")
		_, err = d.ScheduleGet(ctx, "A", "nope")
		requireIs(t, err, model.ErrNotFound, "ScheduleGet unknown")
	}},
	{"HTTPBatchTargetRoundTrips", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		target := model.Target{Type: model.TargetHTTPBatch, URL: "http://127.0.0.1:9/batch"}
		s := newSchedule("A", "s1")
		s.Target = target
		f := newFire("A", "s1", at(time.Hour))
		evs := []*model.Event{newEvent("A", "s1", at(time.Hour), 0), newEvent("A", "s1", at(time.Hour), 1)}
		for _, e := range evs {
			e.Target = target
		}
		createSchedule(t, d, s, nil, store.FireNew{Fire: f, Events: evs})
		// A later fire's events, written as the emitter writes them.
		f2 := newFire("A", "s1", at(2*time.Hour))
		later := newEvent("A", "s1", at(2*time.Hour), 0)
		later.Target = target
		_, _, err := d.FireInsertMany(ctx, []store.FireNew{{Fire: f2, Events: []*model.Event{later}}})
		requireNoError(t, err, "FireInsertMany")

		got, err := d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, got.Target, target, "schedule target")
		many, err := d.ScheduleGetMany(ctx, []string{"s1"})
		requireNoError(t, err, "ScheduleGetMany")
		requireEqual(t, len(many), 1, "ScheduleGetMany found")
		requireEqual(t, many[0].Target, target, "ScheduleGetMany target")
		for _, e := range append(evs, later) {
			requireEqual(t, getEvent(t, d, e.ID).Target, target, "event target of "+e.ID)
		}
		listed, err := d.EventList(ctx, &store.EventListParams{TenantID: "A", FireID: f.ID, Limit: 10})
		requireNoError(t, err, "EventList")
		requireEqual(t, len(listed), 2, "events listed")
		for _, e := range listed {
			requireEqual(t, e.Target, target, "listed target of "+e.ID)
		}
		claimed, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 3, DueBefore: at(3 * time.Hour), Limit: 10})
		requireNoError(t, err, "EventClaimDue")
		requireEqual(t, len(claimed), 3, "events claimed")
		for _, e := range claimed {
			requireEqual(t, e.Target, target, "claimed target of "+e.ID)
		}
		// A delivered outcome is written over the claimed record.
		requireNoError(t, transition(t, d, store.DeliveredReleased(evs[0].ID, model.EventScheduled, 3, 1, false, at(time.Hour))), "DeliveredReleased")
		requireEqual(t, getEvent(t, d, evs[0].ID).Target, target, "target after the outcome")
	}},
	{"CreateWithFires", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		s := newSchedule("A", "s1")
		h3 := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		f := newFire("A", "s1", at(time.Hour))
		evs := []*model.Event{newEvent("A", "s1", at(time.Hour), 0), newEvent("A", "s1", at(time.Hour), 1)}
		createSchedule(t, d, s, childrenOf(s, h3), store.FireNew{Fire: f, Events: evs})

		got, err := d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, got.Name, s.Name, "Name")
		cs, err := d.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: s.Partition, Timezone: s.Timezone, Keys: []model.ChildKey{h3}})
		requireNoError(t, err, "ChildrenFind")
		requireEqual(t, len(cs), 1, "children stored")
		gf, err := d.FireGet(ctx, "A", f.ID)
		requireNoError(t, err, "FireGet")
		requireEqual(t, gf.ScheduleID, "s1", "fire ScheduleID")
		latest, err := d.FireLatestBefore(ctx, "s1", at(2*time.Hour))
		requireNoError(t, err, "FireLatestBefore")
		requireEqual(t, latest.ID, f.ID, "FireLatestBefore finds the fire")
		counts, err := d.EventCountByFire(ctx, f.ID)
		requireNoError(t, err, "EventCountByFire")
		requireEqual(t, counts[model.EventPending], 2, "events of the fire")

		// The id exists: ErrConflict, and the other fire is not written.
		other := newFire("A", "s1", at(2*time.Hour))
		err = CreateSchedule(ctx, d, newSchedule("A", "s1"), nil, store.FireNew{Fire: other})
		requireIs(t, err, model.ErrConflict, "create of an existing id")
		_, err = d.FireGet(ctx, "A", other.ID)
		requireIs(t, err, model.ErrNotFound, "fire of a conflicting create")

		// No fires: a plain create.
		createSchedule(t, d, newSchedule("A", "s2"), nil)
		_, err = d.ScheduleGet(ctx, "A", "s2")
		requireNoError(t, err, "ScheduleGet s2")
	}},
	{"CreateWithFiresExisting", func(t *testing.T, d store.Driver) {
		// Fire and event ids left by an earlier schedule of the same id:
		// the existing fire and event stay as they are, the rest is stored.
		ctx := t.Context()
		f, g := newFire("A", "s1", at(time.Hour)), newFire("A", "s1", at(2*time.Hour))
		f.Count = 7
		_, err := d.FireInsert(ctx, f)
		requireNoError(t, err, "FireInsert of the earlier fire")
		g0 := newEvent("A", "s1", at(2*time.Hour), 0)
		g0.Attempts = 2
		_, err = d.EventInsertMany(ctx, []*model.Event{g0})
		requireNoError(t, err, "EventInsertMany of the earlier event")

		createSchedule(t, d, newSchedule("A", "s1"), nil,
			store.FireNew{Fire: newFire("A", "s1", at(time.Hour)), Events: []*model.Event{newEvent("A", "s1", at(time.Hour), 0)}},
			store.FireNew{Fire: g, Events: []*model.Event{newEvent("A", "s1", at(2*time.Hour), 0), newEvent("A", "s1", at(2*time.Hour), 1)}},
		)
		_, err = d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet")
		gf, err := d.FireGet(ctx, "A", f.ID)
		requireNoError(t, err, "FireGet of the existing fire")
		requireEqual(t, gf.Count, 7, "the existing fire's Count")
		counts, err := d.EventCountByFire(ctx, f.ID)
		requireNoError(t, err, "EventCountByFire of the existing fire")
		requireEqual(t, counts[model.EventPending], 0, "events written for the existing fire")
		ge, err := d.EventGet(ctx, "A", g0.ID)
		requireNoError(t, err, "EventGet of the existing event")
		requireEqual(t, ge.Attempts, 2, "the existing event's Attempts")
		counts, err = d.EventCountByFire(ctx, g.ID)
		requireNoError(t, err, "EventCountByFire of the new fire")
		requireEqual(t, counts[model.EventPending], 2, "events of the new fire")
		gg, err := d.FireGet(ctx, "A", g.ID)
		requireNoError(t, err, "FireGet of the new fire")
		requireEqual(t, gg.ScheduleID, "s1", "the new fire's ScheduleID")
	}},
	{"CreateMany", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		h3 := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		w1 := model.ChildKey{LaunchExpression: "W:1:3", Minute: 0}
		old := newSchedule("A", "old")
		old.Name = "kept"
		createSchedule(t, d, old, childrenOf(old, h3))

		s1, s2 := newSchedule("A", "m1"), newSchedule("A", "m2")
		s2.Cron, s2.RunAt = "", ptr(at(time.Minute))
		taken := newSchedule("A", "old") // exists: writes nothing
		taken.Timezone = "UTC"
		again := newSchedule("A", "m1") // repeated within the call: the first wins
		again.Name = "second"
		res, err := d.ScheduleCreateMany(ctx, []store.ScheduleNew{
			{Schedule: s1, Children: childrenOf(s1, h3, w1)},
			{Schedule: taken, Children: childrenOf(taken, w1)},
			{Schedule: s2},
			{Schedule: again, Children: childrenOf(again, h3)},
		})
		requireNoError(t, err, "ScheduleCreateMany")
		requireEqual(t, len(res), 4, "results")
		requireNoError(t, res[0], "result m1")
		requireIs(t, res[1], model.ErrConflict, "result of an existing id")
		requireNoError(t, res[2], "result m2")
		requireIs(t, res[3], model.ErrConflict, "result of a repeated id")

		got, err := d.ScheduleGet(ctx, "A", "m1")
		requireNoError(t, err, "ScheduleGet m1")
		requireEqual(t, got.Name, s1.Name, "m1 Name")
		got, err = d.ScheduleGet(ctx, "A", "m2")
		requireNoError(t, err, "ScheduleGet m2")
		requireTimePtr(t, got.RunAt, s2.RunAt, "m2 RunAt")
		got, err = d.ScheduleGet(ctx, "A", "old")
		requireNoError(t, err, "ScheduleGet old")
		requireEqual(t, got.Name, "kept", "Name of the existing schedule")
		requireEqual(t, got.Timezone, old.Timezone, "Timezone of the existing schedule")

		tzs, err := d.ChildTimezones(ctx)
		requireNoError(t, err, "ChildTimezones")
		requireIDs(t, tzs, []string{old.Timezone}, "timezones (none from the conflicting item)")
		ch, err := d.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: 0, Timezone: old.Timezone, Keys: []model.ChildKey{h3, w1}})
		requireNoError(t, err, "ChildrenFind")
		requireIDs(t, childStrings(ch), []string{
			"m1/v1/p0/Europe/Berlin/H:3/0", "m1/v1/p0/Europe/Berlin/W:1:3/0", "old/v1/p0/Europe/Berlin/H:3/0",
		}, "children")

		res, err = d.ScheduleCreateMany(ctx, nil)
		requireNoError(t, err, "ScheduleCreateMany of nothing")
		requireEqual(t, len(res), 0, "results of nothing")
	}},
	{"CreateManyWithFires", func(t *testing.T, d store.Driver) {
		// Fires go with their schedule; an item that conflicts (an id that
		// exists, or repeated within the call) writes none of its fires.
		ctx := t.Context()
		createSchedule(t, d, newSchedule("A", "old"), nil)
		fireOf := func(sched string, h time.Duration, events int) store.FireNew {
			fn := store.FireNew{Fire: newFire("A", sched, at(h))}
			for i := range events {
				fn.Events = append(fn.Events, newEvent("A", sched, at(h), i))
			}
			return fn
		}
		m1, m2 := fireOf("m1", time.Hour, 2), fireOf("m2", time.Hour, 1)
		m2b := fireOf("m2", 2*time.Hour, 3)
		taken, again := fireOf("old", time.Hour, 2), fireOf("m1", 3*time.Hour, 1)
		res, err := d.ScheduleCreateMany(ctx, []store.ScheduleNew{
			{Schedule: newSchedule("A", "m1"), Fires: []store.FireNew{m1}},
			{Schedule: newSchedule("A", "old"), Fires: []store.FireNew{taken}},
			{Schedule: newSchedule("A", "m2"), Fires: []store.FireNew{m2, m2b}},
			{Schedule: newSchedule("A", "m1"), Fires: []store.FireNew{again}},
			{Schedule: newSchedule("A", "m3")},
		})
		requireNoError(t, err, "ScheduleCreateMany")
		requireEqual(t, len(res), 5, "results")
		requireNoError(t, res[0], "result m1")
		requireIs(t, res[1], model.ErrConflict, "result of an existing id")
		requireNoError(t, res[2], "result m2")
		requireIs(t, res[3], model.ErrConflict, "result of a repeated id")
		requireNoError(t, res[4], "result m3 (no fires)")

		for _, c := range []struct {
			fn     store.FireNew
			events int
		}{{m1, 2}, {m2, 1}, {m2b, 3}} {
			gf, err := d.FireGet(ctx, "A", c.fn.Fire.ID)
			requireNoError(t, err, "FireGet "+c.fn.Fire.ID)
			requireEqual(t, gf.ScheduleID, c.fn.Fire.ScheduleID, "ScheduleID of "+c.fn.Fire.ID)
			counts, err := d.EventCountByFire(ctx, c.fn.Fire.ID)
			requireNoError(t, err, "EventCountByFire "+c.fn.Fire.ID)
			requireEqual(t, counts[model.EventPending], c.events, "events of "+c.fn.Fire.ID)
		}
		for _, fn := range []store.FireNew{taken, again} {
			_, err := d.FireGet(ctx, "A", fn.Fire.ID)
			requireIs(t, err, model.ErrNotFound, "fire of a conflicting item "+fn.Fire.ID)
			counts, err := d.EventCountByFire(ctx, fn.Fire.ID)
			requireNoError(t, err, "EventCountByFire "+fn.Fire.ID)
			requireEqual(t, len(counts), 0, "events of a conflicting item's fire "+fn.Fire.ID)
		}
		n, err := d.EventCountByTenant(ctx, "A", 0)
		requireNoError(t, err, "EventCountByTenant")
		requireEqual(t, n, 6, "events of the tenant")
		latest, err := d.FireLatestBefore(ctx, "m2", at(3*time.Hour))
		requireNoError(t, err, "FireLatestBefore m2")
		requireEqual(t, latest.ID, m2b.Fire.ID, "latest fire of m2")
	}},
	{"CreateManyWithFiresExisting", func(t *testing.T, d store.Driver) {
		// A fire id left by an earlier schedule of the same id: the
		// existing fire and its events stay as they are, the rest is stored.
		ctx := t.Context()
		f := newFire("A", "s1", at(time.Hour))
		f.Count = 7
		_, err := d.FireInsert(ctx, f)
		requireNoError(t, err, "FireInsert of the earlier fire")
		g := newFire("A", "s1", at(2*time.Hour))
		res, err := d.ScheduleCreateMany(ctx, []store.ScheduleNew{{Schedule: newSchedule("A", "s1"), Fires: []store.FireNew{
			{Fire: newFire("A", "s1", at(time.Hour)), Events: []*model.Event{newEvent("A", "s1", at(time.Hour), 0)}},
			{Fire: g, Events: []*model.Event{newEvent("A", "s1", at(2*time.Hour), 0), newEvent("A", "s1", at(2*time.Hour), 1)}},
		}}})
		requireNoError(t, err, "ScheduleCreateMany over an existing fire")
		requireNoError(t, res[0], "result s1")
		gf, err := d.FireGet(ctx, "A", f.ID)
		requireNoError(t, err, "FireGet of the existing fire")
		requireEqual(t, gf.Count, 7, "the existing fire's Count")
		counts, err := d.EventCountByFire(ctx, f.ID)
		requireNoError(t, err, "EventCountByFire of the existing fire")
		requireEqual(t, counts[model.EventPending], 0, "events written for the existing fire")
		counts, err = d.EventCountByFire(ctx, g.ID)
		requireNoError(t, err, "EventCountByFire of the new fire")
		requireEqual(t, counts[model.EventPending], 2, "events of the new fire")
	}},
	{"CreateOneOff", func(t *testing.T, d store.Driver) {
		s := newSchedule("A", "once")
		s.Cron = ""
		s.RunAt = ptr(at(90 * time.Second))
		createSchedule(t, d, s, nil)
		got, err := d.ScheduleGet(t.Context(), "A", "once")
		requireNoError(t, err, "ScheduleGet")
		if !got.IsOneOff() {
			t.Fatalf("one-off schedule lost RunAt")
		}
		requireTimePtr(t, got.RunAt, s.RunAt, "RunAt")
		requireEqual(t, got.Cron, "", "Cron")
	}},
	{"GetMany", func(t *testing.T, d store.Driver) {
		createSchedule(t, d, newSchedule("A", "s1"), nil)
		createSchedule(t, d, newSchedule("B", "s2"), nil)
		createSchedule(t, d, newSchedule("A", "s3"), nil)
		got, err := d.ScheduleGetMany(t.Context(), []string{"s1", "s2", "missing"})
		requireNoError(t, err, "ScheduleGetMany")
		requireSameIDs(t, scheduleIDs(got), []string{"s1", "s2"}, "ScheduleGetMany")

		got, err = d.ScheduleGetMany(t.Context(), nil)
		requireNoError(t, err, "ScheduleGetMany empty")
		requireEqual(t, len(got), 0, "ScheduleGetMany empty")
	}},
	{"List", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, id := range []string{"s4", "s2", "s1", "s3", "s5"} {
			s := newSchedule("A", id)
			switch id {
			case "s2":
				s.State = model.SchedulePaused
			case "s3", "s4":
				s.PolicyID = "p1"
			}
			if id == "s5" {
				s.Name = "report-daily"
			}
			createSchedule(t, d, s, nil)
		}
		createSchedule(t, d, newSchedule("B", "s0"), nil)
		createSchedule(t, d, newSchedule("B", "s9"), nil)

		for _, tc := range []struct {
			name string
			p    store.ScheduleListParams
			want []string
		}{
			{"All", store.ScheduleListParams{TenantID: "A", Limit: 100}, []string{"s1", "s2", "s3", "s4", "s5"}},
			{"FirstPage", store.ScheduleListParams{TenantID: "A", Limit: 2}, []string{"s1", "s2"}},
			{"NextPage", store.ScheduleListParams{TenantID: "A", Limit: 2, After: "s2"}, []string{"s3", "s4"}},
			{"LastPage", store.ScheduleListParams{TenantID: "A", Limit: 2, After: "s4"}, []string{"s5"}},
			{"State", store.ScheduleListParams{TenantID: "A", Limit: 100, State: model.SchedulePaused}, []string{"s2"}},
			{"Policy", store.ScheduleListParams{TenantID: "A", Limit: 100, PolicyID: "p1"}, []string{"s3", "s4"}},
			{"NamePrefix", store.ScheduleListParams{TenantID: "A", Limit: 100, NamePrefix: "report-"}, []string{"s5"}},
			{"OtherTenant", store.ScheduleListParams{TenantID: "B", Limit: 100}, []string{"s0", "s9"}},
			{"NoLabel", store.ScheduleListParams{TenantID: "A", Limit: 100, Labels: []model.LabelRequirement{{Key: "team", Any: true}}}, []string{}},
			{"UnknownTenant", store.ScheduleListParams{TenantID: "C", Limit: 100}, []string{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := d.ScheduleList(ctx, &tc.p)
				requireNoError(t, err, "ScheduleList")
				requireIDs(t, scheduleIDs(got), tc.want, "ScheduleList")
			})
		}
	}},
	{"ListByLabels", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		// Labels drawn from a small alphabet, so that selectors match some;
		// the oracle is model.LabelsMatch over every schedule in id order.
		rng := rand.New(rand.NewPCG(testseed.Get(t, "STORETEST_LABELS_SEED", 37), 0))
		keys := []string{"team", "app.example.com/tier", "a.b"}
		values := []string{"billing", "ops", ""}
		var all []*model.Schedule
		for i := range 40 {
			tenant := "A"
			if i%5 == 0 {
				tenant = "B"
			}
			s := newSchedule(tenant, fmt.Sprintf("s%02d", i))
			for _, k := range keys {
				if rng.IntN(3) > 0 {
					if s.Labels == nil {
						s.Labels = map[string]string{}
					}
					s.Labels[k] = values[rng.IntN(len(values))]
				}
			}
			createSchedule(t, d, s, nil)
			all = append(all, s)
		}
		sels := [][]model.LabelRequirement{
			{{Key: "team", Value: "billing"}},
			{{Key: "team", Any: true}},
			{{Key: "app.example.com/tier", Value: ""}},
			{{Key: "team", Value: "ops"}, {Key: "a.b", Any: true}},
			{{Key: "team", Value: "billing"}, {Key: "app.example.com/tier", Value: "ops"}, {Key: "a.b", Value: ""}},
			{{Key: "region", Any: true}},
			{{Key: "te", Any: true}},
		}
		for _, sel := range sels {
			for _, tenant := range []string{"A", "B"} {
				want := []string{}
				for _, s := range all {
					if s.TenantID == tenant && model.LabelsMatch(s.Labels, sel) {
						want = append(want, s.ID)
					}
				}
				// Pages of 3 over the filtered list, as the API pages.
				got := []string{}
				p := store.ScheduleListParams{TenantID: tenant, Limit: 3, Labels: sel}
				for {
					page, err := d.ScheduleList(ctx, &p)
					requireNoError(t, err, "ScheduleList")
					got = append(got, scheduleIDs(page)...)
					if len(page) < p.Limit {
						break
					}
					p.After = page[len(page)-1].ID
				}
				requireIDs(t, got, want, fmt.Sprintf("ScheduleList tenant %s labels %v", tenant, sel))
			}
		}
		// Labels come back as stored, and an update replaces them whole.
		got, err := d.ScheduleGet(ctx, all[1].TenantID, all[1].ID)
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, fmt.Sprint(got.Labels), fmt.Sprint(all[1].Labels), "Labels")
		upd := *got
		upd.Labels = map[string]string{"team": "new"}
		upd.Version = got.Version + 1
		requireNoError(t, d.ScheduleUpdate(ctx, &upd, got.Version, nil), "ScheduleUpdate")
		page, err := d.ScheduleList(ctx, &store.ScheduleListParams{TenantID: got.TenantID, Limit: 100, Labels: []model.LabelRequirement{{Key: "team", Value: "new"}}})
		requireNoError(t, err, "ScheduleList new label")
		requireIDs(t, scheduleIDs(page), []string{got.ID}, "ScheduleList new label")
		got, err = d.ScheduleGet(ctx, got.TenantID, got.ID)
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, fmt.Sprint(got.Labels), "map[team:new]", "Labels after update")
	}},
	{"Update", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		s := newSchedule("A", "s1")
		createSchedule(t, d, s, childrenOf(s, model.ChildKey{LaunchExpression: "H:3", Minute: 0}))

		upd := newSchedule("A", "s1")
		upd.Name = "renamed"
		upd.Version = 2
		upd.UpdatedAt = at(time.Minute)
		requireNoError(t, d.ScheduleUpdate(ctx, upd, 1, nil), "ScheduleUpdate")
		got, err := d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, got.Name, "renamed", "Name")
		requireEqual(t, got.Version, int64(2), "Version")
		requireTime(t, got.UpdatedAt, at(time.Minute), "UpdatedAt")

		stale := newSchedule("A", "s1")
		stale.Name = "stale"
		stale.Version = 2
		requireIs(t, d.ScheduleUpdate(ctx, stale, 1, nil), model.ErrConflict, "ScheduleUpdate with a stale version")

		other := newSchedule("B", "s1")
		other.Name = "hijack"
		other.Version = 3
		requireIs(t, d.ScheduleUpdate(ctx, other, 2, nil), model.ErrNotFound, "ScheduleUpdate by another tenant")

		missing := newSchedule("A", "nope")
		missing.Version = 2
		requireIs(t, d.ScheduleUpdate(ctx, missing, 1, nil), model.ErrNotFound, "ScheduleUpdate unknown")

		got, err = d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, got.Name, "renamed", "Name after rejected updates")
	}},
	{"UpdateReplacesChildren", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		oldKey := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		newKey := model.ChildKey{LaunchExpression: "H:4", Minute: 30}
		s := newSchedule("A", "s1")
		createSchedule(t, d, s, childrenOf(s, oldKey))

		upd := newSchedule("A", "s1")
		upd.Cron = "30 4 * * *"
		upd.Version = 2
		requireNoError(t, d.ScheduleUpdate(ctx, upd, 1, childrenOf(upd, newKey)), "ScheduleUpdate")

		got, err := d.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin", Keys: []model.ChildKey{oldKey, newKey}})
		requireNoError(t, err, "ChildrenFind")
		requireIDs(t, childStrings(got), []string{"s1/v2/p0/Europe/Berlin/H:4/30"}, "children after update")
	}},
	{"UpdateOfManyChildrenReturns", func(t *testing.T, d store.Driver) {
		// An every-minute schedule has 60 children, more than one page of
		// an embedded store's bucket: pausing it (no children) or changing it
		// (new children) rewrites every one in one write.
		ctx := t.Context()
		keys := make([]model.ChildKey, 60)
		for m := range keys {
			keys[m] = model.ChildKey{LaunchExpression: "H:*", Minute: m}
		}
		every := func(s *model.Schedule) []model.Child { return childrenOf(s, keys...) }
		// An id as long as a real one's, so that the children span pages.
		s := newSchedule("A", "sch_0123456789abcdefghijklmnopqrstuvwxyz")
		s.Cron = "* * * * *"
		createSchedule(t, d, s, every(s))

		paused := *s
		paused.State, paused.Version = model.SchedulePaused, 2
		Within(t, 0, "ScheduleUpdate pausing the only schedule, of 60 children", func() {
			requireNoError(t, d.ScheduleUpdate(ctx, &paused, 1, []model.Child{}), "ScheduleUpdate pause")
		})
		resumed := *s
		resumed.Version = 3
		Within(t, 0, "ScheduleUpdate resuming it", func() {
			requireNoError(t, d.ScheduleUpdate(ctx, &resumed, 2, every(&resumed)), "ScheduleUpdate resume")
		})
		changed := *s
		changed.EventCount, changed.Version = 4, 4
		Within(t, 0, "ScheduleUpdate replacing its 60 children", func() {
			requireNoError(t, d.ScheduleUpdate(ctx, &changed, 3, every(&changed)), "ScheduleUpdate eventCount")
		})
		Within(t, 0, "ScheduleCreate after the updates", func() {
			createSchedule(t, d, newSchedule("A", "s2"), nil)
		})
		got, err := d.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin", Keys: keys})
		requireNoError(t, err, "ChildrenFind")
		requireEqual(t, len(got), 60, "children after the updates")
		for _, c := range got {
			requireEqual(t, c.ScheduleVersion, int64(4), "child version of "+childStrings([]model.Child{c})[0])
		}
	}},
	{"Delete", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		key := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		s := newSchedule("A", "s1")
		createSchedule(t, d, s, childrenOf(s, key))

		requireIs(t, d.ScheduleDelete(ctx, "B", "s1"), model.ErrNotFound, "ScheduleDelete by another tenant")
		_, err := d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "schedule survives another tenant's delete")

		requireNoError(t, d.ScheduleDelete(ctx, "A", "s1"), "ScheduleDelete")
		_, err = d.ScheduleGet(ctx, "A", "s1")
		requireIs(t, err, model.ErrNotFound, "ScheduleGet after delete")
		requireIs(t, d.ScheduleDelete(ctx, "A", "s1"), model.ErrNotFound, "ScheduleDelete twice")

		got, err := d.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin", Keys: []model.ChildKey{key}})
		requireNoError(t, err, "ChildrenFind")
		requireEqual(t, len(got), 0, "children left after ScheduleDelete")
	}},
	{"CountByPolicy", func(t *testing.T, d store.Driver) {
		for _, s := range []*model.Schedule{newSchedule("A", "s1"), newSchedule("A", "s2"), newSchedule("A", "s3"), newSchedule("B", "s4")} {
			if s.ID != "s3" {
				s.PolicyID = "p1"
			}
			createSchedule(t, d, s, nil)
		}
		n, err := d.ScheduleCountByPolicy(t.Context(), "A", "p1")
		requireNoError(t, err, "ScheduleCountByPolicy")
		requireEqual(t, n, 2, "ScheduleCountByPolicy A")
		n, err = d.ScheduleCountByPolicy(t.Context(), "B", "p1")
		requireNoError(t, err, "ScheduleCountByPolicy")
		requireEqual(t, n, 1, "ScheduleCountByPolicy B")
		n, err = d.ScheduleCountByPolicy(t.Context(), "C", "p1")
		requireNoError(t, err, "ScheduleCountByPolicy")
		requireEqual(t, n, 0, "ScheduleCountByPolicy C")
	}},
}
