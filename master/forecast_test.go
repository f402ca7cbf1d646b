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

var forecastNow = time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)

func withClock(clk clockwork.Clock) harnessOption {
	return func(_ *master.Config, d *master.Deps) { d.Clock = clk }
}

// ratePolicy is a policy that drains perSecond events a second.
func (h *harness) ratePolicy(c *client.ClientWithResponses, name string, perSecond float64) client.Policy {
	h.t.Helper()
	r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: name, MaxInFlight: 100, RatePerSecond: &perSecond, AutoRelease: ptr(true)})
	mustStatus(h.t, err, r.StatusCode(), r.Body, http.StatusCreated)
	return *r.JSON201
}

// 120 events at the top of each hour on a policy that drains 60 a
// minute: the first minute ends with 60 waiting, drained at 00:02; a
// spread schedule of 300 events over 5 minutes adds 60 a minute.
func TestForecastPerMinute(t *testing.T) {
	h := newHarness(t, withClock(clockwork.NewFakeClockAt(forecastNow)))
	_, c := h.tenant("acme")
	pol := h.ratePolicy(c, "p", 1)
	h.schedule(c, client.ScheduleCreate{Name: "hourly", Cron: ptr("0 * * * *"), Timezone: ptr("UTC"), EventCount: ptr(120), PolicyId: &pol.Id, Target: httpTarget()})
	h.schedule(c, client.ScheduleCreate{Name: "spread", Cron: ptr("30 0 * * *"), Timezone: ptr("UTC"), EventCount: ptr(300), PolicyId: &pol.Id,
		Window: ptr("5m"), Spread: ptr(true), Target: httpTarget()})
	from := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	to := from.Add(time.Hour)
	r, err := c.ForecastPolicyWithResponse(h.ctx, pol.Id, &client.ForecastPolicyParams{From: &from, To: &to})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	fc := r.JSON200
	if fc.Schedules != 2 || fc.Events != 420 || !fc.CapacityKnown || *fc.CapacityPerMinute != 60 || *fc.MissedDeadlines != 0 {
		t.Fatalf("forecast %s", r.Body)
	}
	want := []struct {
		minute          int
		events, backlog int
	}{{0, 120, 60}, {30, 60, 0}, {31, 60, 0}, {32, 60, 0}, {33, 60, 0}, {34, 60, 0}}
	if len(fc.Minutes) != len(want) {
		t.Fatalf("minutes %s", r.Body)
	}
	for i, w := range want {
		m := fc.Minutes[i]
		if !m.At.Equal(from.Add(time.Duration(w.minute)*time.Minute)) || m.Events != w.events || m.Backlog != w.backlog || m.Capacity != 60 {
			t.Fatalf("minutes[%d] = %+v, want %+v", i, m, w)
		}
	}
	if len(fc.Drains) != 1 || !fc.Drains[0].Start.Equal(from) || fc.Drains[0].DrainedAt == nil ||
		!fc.Drains[0].DrainedAt.Equal(from.Add(2*time.Minute)) || fc.Drains[0].MaxBacklog != 60 || fc.Drains[0].Events != 120 {
		t.Fatalf("drains %s", r.Body)
	}
	if len(fc.Peaks) == 0 || fc.Peaks[0].Events != 120 || *fc.MaxBacklog != 60 {
		t.Fatalf("peaks %s", r.Body)
	}
	if fc.DrainedBy == nil || !fc.DrainedBy.Equal(from.Add(35*time.Minute)) {
		t.Fatalf("drainedBy %v, want 00:35", fc.DrainedBy)
	}
}

