package schedule_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// TestCompileKeepsEveryMember: each member of Spec, changed alone to
// another valid value, changes what Compile makes of the spec, so that a
// member Compile forgets to copy into model.Schedule fails here. A member
// added to Spec fails until it has a value in changes.
func TestCompileKeepsEveryMember(t *testing.T) {
	changes := map[string]func(*schedule.Spec){
		"Name":             func(sp *schedule.Spec) { sp.Name = "weekly" },
		"Cron":             func(sp *schedule.Spec) { sp.Cron = ptr("0 4 * * *") },
		"Fields":           func(sp *schedule.Spec) { sp.Cron, sp.Fields = nil, &cron.Fields{Minute: "5"} },
		"RunAt":            func(sp *schedule.Spec) { sp.Cron, sp.RunAt = nil, ptr(testNow.Add(time.Hour)) },
		"Timezone":         func(sp *schedule.Spec) { sp.Timezone = "Asia/Tokyo" },
		"EventCount":       func(sp *schedule.Spec) { sp.EventCount = 3 },
		"PolicyID":         func(sp *schedule.Spec) { sp.PolicyID = "pol_1" },
		"Window":           func(sp *schedule.Spec) { sp.Window = "30m" },
		"Spread":           func(sp *schedule.Spec) { sp.Window, sp.Spread = "30m", true },
		"Priority":         func(sp *schedule.Spec) { sp.Priority = 3 },
		"Overlap":          func(sp *schedule.Spec) { sp.Overlap = model.OverlapCancel },
		"Target":           func(sp *schedule.Spec) { sp.Target.URL = ptr("https://other.example.com/hook") },
		"Payload":          func(sp *schedule.Spec) { sp.Payload = json.RawMessage(`{"k":1}`) },
		"MaxAttempts":      func(sp *schedule.Spec) { sp.MaxAttempts = 9 },
		"StartAt":          func(sp *schedule.Spec) { sp.StartAt = ptr(testNow.Add(time.Hour)) },
		"EndAt":            func(sp *schedule.Spec) { sp.EndAt = ptr(testNow.Add(48 * time.Hour)) },
		"Misfire":          func(sp *schedule.Spec) { sp.Misfire = model.MisfireSkip },
		"ExcludeCalendars": func(sp *schedule.Spec) { sp.ExcludeCalendars = []string{"cal_1"} },
		"OnExcluded": func(sp *schedule.Spec) {
			sp.ExcludeCalendars, sp.OnExcluded = []string{"cal_1"}, model.OnExcludedNextIncluded
		},
		"Jitter":   func(sp *schedule.Spec) { sp.Jitter = "15m" },
		"Labels":   func(sp *schedule.Spec) { sp.Labels = map[string]string{"team": "billing"} },
		"Interval": func(sp *schedule.Spec) { sp.Cron, sp.Interval = nil, ptr("90m") },
		"Crons":    func(sp *schedule.Spec) { sp.Cron, sp.Crons = nil, []string{"0 3 * * *", "0 4 * * 6"} },
		"Notify": func(sp *schedule.Spec) {
			sp.Notify = []model.Notify{{URL: "https://ops.example.com/n", On: []model.NotifyKind{model.NotifyFinished}}}
		},
		"After": func(sp *schedule.Spec) {
			sp.Cron, sp.After = nil, &model.After{ScheduleID: "sch_up", When: model.AfterSucceeded}
		},
		"Deadline":    func(sp *schedule.Spec) { sp.Deadline = "45m" },
		"OnDeadline":  func(sp *schedule.Spec) { sp.Deadline, sp.OnDeadline = "45m", model.DeadlineExpire },
		"MaxEventAge": func(sp *schedule.Spec) { sp.MaxEventAge = "2h" },
	}
	base, err := schedule.Compile(valid(), testLimits(), testNow)
	if err != nil {
		t.Fatal(err)
	}
	// Spread needs a window: compare it with the same window unspread.
	windowed := valid()
	windowed.Window = "30m"
	unspread, err := schedule.Compile(windowed, testLimits(), testNow)
	if err != nil {
		t.Fatal(err)
	}
	// OnExcluded needs calendars: compare it with the same calendars.
	withCalendars := valid()
	withCalendars.ExcludeCalendars = []string{"cal_1"}
	calendared, err := schedule.Compile(withCalendars, testLimits(), testNow)
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeFor[schedule.Spec]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		change, ok := changes[name]
		if !ok {
			t.Errorf("Spec.%s has no value in TestCompileKeepsEveryMember's changes: give it one", name)
			continue
		}
		sp := valid()
		change(&sp)
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		was := base
		switch name {
		case "Spread":
			was = unspread
		case "OnExcluded":
			was = calendared
		}
		if reflect.DeepEqual(c.Schedule, was.Schedule) {
			t.Errorf("Spec.%s does not reach model.Schedule: changing it changes nothing", name)
		}
	}
}
