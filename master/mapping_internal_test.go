package master

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// setMember sets f, a member of an API or domain type, to a non-zero value
// that no default of the mapping equals.
func setMember(t *testing.T, f reflect.Value, name string) {
	t.Helper()
	switch {
	case f.Type() == reflect.TypeFor[time.Time]():
		f.Set(reflect.ValueOf(time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)))
	case f.Type() == reflect.TypeFor[json.RawMessage]():
		f.Set(reflect.ValueOf(json.RawMessage(`{"member":"` + name + `"}`)))
	case f.Type() == reflect.TypeFor[time.Duration]():
		f.SetInt(int64(17 * time.Minute))
	case f.Kind() == reflect.Pointer:
		f.Set(reflect.New(f.Type().Elem()))
		setMember(t, f.Elem(), name)
	case f.Kind() == reflect.Struct:
		for i := range f.NumField() {
			setMember(t, f.Field(i), name+"."+f.Type().Field(i).Name)
		}
	case f.Kind() == reflect.String:
		f.SetString("value-of-" + name)
	case f.Kind() == reflect.Int, f.Kind() == reflect.Int64:
		f.SetInt(17)
	case f.Kind() == reflect.Bool:
		f.SetBool(true)
	case f.Type() == reflect.TypeFor[[]string]():
		f.Set(reflect.ValueOf([]string{"value-of-" + name}))
	case f.Kind() == reflect.Slice:
		// One element, every member set (a list of receivers).
		f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		setMember(t, f.Index(0), name+"[0]")
	case f.Kind() == reflect.Map && f.Type().Key().Kind() == reflect.String && f.Type().Elem().Kind() == reflect.String:
		f.Set(reflect.MakeMap(f.Type()))
		f.SetMapIndex(reflect.ValueOf("member").Convert(f.Type().Key()), reflect.ValueOf("value-of-"+name).Convert(f.Type().Elem()))
	default:
		t.Fatalf("member %s of kind %s: teach setMember this kind", name, f.Kind())
	}
}

// eachMemberChanges sets, one at a time, each field of a fresh *T (but
// those in skip), and each member of a field that is a struct of its own
// (a target, cron fields), and fails unless the mapping's result differs
// from its result for the bare *T: a member the mapping forgets changes
// nothing.
func eachMemberChanges[T, R any](t *testing.T, mapping func(*T) R, skip ...string) {
	t.Helper()
	base := mapping(new(T))
	typ := reflect.TypeFor[T]()
	check := func(name string, base R, set func(f reflect.Value)) {
		t.Helper()
		in := new(T)
		set(reflect.ValueOf(in).Elem())
		if reflect.DeepEqual(mapping(in), base) {
			t.Errorf("%s.%s is not mapped: setting it changes nothing", typ, name)
		}
	}
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if contains(skip, name) {
			continue
		}
		check(name, base, func(v reflect.Value) { setMember(t, v.Field(i), name) })
		ft := typ.Field(i).Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() != reflect.Struct || ft == reflect.TypeFor[time.Time]() {
			continue
		}
		// A member of the struct is compared with the struct present but
		// empty.
		alloc := func(v reflect.Value) reflect.Value {
			f := v.Field(i)
			if f.Kind() == reflect.Pointer {
				f.Set(reflect.New(ft))
				f = f.Elem()
			}
			return f
		}
		empty := new(T)
		alloc(reflect.ValueOf(empty).Elem())
		emptyOut := mapping(empty)
		for j := range ft.NumField() {
			sub := name + "." + ft.Field(j).Name
			check(sub, emptyOut, func(v reflect.Value) { setMember(t, alloc(v).Field(j), sub) })
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestEveryMemberIsMapped: each member of the API's schedule bodies reaches
// schedule.Spec, and each field of model.Schedule reaches the API's
// Schedule, so that a member added to openapi.yaml or a field added to the
// model is not silently dropped on the way.
func TestEveryMemberIsMapped(t *testing.T) {
	t.Run("ScheduleCreateToSpec", func(t *testing.T) {
		s := &Server{}
		eachMemberChanges(t, s.specFromCreate)
	})
	t.Run("ScheduleBatchItemToScheduleCreate", func(t *testing.T) {
		// idempotencyKey belongs to the batch, not to the schedule.
		eachMemberChanges(t, createOf, "IdempotencyKey")
	})
	t.Run("ScheduleUpdateToSpec", func(t *testing.T) {
		eachMemberChanges(t, func(in *api.ScheduleUpdate) schedule.Spec {
			var sp schedule.Spec
			if err := applyPatch(&sp, in); err != nil {
				t.Fatal(err)
			}
			return sp
		})
	})
	t.Run("ScheduleToAPI", func(t *testing.T) {
		now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
		// The tenant and the emitter partition are not shown.
		eachMemberChanges(t, func(m *model.Schedule) *api.Schedule {
			if m.State == "" {
				m.State = model.SchedulePaused // no next fire times to compute
			}
			if m.ExcludeCalendars == nil {
				// onExcluded is shown with calendars only, where it applies.
				m.ExcludeCalendars = []string{"cal_1"}
			}
			return scheduleOutAt(m, &schedule.Compiled{}, now)
		}, "TenantID", "Partition", "IntervalNext", "CreatedTrace") // IntervalNext: the emitter's bookkeeping; CreatedTrace: tracing's
	})
	t.Run("ScheduleToSpec", func(t *testing.T) {
		// Identity, state (a pause, skipped fires) and bookkeeping are not
		// part of the definition.
		eachMemberChanges(t, func(m *model.Schedule) schedule.Spec { return schedule.SpecFromSchedule(m) },
			"ID", "TenantID", "State", "Partition", "Version", "CreatedAt", "UpdatedAt",
			"PausedNote", "PausedAt", "PausedBy", "ResumeAt", "SkipUntil", "IntervalNext", "CreatedTrace")
	})
}