// A schedule whose fire the policy cannot drain within its window is
// saved with a warning; one it can drain, and an update that widens the
// window, have none.
func TestForecastWarnsOnSave(t *testing.T) {
	h := newHarness(t, withClock(clockwork.NewFakeClockAt(forecastNow)))
	_, c := h.tenant("acme")
	pol := h.ratePolicy(c, "p", 1) // 60 a minute
	ok := h.schedule(c, client.ScheduleCreate{Name: "fits", Cron: ptr("0 6 * * *"), Timezone: ptr("UTC"), EventCount: ptr(100),
		Window: ptr("5m"), PolicyId: &pol.Id, Target: httpTarget()})
	if ok.Warnings != nil {
		t.Fatalf("warnings for a fire that fits: %+v", *ok.Warnings)
	}
	late := h.schedule(c, client.ScheduleCreate{Name: "late", Cron: ptr("0 6 * * *"), Timezone: ptr("UTC"), EventCount: ptr(600),
		Window: ptr("5m"), PolicyId: &pol.Id, Target: httpTarget()})
	if late.Warnings == nil || len(*late.Warnings) != 2 {
		t.Fatalf("not two warnings for 700 events in 5 minutes at 60 a minute: %+v", late)
	}
	// The first schedule's fire, which fitted alone, misses with this one.
	if o := (*late.Warnings)[1]; *o.Fires != 1 || !o.FireTime.Equal(time.Date(2030, 1, 1, 6, 0, 0, 0, time.UTC)) || !strings.Contains(o.Message, ok.Id) {
		t.Fatalf("warning for the other schedule %+v", o)
	}
	w := (*late.Warnings)[0]
	fire := time.Date(2030, 1, 1, 6, 0, 0, 0, time.UTC)
	if w.Code != client.WarningCodePolicyCapacity || w.Field != "policyId" || *w.Fires != 1 || !w.FireTime.Equal(fire) ||
		!w.Deadline.Equal(fire.Add(5*time.Minute)) || w.FinishAt == nil || w.FinishAt.Sub(fire) < 11*time.Minute {
		t.Fatalf("warning %+v", w)
	}
	// The first schedule, which shares the policy, is now at risk too.
	ur, err := c.UpdateScheduleWithResponse(h.ctx, ok.Id, client.ScheduleUpdate{Name: ptr("fits-renamed")})
	mustStatus(t, err, ur.StatusCode(), ur.Body, http.StatusOK)
	if ur.JSON200.Warnings == nil {
		// Events launched in one minute are forecast to finish together:
		// its 100 go with the other 600.
		t.Fatalf("no warning for the fire shared with 600 more events: %s", ur.Body)
	}
	// A wider window fits its own fire, not the other schedule's.
	ur, err = c.UpdateScheduleWithResponse(h.ctx, late.Id, client.ScheduleUpdate{Window: ptr("30m")})
	mustStatus(t, err, ur.StatusCode(), ur.Body, http.StatusOK)
	if ur.JSON200.Warnings == nil || len(*ur.JSON200.Warnings) != 1 || !strings.Contains((*ur.JSON200.Warnings)[0].Message, ok.Id) {
		t.Fatalf("warnings after widening the window: %s", ur.Body)
	}
	// 140 events: 240 at 06:00 drain in 4 minutes, within both windows.
	ur, err = c.UpdateScheduleWithResponse(h.ctx, late.Id, client.ScheduleUpdate{EventCount: ptr(140)})
	mustStatus(t, err, ur.StatusCode(), ur.Body, http.StatusOK)
	if ur.JSON200.Warnings != nil {
		t.Fatalf("warnings once both fit: %s", ur.Body)
	}
}

func TestForecastBadInput(t *testing.T) {
	h := newHarness(t, withClock(clockwork.NewFakeClockAt(forecastNow)))
	_, c := h.tenant("acme")
	_, other := h.tenant("other")
	pol := h.ratePolicy(c, "p", 1)
	from := forecastNow
	for _, to := range []time.Time{from, from.Add(-time.Minute), from.Add(7*24*time.Hour + time.Second)} {
		r, err := c.ForecastPolicyWithResponse(h.ctx, pol.Id, &client.ForecastPolicyParams{From: &from, To: &to})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "to")
	}
	r, err := other.ForecastPolicyWithResponse(h.ctx, pol.Id, nil)
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusNotFound, "")
	// A policy with nothing known of its capacity: events, no drain.
	unknown := h.policy(c, "q", 5)
	h.schedule(c, client.ScheduleCreate{Name: "s", Cron: ptr("* * * * *"), Timezone: ptr("UTC"), EventCount: ptr(2), PolicyId: &unknown.Id, Target: httpTarget()})
	to := from.Add(7 * 24 * time.Hour)
	r, err = c.ForecastPolicyWithResponse(h.ctx, unknown.Id, &client.ForecastPolicyParams{From: &from, To: &to})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if r.JSON200.CapacityKnown || r.JSON200.Events != 2*7*24*60 || len(r.JSON200.Drains) != 0 || r.JSON200.MissedDeadlines != nil {
		t.Fatalf("forecast without capacity: events %d known %v", r.JSON200.Events, r.JSON200.CapacityKnown)
	}
	// 50 schedules firing every minute for 7 days are 504,000 fire times:
	// more work than a forecast does.
	for i := range 49 {
		h.schedule(c, client.ScheduleCreate{Name: "s" + itoa(i), Cron: ptr("* * * * *"), Timezone: ptr("UTC"), PolicyId: &unknown.Id, Target: httpTarget()})
	}
	r, err = c.ForecastPolicyWithResponse(h.ctx, unknown.Id, &client.ForecastPolicyParams{From: &from, To: &to})
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "to")
	day := from.Add(24 * time.Hour)
	r, err = c.ForecastPolicyWithResponse(h.ctx, unknown.Id, &client.ForecastPolicyParams{From: &from, To: &day})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
}
