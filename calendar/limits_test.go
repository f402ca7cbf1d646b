package calendar_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/calendar"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

func weeklyRule(days []string, from, to, tz string, n int) model.LimitRule {
	return model.LimitRule{When: model.LimitWhen{Days: days, From: from, To: to, Timezone: tz}, MaxInFlight: n}
}

var allDays = []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestLimitsBusinessHoursAndNight(t *testing.T) {
	l, err := calendar.CompileLimits([]model.LimitRule{
		weeklyRule([]string{"mon", "tue", "wed", "thu", "fri"}, "09:00", "17:00", "Europe/Paris", 5),
		weeklyRule(allDays, "", "06:00", "Europe/Paris", 100),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Monday 2026-01-05, Paris is UTC+1.
	cases := []struct {
		at      string
		max     int
		rule    int
		nextUTC string
	}{
		{"2026-01-05T07:59:00Z", 5 * 0, -1, "2026-01-05T08:00:00Z"},
		{"2026-01-05T08:00:00Z", 5, 0, "2026-01-05T16:00:00Z"},
		{"2026-01-05T15:59:59Z", 5, 0, "2026-01-05T16:00:00Z"},
		{"2026-01-05T16:00:00Z", -1, -1, "2026-01-05T23:00:00Z"},
		{"2026-01-05T23:00:00Z", 100, 1, "2026-01-06T05:00:00Z"},
	}
	for _, c := range cases {
		got := l.At(utc(c.at), nil)
		want := c.max
		if c.rule < 0 {
			want = -1
		}
		if got.MaxInFlight != want || got.Rule != c.rule || !got.Next.Equal(utc(c.nextUTC)) {
			t.Errorf("At(%s) = %d rule %d next %s; want %d rule %d next %s", c.at, got.MaxInFlight, got.Rule, got.Next.UTC().Format(time.RFC3339), want, c.rule, c.nextUTC)
		}
	}
}

// On the days the clocks change, a rule's boundary is the local wall time
// of the policy's zone: 09:00 Paris is 08:00 UTC the day before spring
// forward and 07:00 UTC on it; a rule starting in the skipped hour starts
// at the transition; one in the repeated hour applies both times.
func TestLimitsDSTDays(t *testing.T) {
	l, err := calendar.CompileLimits([]model.LimitRule{
		weeklyRule([]string{"sat", "sun"}, "09:00", "12:00", "Europe/Paris", 3),
		weeklyRule([]string{"sun"}, "02:00", "02:30", "Europe/Paris", 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Saturday 2026-03-28 (CET) and Sunday 2026-03-29 (CEST from 01:00 UTC).
	if got := l.At(utc("2026-03-28T07:30:00Z"), nil); got.MaxInFlight != -1 || !got.Next.Equal(utc("2026-03-28T08:00:00Z")) {
		t.Errorf("saturday: %+v", got)
	}
	got := l.At(utc("2026-03-29T00:59:00Z"), nil)
	if got.MaxInFlight != -1 || !got.Next.Equal(utc("2026-03-29T07:00:00Z")) {
		// 02:00-02:30 does not occur on the spring-forward day.
		t.Errorf("sunday before the transition: %+v", got)
	}
	if got := l.At(utc("2026-03-29T06:59:59Z"), nil); got.MaxInFlight != -1 {
		t.Errorf("08:59:59 CEST: %+v", got)
	}
	if got := l.At(utc("2026-03-29T07:00:00Z"), nil); got.MaxInFlight != 3 || got.Rule != 0 || !got.Next.Equal(utc("2026-03-29T10:00:00Z")) {
		t.Errorf("09:00 CEST: %+v", got)
	}
	// Fall back, Sunday 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00 UTC;
	// 02:00-02:30 local occurs at 00:00-00:30 UTC and again at 01:00-01:30 UTC.
	for _, c := range []struct {
		at, next string
		max      int
	}{
		{"2026-10-24T23:59:00Z", "2026-10-25T00:00:00Z", -1},
		{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", 0},
		{"2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", -1},
		{"2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", 0},
		{"2026-10-25T01:30:00Z", "2026-10-25T08:00:00Z", -1},
	} {
		got := l.At(utc(c.at), nil)
		if got.MaxInFlight != c.max || !got.Next.Equal(utc(c.next)) {
			t.Errorf("fall back At(%s) = %+v; want max %d next %s", c.at, got, c.max, c.next)
		}
	}
}

func TestLimitsCalendarRuleAndLowest(t *testing.T) {
	cal, err := calendar.Compile(&model.Calendar{ID: "cal_m", Timezone: "UTC", Ranges: []model.CalendarRange{{From: "2026-01-05T10:00:00Z", To: "2026-01-05T11:00:00Z"}}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := calendar.CompileLimits([]model.LimitRule{
		{When: model.LimitWhen{Days: allDays, Timezone: "UTC"}, MaxInFlight: 5, RatePerSecond: 2},
		{When: model.LimitWhen{CalendarID: "cal_m"}, MaxInFlight: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	cals := map[string]*calendar.Calendar{"cal_m": cal}
	if got := l.At(utc("2026-01-05T10:30:00Z"), cals); got.MaxInFlight != 0 || got.Rule != 1 || got.RatePerSecond != 2 {
		t.Errorf("in the maintenance window: %+v", got)
	}
	if got := l.At(utc("2026-01-05T11:00:00Z"), cals); got.MaxInFlight != 5 || got.Rule != 0 {
		t.Errorf("after it: %+v", got)
	}
	if got := l.At(utc("2026-01-05T10:30:00Z"), nil); got.MaxInFlight != 5 {
		t.Errorf("calendar missing: %+v", got)
	}
	if ids := l.CalendarIDs(); len(ids) != 1 || ids[0] != "cal_m" {
		t.Errorf("CalendarIDs = %v", ids)
	}
}

func TestCompileLimitsRefuses(t *testing.T) {
	cases := []struct {
		rules []model.LimitRule
		field string
	}{
		{[]model.LimitRule{weeklyRule(allDays, "09:00", "17:00", "Mars/Olympus", 1)}, "limits[0].when.timezone"},
		{[]model.LimitRule{weeklyRule(allDays, "09:00", "17:00", "", 1)}, "limits[0].when.timezone"},
		{[]model.LimitRule{weeklyRule([]string{"mon"}, "09:00", "17:00", "UTC", 1), weeklyRule([]string{"mon", "tue"}, "16:00", "18:00", "UTC", 2)}, "limits[1].when"},
		{[]model.LimitRule{weeklyRule([]string{"mon"}, "09:00", "17:00", "UTC", 1), weeklyRule([]string{"tue"}, "09:00", "17:00", "Europe/Paris", 2)}, "limits[1].when.timezone"},
		{[]model.LimitRule{weeklyRule([]string{"mon"}, "9am", "17:00", "UTC", 1)}, "limits[0].when.from"},
		{[]model.LimitRule{weeklyRule([]string{"mon"}, "17:00", "09:00", "UTC", 1)}, "limits[0].when.to"},
		{[]model.LimitRule{weeklyRule([]string{"funday"}, "", "", "UTC", 1)}, "limits[0].when.days[0]"},
		{[]model.LimitRule{weeklyRule([]string{"mon"}, "", "", "UTC", -1)}, "limits[0].maxInFlight"},
		{[]model.LimitRule{{MaxInFlight: 1}}, "limits[0].when"},
		{[]model.LimitRule{{When: model.LimitWhen{CalendarID: "c", Timezone: "UTC"}}}, "limits[0].when"},
		{[]model.LimitRule{{When: model.LimitWhen{CalendarID: "c"}, RatePerSecond: -1}}, "limits[0].ratePerSecond"},
	}
	for i, c := range cases {
		_, err := calendar.CompileLimits(c.rules)
		var fe schedule.Errors
		if !errors.As(err, &fe) || len(fe.Reasons(c.field)) == 0 {
			t.Errorf("case %d: err %v; want one on %s", i, err, c.field)
		}
	}
	// Adjacent rules do not overlap.
	if _, err := calendar.CompileLimits([]model.LimitRule{weeklyRule([]string{"mon"}, "09:00", "17:00", "UTC", 1), weeklyRule([]string{"mon"}, "17:00", "", "UTC", 2)}); err != nil {
		t.Error(err)
	}
}

// FuzzCompileLimits: any text compiles or is refused naming a field of the
// rule, never panics; a compiled schedule answers At with a Next after t.
func FuzzCompileLimits(f *testing.F) {
	f.Add("mon,fri", "09:00", "17:00", "Europe/Paris", 5, 1.5, "")
	f.Add("sun", "02:00", "02:30", "America/New_York", 0, 0.0, "")
	f.Add("", "", "", "", 0, 0.0, "cal_x")
	f.Add("sat", "24:00", "", "Local", -3, -1.0, "")
	f.Fuzz(func(t *testing.T, days, from, to, tz string, n int, rate float64, cal string) {
		var ds []string
		if days != "" {
			ds = strings.Split(days, ",")
		}
		r := model.LimitRule{When: model.LimitWhen{Days: ds, From: from, To: to, Timezone: tz, CalendarID: cal}, MaxInFlight: n, RatePerSecond: rate}
		l, err := calendar.CompileLimits([]model.LimitRule{r})
		if err != nil {
			var fe schedule.Errors
			if !errors.As(err, &fe) || len(fe) == 0 {
				t.Fatalf("error %v is not field errors", err)
			}
			for _, e := range fe {
				if !strings.HasPrefix(e.Field, "limits[0]") {
					t.Fatalf("field %q", e.Field)
				}
			}
			return
		}
		at := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
		c := l.At(at, nil)
		if !c.Next.IsZero() && !c.Next.After(at) {
			t.Fatalf("next %v not after %v", c.Next, at)
		}
	})
}
