package emitter_test

import (
	"reflect"
	"testing"

	"github.com/schedulerd/schedulerd/model"
)

// TestEventsCarryTheSchedulesFields: every field that model.Schedule and
// model.Event share by name (but their own identity and timestamps) is
// copied from the schedule into each event it emits, since delivery never
// reads the schedule. A field added to both and not copied fails here.
func TestEventsCarryTheSchedulesFields(t *testing.T) {
	st := openEmbedded(t)
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, st, clk, nil)
	s := sched("carry", "*/5 * * * *", "UTC", 2, func(s *model.Schedule) {
		s.Priority, s.PolicyID, s.MaxAttempts = 7, "pol_carry", 9
		s.Target = model.Target{Type: model.TargetSQS, QueueURL: "https://sqs.eu-west-1.amazonaws.com/1/q"}
	})
	create(t, st, s)
	runPass(t, e)

	fs := firesOf(t, st, s.ID)
	if len(fs) != 1 {
		t.Fatalf("fires = %v, want 1", fireTimes(fs))
	}
	evs := eventsOf(t, st, fs[0].ID)
	if len(evs) != 2 {
		t.Fatalf("events = %d, want 2", len(evs))
	}
	sv := reflect.ValueOf(s).Elem()
	et := reflect.TypeFor[model.Event]()
	shared := 0
	for i := range et.NumField() {
		f := et.Field(i)
		sf, ok := sv.Type().FieldByName(f.Name)
		if !ok || sf.Type != f.Type || f.Name == "ID" || f.Name == "CreatedAt" || f.Name == "UpdatedAt" {
			continue
		}
		shared++
		want := sv.FieldByIndex(sf.Index)
		if want.IsZero() {
			t.Fatalf("the schedule's %s is zero: give it a value in this test", f.Name)
		}
		for _, ev := range evs {
			if got := reflect.ValueOf(ev).Elem().Field(i); !reflect.DeepEqual(got.Interface(), want.Interface()) {
				t.Errorf("event %s: %s = %v, want the schedule's %v", ev.ID, f.Name, got, want)
			}
		}
	}
	if shared == 0 {
		t.Fatal("model.Schedule and model.Event share no field")
	}
}
