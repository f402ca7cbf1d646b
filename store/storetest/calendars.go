package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

func newCalendar(tenantID, id string) *model.Calendar {
	return &model.Calendar{
		ID: id, TenantID: tenantID, Name: "cal-" + id, Timezone: "Europe/Berlin",
		Dates:     []string{"2027-12-25", "2027-12-26"},
		Ranges:    []model.CalendarRange{{From: "2027-12-31T18:00", To: "2028-01-01T06:00"}},
		Weekly:    []model.WeeklyRule{{Days: []string{"sat", "sun"}}, {Days: []string{"fri"}, From: "17:00", To: "24:00"}},
		Version:   1,
		CreatedAt: base, UpdatedAt: base,
	}
}

var calendarTests = []namedTest{
	{"CreateGetRoundTrip", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		c := newCalendar("A", "cal1")
		requireNoError(t, d.CalendarCreate(ctx, c), "CalendarCreate")
		got, err := d.CalendarGet(ctx, "A", "cal1")
		requireNoError(t, err, "CalendarGet")
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("CalendarGet = %+v, want %+v", got, c)
		}
		requireIs(t, d.CalendarCreate(ctx, newCalendar("A", "cal1")), model.ErrConflict, "CalendarCreate twice")
		_, err = d.CalendarGet(ctx, "B", "cal1")
		requireIs(t, err, model.ErrNotFound, "CalendarGet of another tenant")
		_, err = d.CalendarGet(ctx, "A", "nope")
		requireIs(t, err, model.ErrNotFound, "CalendarGet unknown")
	}},
	{"UpdateIsCompareAndSet", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		c := newCalendar("A", "cal1")
		requireNoError(t, d.CalendarCreate(ctx, c), "CalendarCreate")
		upd := *c
		upd.Name, upd.Dates, upd.Weekly, upd.Version = "renamed", []string{"2028-01-01"}, nil, 2
		upd.UpdatedAt = at(5 * time.Minute)
		requireNoError(t, d.CalendarUpdate(ctx, &upd, 1), "CalendarUpdate")
		got, err := d.CalendarGet(ctx, "A", "cal1")
		requireNoError(t, err, "CalendarGet")
		if !reflect.DeepEqual(got, &upd) {
			t.Fatalf("after update %+v, want %+v", got, &upd)
		}
		stale := upd
		stale.Version = 3
		requireIs(t, d.CalendarUpdate(ctx, &stale, 1), model.ErrConflict, "CalendarUpdate with a stale version")
		other := upd
		other.TenantID = "B"
		requireIs(t, d.CalendarUpdate(ctx, &other, 2), model.ErrNotFound, "CalendarUpdate of another tenant's calendar")
		missing := newCalendar("A", "nope")
		requireIs(t, d.CalendarUpdate(ctx, missing, 1), model.ErrNotFound, "CalendarUpdate unknown")
	}},
	{"DeleteAndCount", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for i := range 3 {
			requireNoError(t, d.CalendarCreate(ctx, newCalendar("A", fmt.Sprintf("cal%d", i))), "CalendarCreate")
		}
		requireNoError(t, d.CalendarCreate(ctx, newCalendar("B", "calB")), "CalendarCreate B")
		n, err := d.CalendarCountByTenant(ctx, "A", 0)
		requireNoError(t, err, "CalendarCountByTenant")
		requireEqual(t, n, 3, "calendars of A")
		n, err = d.CalendarCountByTenant(ctx, "A", 2)
		requireNoError(t, err, "CalendarCountByTenant max")
		requireEqual(t, n, 2, "calendars of A counted up to 2")
		requireIs(t, d.CalendarDelete(ctx, "B", "cal0"), model.ErrNotFound, "CalendarDelete of another tenant's calendar")
		requireNoError(t, d.CalendarDelete(ctx, "A", "cal0"), "CalendarDelete")
		requireIs(t, d.CalendarDelete(ctx, "A", "cal0"), model.ErrNotFound, "CalendarDelete twice")
		n, err = d.CalendarCountByTenant(ctx, "A", 0)
		requireNoError(t, err, "CalendarCountByTenant after delete")
		requireEqual(t, n, 2, "calendars of A after a delete")
	}},
	{"ListPagesByID", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, id := range []string{"c3", "c1", "c5", "c2", "c4"} {
			requireNoError(t, d.CalendarCreate(ctx, newCalendar("A", id)), "CalendarCreate")
		}
		requireNoError(t, d.CalendarCreate(ctx, newCalendar("B", "c0")), "CalendarCreate B")
		var got []string
		after := ""
		for {
			page, err := d.CalendarList(ctx, &store.CalendarListParams{TenantID: "A", After: after, Limit: 2})
			requireNoError(t, err, "CalendarList")
			for _, c := range page {
				got = append(got, c.ID)
			}
			if len(page) < 2 {
				break
			}
			after = page[len(page)-1].ID
		}
		requireEqual(t, fmt.Sprint(got), "[c1 c2 c3 c4 c5]", "pages of A's calendars")
	}},
	{"ScheduleCountByCalendar", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		s1 := newSchedule("A", "s1")
		s1.ExcludeCalendars = []string{"calX", "calY"}
		s2 := newSchedule("A", "s2")
		s2.ExcludeCalendars, s2.OnExcluded = []string{"calY"}, model.OnExcludedNextIncluded
		s3 := newSchedule("B", "s3")
		s3.ExcludeCalendars = []string{"calY"}
		for _, s := range []*model.Schedule{s1, s2, s3, newSchedule("A", "s4")} {
			createSchedule(t, d, s, nil)
		}
		for cal, want := range map[string]int{"calX": 1, "calY": 2, "calZ": 0} {
			n, err := d.ScheduleCountByCalendar(ctx, "A", cal)
			requireNoError(t, err, "ScheduleCountByCalendar")
			requireEqual(t, n, want, "schedules of A naming "+cal)
		}
		got, err := d.ScheduleGet(ctx, "A", "s2")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, fmt.Sprint(got.ExcludeCalendars, " ", got.OnExcluded), "[calY] next_included", "calendars read back")
	}},
}
