package master_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
)

// TestIntervalAndCronsThroughTheAPI: an interval schedule and a schedule
// with several crons are created, shown, changed into one another and
// previewed through the real server.
func TestIntervalAndCronsThroughTheAPI(t *testing.T) {
	h := newHarness(t)
	tenantID, c := h.tenant("a")
	start := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	s := h.schedule(c, client.ScheduleCreate{Name: "iv", Interval: ptr("90m"), StartAt: &start,
		Timezone: ptr("Europe/Berlin"), Target: httpTarget()})
	if deref(s.Interval) != "1h30m0s" || s.Cron != nil || s.Crons != nil || s.Children != 0 {
		t.Fatalf("interval schedule %+v", s)
	}
	if len(s.NextFireTimes) != 5 || !s.NextFireTimes[0].Equal(start) || s.NextFireTimes[4].Sub(s.NextFireTimes[0]) != 6*time.Hour {
		t.Fatalf("next fires %v, want every 90m from %v", s.NextFireTimes, start)
	}
	if m := h.storedSchedule(tenantID, s.Id); m.Interval != 90*time.Minute || m.Cron != "" {
		t.Fatalf("stored %+v", m)
	}

	u, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{Crons: &[]string{"0 9 * * 1-5", "30 12 * * 6"}})
	mustStatus(t, err, u.StatusCode(), u.Body, http.StatusOK)
	if got := u.JSON200; got.Interval != nil || got.Crons == nil || strings.Join(*got.Crons, "|") != "0 9 * * 1-5|30 12 * * 6" || got.Children == 0 {
		t.Fatalf("after the change to crons: %s", u.Body)
	}
	if m := h.storedSchedule(tenantID, s.Id); m.Interval != 0 || len(m.Crons) != 2 {
		t.Fatalf("stored after the change %+v", m)
	}

	p, err := c.PreviewScheduleSpecWithResponse(h.ctx, &client.PreviewScheduleSpecParams{Count: ptr(3)},
		client.ScheduleCreate{Name: "p", Interval: ptr("45m"), StartAt: &start, Target: httpTarget()})
	mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
	if d := deref(p.JSON200.Description); d != "every 45 minutes from "+start.Format(time.RFC3339) || len(p.JSON200.FireTimes) != 3 {
		t.Fatalf("preview %s", p.Body)
	}

	// Without startAt an interval counts from the creation, also in the
	// answer to a later change.
	n := h.schedule(c, client.ScheduleCreate{Name: "n", Interval: ptr("90m"), Target: httpTarget()})
	first := n.CreatedAt.Add(90 * time.Minute)
	if r := first.Truncate(time.Millisecond); !r.Equal(first) {
		first = r.Add(time.Millisecond)
	}
	if len(n.NextFireTimes) == 0 || !n.NextFireTimes[0].Equal(first) {
		t.Fatalf("created at %v: next fires %v, want from %v", n.CreatedAt, n.NextFireTimes, first)
	}
	pn, err := c.UpdateScheduleWithResponse(h.ctx, n.Id, client.ScheduleUpdate{Name: ptr("renamed")})
	mustStatus(t, err, pn.StatusCode(), pn.Body, http.StatusOK)
	if got := pn.JSON200.NextFireTimes; len(got) == 0 || !got[0].Equal(first) {
		t.Fatalf("after a rename: next fires %v, want from %v", got, first)
	}

	b, err := c.CreateSchedulesBatchWithResponse(h.ctx, client.ScheduleBatchCreate{Items: []client.ScheduleBatchItem{
		{Name: "b1", Interval: ptr("2h"), Target: httpTarget()},
		{Name: "b2", Crons: &[]string{"0 9 * * *", "0 21 * * *"}, Target: httpTarget()},
	}})
	mustStatus(t, err, b.StatusCode(), b.Body, http.StatusOK)
	if b.JSON200.Created != 2 || deref(b.JSON200.Items[0].Schedule.Interval) != "2h0m0s" || len(deref(b.JSON200.Items[1].Schedule.Crons)) != 2 {
		t.Fatalf("batch %s", b.Body)
	}
}

func TestIntervalAndCronsBadInput(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("a")
	many := make([]string, 17)
	for i := range many {
		many[i] = strconv.Itoa(i) + " 9 * * *"
	}
	soon := time.Now().Add(time.Hour)
	cases := []struct {
		name  string
		body  client.ScheduleCreate
		field string
	}{
		{"IntervalBelowAMinute", client.ScheduleCreate{Interval: ptr("30s")}, "interval"},
		{"IntervalUnparsable", client.ScheduleCreate{Interval: ptr("hourly")}, "interval"},
		{"IntervalEmpty", client.ScheduleCreate{Interval: ptr("")}, "interval"},
		{"CronAndInterval", client.ScheduleCreate{Cron: ptr("0 3 * * *"), Interval: ptr("1h")}, "interval"},
		{"CronAndCrons", client.ScheduleCreate{Cron: ptr("0 3 * * *"), Crons: &[]string{"0 4 * * *"}}, "crons"},
		{"CronsAndInterval", client.ScheduleCreate{Crons: &[]string{"0 4 * * *"}, Interval: ptr("1h")}, "crons"},
		{"RunAtAndInterval", client.ScheduleCreate{RunAt: &soon, Interval: ptr("1h")}, "interval"},
		{"CronsEmpty", client.ScheduleCreate{Crons: &[]string{}}, "crons"},
		{"CronsOverLong", client.ScheduleCreate{Crons: &many}, "crons"},
		{"CronsInvalid", client.ScheduleCreate{Crons: &[]string{"0 4 * * *", "0 4 * *"}}, "crons[1]"},
		{"JitterAsLongAsTheInterval", client.ScheduleCreate{Interval: ptr("10m"), Jitter: ptr("10m")}, "jitter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			body.Name, body.Target = tc.name, httpTarget()
			r, err := c.CreateScheduleWithResponse(h.ctx, nil, body)
			if err != nil {
				t.Fatal(err)
			}
			if r.StatusCode() < 400 || r.StatusCode() >= 500 {
				t.Fatalf("status %d: %s", r.StatusCode(), r.Body)
			}
			wantProblem(t, err, r.HTTPResponse, r.Body, r.StatusCode(), tc.field)
		})
	}
	t.Run("PatchCronsAndInterval", func(t *testing.T) {
		s := h.cronSchedule(c, "patched")
		r, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{Crons: &[]string{"0 4 * * *"}, Interval: ptr("1h")})
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() < 400 || r.StatusCode() >= 500 {
			t.Fatalf("status %d: %s", r.StatusCode(), r.Body)
		}
		wantProblem(t, err, r.HTTPResponse, r.Body, r.StatusCode(), "crons")
	})
}
