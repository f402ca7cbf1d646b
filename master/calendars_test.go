package master_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
)

func (h *harness) calendar(c *client.ClientWithResponses, body client.CalendarCreate) client.Calendar {
	h.t.Helper()
	r, err := c.CreateCalendarWithResponse(h.ctx, nil, body)
	mustStatus(h.t, err, r.StatusCode(), r.Body, http.StatusCreated)
	return *r.JSON201
}

func TestCalendarCRUD(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	cal := h.calendar(c, client.CalendarCreate{
		Name: "holidays", Timezone: "Europe/Berlin", Dates: &[]string{"2027-12-25"},
		Ranges: &[]client.CalendarRange{{From: "2027-12-31T18:00", To: "2028-01-01T06:00"}},
		Weekly: &[]client.WeeklyRule{{Days: []client.WeeklyRuleDays{"sat", "sun"}}},
	})
	if !strings.HasPrefix(cal.Id, "cal_") || cal.Version != 1 || len(cal.Weekly) != 1 || cal.Weekly[0].From != nil {
		t.Fatalf("created %+v", cal)
	}
	g, err := c.GetCalendarWithResponse(h.ctx, cal.Id)
	mustStatus(t, err, g.StatusCode(), g.Body, http.StatusOK)
	if g.JSON200.Dates[0] != "2027-12-25" || g.JSON200.Ranges[0].To != "2028-01-01T06:00" {
		t.Fatalf("got %+v", g.JSON200)
	}
	u, err := c.UpdateCalendarWithResponse(h.ctx, cal.Id, client.CalendarUpdate{Dates: &[]string{"2027-12-24", "2027-12-25"}})
	mustStatus(t, err, u.StatusCode(), u.Body, http.StatusOK)
	if u.JSON200.Version != 2 || len(u.JSON200.Dates) != 2 || len(u.JSON200.Weekly) != 1 || u.JSON200.Name != "holidays" {
		t.Fatalf("updated %+v", u.JSON200)
	}
	// Paging.
	for _, n := range []string{"b", "c"} {
		h.calendar(c, client.CalendarCreate{Name: n, Timezone: "UTC"})
	}
	var ids []string
	var cursor *string
	for {
		l, err := c.ListCalendarsWithResponse(h.ctx, &client.ListCalendarsParams{Limit: ptr(2), Cursor: cursor})
		mustStatus(t, err, l.StatusCode(), l.Body, http.StatusOK)
		for _, it := range l.JSON200.Items {
			ids = append(ids, it.Id)
		}
		if cursor = l.JSON200.NextCursor; cursor == nil {
			break
		}
	}
	if len(ids) != 3 || ids[0] != cal.Id {
		t.Fatalf("listed %v", ids)
	}
	// Another tenant sees nothing of it.
	_, other := h.tenant("other")
	og, err := other.GetCalendarWithResponse(h.ctx, cal.Id)
	wantProblem(t, err, og.HTTPResponse, og.Body, http.StatusNotFound, "")
	od, err := other.DeleteCalendarWithResponse(h.ctx, cal.Id)
	wantProblem(t, err, od.HTTPResponse, od.Body, http.StatusNotFound, "")
	ol, err := other.ListCalendarsWithResponse(h.ctx, nil)
	mustStatus(t, err, ol.StatusCode(), ol.Body, http.StatusOK)
	if len(ol.JSON200.Items) != 0 {
		t.Fatalf("other tenant lists %v", ol.JSON200.Items)
	}

	// In use: 409 naming the count; free again: 204.
	s := h.schedule(c, client.ScheduleCreate{Name: "nightly", Cron: ptr("0 3 * * *"), Target: httpTarget(),
		ExcludeCalendars: &[]string{cal.Id}, OnExcluded: ptr(client.OnExcludedNextIncluded)})
	if s.ExcludeCalendars == nil || (*s.ExcludeCalendars)[0] != cal.Id || *s.OnExcluded != client.OnExcludedNextIncluded {
		t.Fatalf("schedule %+v", s)
	}
	d, err := c.DeleteCalendarWithResponse(h.ctx, cal.Id)
	p := wantProblem(t, err, d.HTTPResponse, d.Body, http.StatusConflict, "")
	if p.Detail == nil || !strings.Contains(*p.Detail, "1 schedule(s)") {
		t.Fatalf("conflict %+v", p)
	}
	us, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{ExcludeCalendars: &[]string{}})
	mustStatus(t, err, us.StatusCode(), us.Body, http.StatusOK)
	if us.JSON200.ExcludeCalendars != nil || us.JSON200.OnExcluded != nil {
		t.Fatalf("calendars not removed: %+v", us.JSON200)
	}
	d, err = c.DeleteCalendarWithResponse(h.ctx, cal.Id)
	mustStatus(t, err, d.StatusCode(), d.Body, http.StatusNoContent)
}

