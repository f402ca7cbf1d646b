package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// fieldTests check that a driver keeps every field of model.Schedule,
// including fields added after this test was written: fullSchedule sets
// each field by reflection, so a field that a driver's encoding forgets
// comes back zero and fails here.
var fieldTests = []namedTest{
	{"ScheduleKeepsEveryField", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		key := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		cronSc, oneOffSc := fullSchedule(t, "A", "cron", false), fullSchedule(t, "A", "once", true)
		requireEveryFieldSet(t, cronSc, oneOffSc)

		createSchedule(t, d, cronSc, childrenOf(cronSc, key))
		// A one-off's event is what the emitter makes of it, which a driver
		// may store as a difference from its schedule: one without a
		// policy and one with.
		withPolicy := fullSchedule(t, "A", "once-policy", true)
		withPolicy.PolicyID = "pol_once"
		var items []store.ScheduleNew
		var evs []*model.Event
		for _, s := range []*model.Schedule{oneOffSc, withPolicy} {
			f := newFire("A", s.ID, *s.RunAt)
			f.Count = 1
			ev := newEvent("A", s.ID, *s.RunAt, 0)
			ev.Count, ev.Deadline = 1, ptr(s.RunAt.Add(s.Window))
			copyShared(ev, s)
			ev.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			evs = append(evs, ev)
			items = append(items, store.ScheduleNew{Schedule: s, Children: childrenOf(s, key), Fires: []store.FireNew{{Fire: f, Events: []*model.Event{ev}}}})
		}
		errs, err := d.ScheduleCreateMany(ctx, items)
		requireNoError(t, err, "ScheduleCreateMany")
		for i, err := range errs {
			requireNoError(t, err, "ScheduleCreateMany item "+items[i].Schedule.ID)
		}
		for _, want := range []*model.Schedule{cronSc, oneOffSc, withPolicy} {
			got, err := d.ScheduleGet(ctx, want.TenantID, want.ID)
			requireNoError(t, err, "ScheduleGet "+want.ID)
			requireSameFields(t, got, want, "created "+want.ID)
		}
		for _, ev := range evs {
			got := getEvent(t, d, ev.ID)
			got.ReleaseToken, ev.ReleaseToken = "", "" // the driver's to mint
			requireSameFields(t, got, ev, "the event of "+ev.ScheduleID)
		}

		// An update writes every field too.
		upd := fullSchedule(t, "A", "cron", false)
		upd.Name, upd.Priority, upd.Version = "renamed", -cronSc.Priority, cronSc.Version+1
		requireNoError(t, d.ScheduleUpdate(ctx, upd, cronSc.Version, childrenOf(upd, key)), "ScheduleUpdate")
		got, err := d.ScheduleGet(ctx, "A", "cron")
		requireNoError(t, err, "ScheduleGet after update")
		requireSameFields(t, got, upd, "updated")
	}},
	{"EventKeepsTraceContext", func(t *testing.T, d store.Driver) {
		// Events of one fire share their fire span's trace context, but a
		// driver that stores what they share once keeps each one's.
		const a, b = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
		fireTime := at(time.Hour)
		var evs []*model.Event
		for i, tp := range []string{a, a, b, ""} {
			ev := newEvent("A", "traced", fireTime, i)
			ev.Count, ev.TraceParent = 4, tp
			evs = append(evs, ev)
		}
		insertEvents(t, d, evs...)
		for _, want := range evs {
			requireEqual(t, getEvent(t, d, want.ID).TraceParent, want.TraceParent, "traceParent of "+want.ID)
		}
		// A transition keeps it.
		requireNoError(t, transition(t, d, store.EventTransition{ID: evs[2].ID, From: model.EventPending, To: model.EventRetrying, Attempts: 1, LaunchAt: at(2 * time.Hour)}), "transition")
		requireEqual(t, getEvent(t, d, evs[2].ID).TraceParent, b, "traceParent after a transition")
	}},
}

// fullSchedule returns a schedule whose every field is set: a one-off
// (RunAt, no Cron) or a cron schedule (Cron, no RunAt). Fields with a
// meaning take a valid value other than their default; the others get
// a value derived from their name.
func fullSchedule(t *testing.T, tenantID, id string, oneOff bool) *model.Schedule {
	t.Helper()
	s := &model.Schedule{}
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		fillField(t, v.Field(i), v.Type().Field(i).Name, i)
	}
	s.ID, s.TenantID = id, tenantID
	s.Timezone = "Asia/Tokyo"
	s.Window = 90 * time.Minute
	s.Target = model.Target{Type: model.TargetSQS, URL: "http://127.0.0.1:9/hook", QueueURL: "https://sqs.eu-west-1.amazonaws.com/1/q"}
	s.Misfire, s.Overlap, s.State = model.MisfireFireAll, model.OverlapCancel, model.ScheduleActive
	s.Partition, s.Version = 1, 3
	s.Deadline, s.OnDeadline, s.MaxEventAge = 2*time.Hour, model.DeadlineExpire, 3*time.Hour
	start, end := at(time.Hour), at(240*time.Hour)
	s.StartAt, s.EndAt = &start, &end
	s.CreatedAt, s.UpdatedAt = at(-time.Hour), at(-time.Minute)
	if oneOff {
		// Version 1: the fire and event ids of newFire and newEvent. No
		// policy, which a driver may need to index the event by.
		s.Cron, s.RunAt, s.Version, s.PolicyID = "", ptr(at(2*time.Hour)), 1, ""
	} else {
		s.Cron, s.RunAt = "5 4 * * *", nil
	}
	return s
}

