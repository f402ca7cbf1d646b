package schedule

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
)

// model.OneOffChild spells the LaunchExpression of a one-off's child as
// the cron engine does for its key (class MM of RunAt's UTC month, day and
// hour), for every hour of a leap year and from another zone.
func TestOneOffChildIsTheCronKeys(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for at := time.Date(2028, 1, 1, 0, 7, 0, 0, berlin); at.Year() == 2028; at = at.Add(time.Hour + time.Minute) {
		s := &model.Schedule{ID: "sch_x", TenantID: "t", Version: 3, Partition: 2, RunAt: &at}
		ra := at.UTC()
		k := cron.Key{Class: cron.ClassMM, Month: int8(ra.Month()), Day: int8(ra.Day()), Hour: int8(ra.Hour()), Minute: int8(ra.Minute())}
		want := model.Child{ScheduleID: "sch_x", TenantID: "t", ScheduleVersion: 3, Partition: 2, Timezone: "UTC",
			LaunchExpression: k.LaunchExpression(), Minute: ra.Minute()}
		if got := model.OneOffChild(s); got != want {
			t.Fatalf("OneOffChild at %s = %+v, want %+v", at, got, want)
		}
	}
}