func TestCalendarBadInput(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	_, other := h.tenant("other")
	foreign := h.calendar(other, client.CalendarCreate{Name: "theirs", Timezone: "UTC"})
	for _, tc := range []struct {
		name  string
		body  client.CalendarCreate
		field string
	}{
		{"UnknownZone", client.CalendarCreate{Name: "x", Timezone: "Mars/Base"}, "timezone"},
		{"BadDate", client.CalendarCreate{Name: "x", Timezone: "UTC", Dates: &[]string{"2027-13-01"}}, "dates[0]"},
		{"FromNotBeforeTo", client.CalendarCreate{Name: "x", Timezone: "UTC", Weekly: &[]client.WeeklyRule{{Days: []client.WeeklyRuleDays{"mon"}, From: ptr("18:00"), To: ptr("09:00")}}}, "weekly[0].to"},
		{"RangeBackwards", client.CalendarCreate{Name: "x", Timezone: "UTC", Ranges: &[]client.CalendarRange{{From: "2027-01-02T00:00", To: "2027-01-01T00:00"}}}, "ranges[0].to"},
		{"EmptyName", client.CalendarCreate{Name: "", Timezone: "UTC"}, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.CreateCalendarWithResponse(h.ctx, nil, tc.body)
			if r != nil && r.StatusCode() == http.StatusBadRequest {
				wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, tc.field)
				return
			}
			wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, tc.field)
		})
	}
	t.Run("UnknownDay", func(t *testing.T) {
		r, err := c.CreateCalendarWithBodyWithResponse(h.ctx, nil, "application/json",
			strings.NewReader(`{"name":"x","timezone":"UTC","weekly":[{"days":["funday"]}]}`))
		if err != nil || r.StatusCode() < 400 || r.StatusCode() >= 500 || !strings.Contains(string(r.Body), "weekly") {
			t.Fatalf("status %d body %s err %v", r.StatusCode(), r.Body, err)
		}
	})
	for _, tc := range []struct {
		name  string
		body  client.ScheduleCreate
		field string
	}{
		{"UnknownCalendar", client.ScheduleCreate{ExcludeCalendars: &[]string{"cal_nope"}}, "excludeCalendars[0]"},
		{"OtherTenantsCalendar", client.ScheduleCreate{ExcludeCalendars: &[]string{foreign.Id}}, "excludeCalendars[0]"},
		{"OnExcludedWithoutCalendars", client.ScheduleCreate{OnExcluded: ptr(client.OnExcludedSkip)}, "onExcluded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.body
			b.Name, b.Cron, b.Target = "s", ptr("0 3 * * *"), httpTarget()
			r, err := c.CreateScheduleWithResponse(h.ctx, nil, b)
			if r != nil && r.StatusCode() == http.StatusBadRequest {
				wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, tc.field)
				return
			}
			wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, tc.field)
		})
	}
	l, err := c.ListSchedulesWithResponse(h.ctx, nil)
	mustStatus(t, err, l.StatusCode(), l.Body, http.StatusOK)
	if len(l.JSON200.Items) != 0 {
		t.Fatalf("a refused create left %d schedules", len(l.JSON200.Items))
	}
}

func TestCalendarQuota(t *testing.T) {
	h := newHarness(t)
	id, c := h.tenant("acme")
	r, err := h.admin.UpdateTenantWithResponse(h.ctx, id, client.TenantUpdate{Quotas: &client.TenantQuotas{MaxCalendars: ptr(2)}})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	h.calendar(c, client.CalendarCreate{Name: "a", Timezone: "UTC"})
	h.calendar(c, client.CalendarCreate{Name: "b", Timezone: "UTC"})
	cr, err := c.CreateCalendarWithResponse(h.ctx, nil, client.CalendarCreate{Name: "c", Timezone: "UTC"})
	wantProblem(t, err, cr.HTTPResponse, cr.Body, http.StatusUnprocessableEntity, "maxCalendars")
}

