package main

import (
	"strings"
	"testing"
)

// TestCalendarCommands runs calendars create, get, list, update and
// delete and schedules create --exclude-calendar against the real server.
func TestCalendarCommands(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }

	cal := decode[struct {
		ID     string   `json:"id"`
		Dates  []string `json:"dates"`
		Ranges []struct {
			From, To string
		} `json:"ranges"`
		Weekly []struct {
			Days     []string `json:"days"`
			From, To string
		} `json:"weekly"`
	}](t, tk("calendars", "create", "--name", "holidays", "--tz", "Europe/Berlin", "--date", "2027-12-25", "--date", "2027-12-26",
		"--range", "2027-12-31T18:00/2028-01-01T06:00", "--weekly", "sat,sun", "--weekly", "fri@17:00-24:00", "--json").ok(t))
	if len(cal.Dates) != 2 || cal.Ranges[0].To != "2028-01-01T06:00" || len(cal.Weekly) != 2 || strings.Join(cal.Weekly[0].Days, ",") != "sat,sun" ||
		cal.Weekly[1].From != "17:00" || cal.Weekly[1].To != "24:00" {
		t.Fatalf("calendars create: %+v", cal)
	}
	tk("calendars", "get", cal.ID).ok(t).has(t, `(?m)^date\s+2027-12-25$`, `(?m)^weekly\s+fri, 17:00 to 24:00$`)
	tk("calendars", "list").ok(t).has(t, `(?m)^ID\s+NAME\s+TIMEZONE`, `(?m)^`+cal.ID+`\s+holidays\s+Europe/Berlin\s+2\s+1\s+2\s+1$`)
	tk("calendars", "update", cal.ID, "--date", "2027-12-24", "--clear", "ranges").ok(t).has(t, `(?m)^version\s+2$`, `(?m)^date\s+2027-12-24$`)
	tk("calendars", "create", "--name", "bad", "--tz", "UTC", "--weekly", "sat@18:00-09:00").fails(t, exitFail, `weekly\[0\]\.to: `)

	sched := decode[struct {
		ID               string   `json:"id"`
		ExcludeCalendars []string `json:"excludeCalendars"`
		OnExcluded       string   `json:"onExcluded"`
	}](t, tk("schedules", "create", "--name", "nightly", "--cron", "0 3 * * *", "--target", s.consumer,
		"--exclude-calendar", cal.ID, "--on-excluded", "next_included", "--json").ok(t))
	if len(sched.ExcludeCalendars) != 1 || sched.ExcludeCalendars[0] != cal.ID || sched.OnExcluded != "next_included" {
		t.Fatalf("schedules create --exclude-calendar: %+v", sched)
	}
	tk("schedules", "preview", sched.ID, "--n", "3", "--explain").ok(t)
	tk("schedules", "create", "--name", "x", "--cron", "0 3 * * *", "--target", s.consumer, "--exclude-calendar", "cal_nope").
		fails(t, exitFail, `excludeCalendars\[0\]: `)
	tk("calendars", "delete", cal.ID).fails(t, exitFail, `409`)
	tk("schedules", "delete", sched.ID).ok(t)
	tk("calendars", "delete", cal.ID).ok(t)

	tenant := decode[idOnly](t, cli(t, s.url, s.adminKey, "tenants", "create", "--name", "small", "--json").ok(t)).ID
	cli(t, s.url, s.adminKey, "tenants", "patch", tenant, "--max-calendars", "1").ok(t).has(t, `(?m)^maxCalendars\s+1$`)
}