// fillField sets f, a field of model.Schedule, to a non-zero value.
func fillField(t *testing.T, f reflect.Value, name string, n int) {
	t.Helper()
	switch {
	case f.Type() == reflect.TypeFor[time.Time]():
		f.Set(reflect.ValueOf(at(time.Duration(n) * time.Minute)))
	case f.Type() == reflect.TypeFor[*time.Time]():
		f.Set(reflect.ValueOf(ptr(at(time.Duration(n) * time.Minute))))
	case f.Type() == reflect.TypeFor[json.RawMessage]():
		f.Set(reflect.ValueOf(json.RawMessage(fmt.Sprintf(`{"%s":%d}`, name, n))))
	case f.Type() == reflect.TypeFor[time.Duration]():
		f.SetInt(int64(n) * int64(time.Minute))
	case f.Kind() == reflect.String:
		f.SetString(fmt.Sprintf("%s-%d", name, n))
	case f.Kind() == reflect.Int, f.Kind() == reflect.Int64:
		f.SetInt(int64(n + 1))
	case f.Kind() == reflect.Bool:
		f.SetBool(true)
	case f.Type() == reflect.TypeFor[map[string]string]():
		f.Set(reflect.ValueOf(map[string]string{name: strconv.Itoa(n)}))
	case f.Type() == reflect.TypeFor[[]string]():
		f.Set(reflect.ValueOf([]string{name, strconv.Itoa(n)}))
	case f.Type() == reflect.TypeFor[[]model.Notify]():
		f.Set(reflect.ValueOf([]model.Notify{
			{URL: "http://127.0.0.1:9/" + name, On: []model.NotifyKind{model.NotifyFinished, model.NotifyHasDead}},
			{QueueURL: "https://sqs.eu-west-1.amazonaws.com/1/n", On: []model.NotifyKind{model.NotifySkipped}},
		}))
	case f.Type() == reflect.TypeFor[*model.After]():
		f.Set(reflect.ValueOf(&model.After{ScheduleID: fmt.Sprintf("up-%d", n), When: model.AfterSucceeded}))
	case f.Kind() == reflect.Struct:
		for i := range f.NumField() {
			fillField(t, f.Field(i), name+"."+f.Type().Field(i).Name, n)
		}
	default:
		t.Fatalf("field %s of kind %s: teach fillField (store/storetest) this kind", name, f.Kind())
	}
}

// requireEveryFieldSet fails unless each field of model.Schedule is set
// in at least one of ss, so that the round trip checks it.
func requireEveryFieldSet(t *testing.T, ss ...*model.Schedule) {
	t.Helper()
	typ := reflect.TypeFor[model.Schedule]()
	for i := range typ.NumField() {
		set := false
		for _, s := range ss {
			set = set || !reflect.ValueOf(s).Elem().Field(i).IsZero()
		}
		if !set {
			t.Fatalf("model.Schedule.%s is zero in every schedule of the round trip: give it a value in fullSchedule", typ.Field(i).Name)
		}
	}
}

// copyShared sets each field of e that model.Schedule has too (but the
// identity and timestamps) to s's, as the emitter does.
func copyShared(e *model.Event, s *model.Schedule) {
	ev, sv := reflect.ValueOf(e).Elem(), reflect.ValueOf(s).Elem()
	for i := range ev.NumField() {
		f := ev.Type().Field(i)
		sf, ok := sv.Type().FieldByName(f.Name)
		if ok && sf.Type == f.Type && f.Name != "ID" && f.Name != "CreatedAt" && f.Name != "UpdatedAt" {
			ev.Field(i).Set(sv.FieldByIndex(sf.Index))
		}
	}
}

// requireSameFields compares every field of the structs *got and *want:
// times as instants, payloads as JSON, the rest with reflect.DeepEqual.
func requireSameFields[T any](t *testing.T, got, want *T, what string) {
	t.Helper()
	g, w := reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem()
	for i := range g.NumField() {
		name := what + ": " + g.Type().Field(i).Name
		switch gf, wf := g.Field(i).Interface(), w.Field(i).Interface(); gf := gf.(type) {
		case time.Time:
			requireTime(t, gf, wf.(time.Time), name)
		case *time.Time:
			requireTimePtr(t, gf, wf.(*time.Time), name)
		case json.RawMessage:
			requireJSON(t, gf, wf.(json.RawMessage), name)
		default:
			if !reflect.DeepEqual(gf, wf) {
				t.Errorf("%s: got %v, want %v", name, gf, wf)
			}
		}
	}
}