// TestPreviewAppliesCalendars: the preview leaves out what the calendars
// exclude, shows moved fires where they move (once), and explains.
func TestPreviewAppliesCalendars(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2027, 12, 20, 0, 0, 0, 0, time.UTC)) // a Monday
	h := newHarness(t, func(_ *master.Config, d *master.Deps) { d.Clock = clock })
	_, c := h.tenant("acme")
	cal := h.calendar(c, client.CalendarCreate{Name: "xmas", Timezone: "Europe/Berlin", Dates: &[]string{"2027-12-24"},
		Weekly: &[]client.WeeklyRule{{Days: []client.WeeklyRuleDays{"sat", "sun"}}}})
	mk := func(on client.OnExcluded) client.Schedule {
		return h.schedule(c, client.ScheduleCreate{Name: string(on), Cron: ptr("0 9 * * *"), Timezone: ptr("Europe/Berlin"), Target: httpTarget(),
			ExcludeCalendars: &[]string{cal.Id}, OnExcluded: &on})
	}
	days := func(fts []client.FireTime) []string {
		var out []string
		for _, f := range fts {
			out = append(out, f.Local[:10])
		}
		return out
	}
	skip := mk(client.OnExcludedSkip)
	p, err := c.PreviewScheduleWithResponse(h.ctx, skip.Id, &client.PreviewScheduleParams{Count: ptr(5), Explain: ptr(true)})
	mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
	if got, want := strings.Join(days(p.JSON200.FireTimes), " "), "2027-12-20 2027-12-21 2027-12-22 2027-12-23 2027-12-27"; got != want {
		t.Fatalf("skip preview %s, want %s", got, want)
	}
	if p.JSON200.Excluded == nil || len(*p.JSON200.Excluded) != 3 || (*p.JSON200.Excluded)[0].Reason != "date 2027-12-24" ||
		(*p.JSON200.Excluded)[0].CalendarId != cal.Id || (*p.JSON200.Excluded)[1].Reason != "weekly sat,sun" {
		t.Fatalf("explained %s", p.Body)
	}
	next := mk(client.OnExcludedNextIncluded)
	p, err = c.PreviewScheduleWithResponse(h.ctx, next.Id, &client.PreviewScheduleParams{Count: ptr(6)})
	mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
	// Friday 24th, Saturday 25th and Sunday 26th all move to Monday 27th
	// 00:00, one fire; Monday's own 09:00 fire stays.
	var got []string
	for _, f := range p.JSON200.FireTimes {
		got = append(got, f.Local[:16])
	}
	if want := "2027-12-20T09:00 2027-12-21T09:00 2027-12-22T09:00 2027-12-23T09:00 2027-12-27T00:00 2027-12-27T09:00"; strings.Join(got, " ") != want {
		t.Fatalf("next_included preview %s, want %s", strings.Join(got, " "), want)
	}
	if p.JSON200.Excluded != nil {
		t.Fatalf("excluded shown without explain: %s", p.Body)
	}
}

// TestBatchItemsNameCalendars: a batch item keeps its calendars, and an
// item naming an unknown calendar fails alone, naming the field.
func TestBatchItemsNameCalendars(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	cal := h.calendar(c, client.CalendarCreate{Name: "weekends", Timezone: "UTC", Weekly: &[]client.WeeklyRule{{Days: []client.WeeklyRuleDays{"sat", "sun"}}}})
	r, err := c.CreateSchedulesBatchWithResponse(h.ctx, client.ScheduleBatchCreate{Items: []client.ScheduleBatchItem{
		{Name: "ok", Cron: ptr("0 3 * * *"), Target: httpTarget(), ExcludeCalendars: &[]string{cal.Id}, OnExcluded: ptr(client.OnExcludedNextIncluded)},
		{Name: "bad", Cron: ptr("0 3 * * *"), Target: httpTarget(), ExcludeCalendars: &[]string{"cal_nope"}},
	}})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	items := r.JSON200.Items
	if items[0].Status != http.StatusCreated || items[0].Schedule.ExcludeCalendars == nil || (*items[0].Schedule.ExcludeCalendars)[0] != cal.Id ||
		*items[0].Schedule.OnExcluded != client.OnExcludedNextIncluded {
		t.Fatalf("item 0: %s", r.Body)
	}
	if items[1].Status != http.StatusUnprocessableEntity || items[1].Problem == nil || items[1].Problem.Errors == nil ||
		(*items[1].Problem.Errors)[0].Field != "items[1].excludeCalendars[0]" {
		t.Fatalf("item 1: %s", r.Body)
	}
}
