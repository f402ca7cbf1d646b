package master_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// A deadline shorter than the window, expire without a deadline, an
// unknown onDeadline and a maxEventAge out of bounds are 422 problems
// naming the member, on create and on PATCH.
func TestDeadlineBadInput(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	base := func() client.ScheduleCreate {
		return client.ScheduleCreate{Name: "n", Cron: ptr("0 3 * * *"), Target: httpTarget()}
	}
	for _, tc := range []struct {
		name, field string
		set         func(*client.ScheduleCreate)
	}{
		{"ShorterThanWindow", "deadline", func(b *client.ScheduleCreate) { b.Window, b.Deadline = ptr("1h"), ptr("30m") }},
		{"ExpireWithoutDeadline", "onDeadline", func(b *client.ScheduleCreate) { b.OnDeadline = ptr(client.OnDeadlineExpire) }},
		{"UnknownOnDeadline", "onDeadline", func(b *client.ScheduleCreate) { b.Deadline, b.OnDeadline = ptr("1h"), ptr(client.OnDeadline("later")) }},
		{"EventAgeTooLong", "maxEventAge", func(b *client.ScheduleCreate) { b.MaxEventAge = ptr("48h") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := base()
			tc.set(&b)
			r, err := c.CreateScheduleWithResponse(h.ctx, nil, b)
			wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, tc.field)
		})
	}
	b := base()
	b.Window, b.Deadline, b.OnDeadline = ptr("30m"), ptr("45m"), ptr(client.OnDeadlineExpire)
	s := h.schedule(c, b)
	if s.Deadline == nil || *s.Deadline != "45m0s" || s.OnDeadline == nil || *s.OnDeadline != client.OnDeadlineExpire {
		t.Fatalf("created: deadline %v, onDeadline %v", s.Deadline, s.OnDeadline)
	}
	r, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{Window: ptr("1h")})
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "deadline")
	r, err = c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{Window: ptr(""), Deadline: ptr("")})
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "onDeadline")
}

// A running fire shows its deadline, eta (now plus its unfinished events
// at its policy's throughput: limit 4 / hold 2 s = 2 a second) and atRisk;
// a missed one shows deadlineMissed.
func TestFireShowsForecastAndMiss(t *testing.T) {
	h := newHarness(t)
	tenant, c := h.tenant("acme")
	p := h.policy(c, "p", 4)
	if err := h.st.PolicySetHoldTime(h.ctx, p.Id, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if pr, err := c.GetPolicyWithResponse(h.ctx, p.Id); err != nil || pr.JSON200 == nil || pr.JSON200.HoldTime == nil || *pr.JSON200.HoldTime != "2s" {
		t.Fatalf("the policy's holdTime: %v %+v", err, pr)
	}
	s := h.schedule(c, client.ScheduleCreate{Name: "n", Cron: ptr("0 3 * * *"), Target: httpTarget(), PolicyId: &p.Id, Deadline: ptr("45m")})
	now := time.Now().UTC()
	fire := func(at time.Time, deadline time.Time, miss *model.DeadlineMiss, statuses ...model.EventStatus) string {
		f := &model.Fire{ID: model.FireID(s.Id, 1, at), ScheduleID: s.Id, TenantID: tenant, FireTime: at,
			LocalTime: at.Format(time.RFC3339), Count: len(statuses), Decision: model.FireEmitted, CreatedAt: now,
			Deadline: &deadline, OnDeadline: model.DeadlineRecord, DeadlineMissed: miss}
		var evs []*model.Event
		for i, st := range statuses {
			evs = append(evs, &model.Event{ID: model.EventID(f.ID, i), TenantID: tenant, ScheduleID: s.Id, FireID: f.ID,
				FireTime: at, Index: i, Count: len(statuses), LaunchAt: at, PolicyID: p.Id, Target: model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hook"},
				MaxAttempts: 3, Status: st, CreatedAt: now, UpdatedAt: now})
		}
		if _, _, err := h.st.FireInsertMany(h.ctx, []store.FireNew{{Fire: f, Events: evs}}); err != nil {
			t.Fatal(err)
		}
		return f.ID
	}
	waiting := make([]model.EventStatus, 20)
	for i := range waiting {
		waiting[i] = model.EventPending
	}
	waiting[0] = model.EventReleased
	onTime := fire(now.Add(-time.Minute), now.Add(time.Hour), nil, waiting...) // 19 left: about 9.5 s
	tight := fire(now.Add(-2*time.Minute), now.Add(5*time.Second), nil, waiting...)
	missed := fire(now.Add(-3*time.Hour), now.Add(-2*time.Hour), &model.DeadlineMiss{At: now.Add(-2 * time.Hour), Remaining: 3},
		model.EventReleased, model.EventExpired, model.EventExpired)

	get := func(id string) client.Fire {
		r, err := c.GetFireWithResponse(h.ctx, id)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		return *r.JSON200
	}
	f := get(onTime)
	if f.Eta == nil || f.AtRisk == nil || *f.AtRisk || f.Deadline == nil {
		t.Fatalf("on time: eta %v atRisk %v deadline %v", f.Eta, f.AtRisk, f.Deadline)
	}
	if d := f.Eta.Sub(now); d < 9*time.Second || d > 11*time.Second {
		t.Fatalf("eta now+%s, want about 9.5 s (19 events at 2 a second)", d)
	}
	if f = get(tight); f.AtRisk == nil || !*f.AtRisk {
		t.Fatalf("a fire whose eta is after its deadline: atRisk %v", f.AtRisk)
	}
	f = get(missed)
	if f.DeadlineMissed == nil || f.DeadlineMissed.Remaining != 3 || f.Eta != nil || f.Counts.Expired != 2 {
		t.Fatalf("missed: %+v eta %v counts %+v", f.DeadlineMissed, f.Eta, f.Counts)
	}
}
