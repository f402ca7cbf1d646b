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

// wantField fails unless body is a problem naming field.
func wantField(t *testing.T, body []byte, field string) {
	t.Helper()
	p := mustProblem(t, body)
	if p.Errors != nil {
		for _, e := range *p.Errors {
			if e.Field == field {
				return
			}
		}
	}
	t.Fatalf("problem %s does not name %s", body, field)
}

func TestConsumerBrake(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)) // a Monday
	h := newHarness(t, func(_ *master.Config, d *master.Deps) { d.Clock = clock })
	_, tc := h.tenant("acme")
	_, other := h.tenant("other")
	p := h.policy(tc, "billing", 10)
	q := h.policy(tc, "search", 4)

	// The tenant issues a consumer key for p.
	kr, err := tc.CreateConsumerKeyWithResponse(h.ctx, p.Id, nil)
	mustStatus(t, err, kr.StatusCode(), kr.Body, http.StatusCreated)
	if !strings.HasPrefix(kr.JSON201.Key, "ck_") || kr.JSON201.PolicyId == nil || *kr.JSON201.PolicyId != p.Id {
		t.Fatalf("consumer key %+v", kr.JSON201)
	}
	ck := h.client(kr.JSON201.Key)
	// Another tenant cannot.
	okr, err := other.CreateConsumerKeyWithResponse(h.ctx, p.Id, nil)
	mustStatus(t, err, okr.StatusCode(), okr.Body, http.StatusNotFound)

	// The consumer key is refused everywhere but its policy's brake.
	gr, err := ck.GetPolicyWithResponse(h.ctx, p.Id)
	mustStatus(t, err, gr.StatusCode(), gr.Body, http.StatusForbidden)
	lr, err := ck.ListSchedulesWithResponse(h.ctx, nil)
	mustStatus(t, err, lr.StatusCode(), lr.Body, http.StatusForbidden)
	sr, err := ck.GetPolicyStatusWithResponse(h.ctx, q.Id)
	mustStatus(t, err, sr.StatusCode(), sr.Body, http.StatusForbidden)
	ckr, err := ck.CreateConsumerKeyWithResponse(h.ctx, p.Id, nil)
	mustStatus(t, err, ckr.StatusCode(), ckr.Body, http.StatusForbidden)

	sr, err = ck.GetPolicyStatusWithResponse(h.ctx, p.Id)
	mustStatus(t, err, sr.StatusCode(), sr.Body, http.StatusOK)
	if s := sr.JSON200; s.EffectiveLimit != 10 || s.LimitSource != "policy" || s.Hold != nil {
		t.Fatalf("status before a hold: %s", sr.Body)
	}

	// Bad holds: over the policy's own limit, in the past, too far.
	now := clock.Now()
	for _, c := range []struct {
		body  client.HoldRequest
		field string
	}{
		{client.HoldRequest{Until: now.Add(time.Hour), MaxInFlight: 11}, "maxInFlight"},
		{client.HoldRequest{Until: now.Add(-time.Minute), MaxInFlight: 1}, "until"},
		{client.HoldRequest{Until: now.Add(8 * 24 * time.Hour), MaxInFlight: 1}, "until"},
	} {
		r, err := ck.SetPolicyHoldWithResponse(h.ctx, p.Id, c.body)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusUnprocessableEntity)
		if ct := r.HTTPResponse.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
			t.Fatalf("content type %q", ct)
		}
		wantField(t, r.Body, c.field)
	}

	// The consumer stops its inflow for 30 minutes.
	until := now.Add(30 * time.Minute)
	hr, err := ck.SetPolicyHoldWithResponse(h.ctx, p.Id, client.HoldRequest{Until: until, MaxInFlight: 0})
	mustStatus(t, err, hr.StatusCode(), hr.Body, http.StatusOK)
	if s := hr.JSON200; s.EffectiveLimit != 0 || s.LimitSource != "hold" || s.Hold == nil || !s.Hold.Until.Equal(until) ||
		s.LimitUntil == nil || !s.LimitUntil.Equal(until) || s.Hold.By == nil || !strings.HasPrefix(*s.Hold.By, "ck_") {
		t.Fatalf("status under the hold: %s", hr.Body)
	}
	pr, err := tc.GetPolicyWithResponse(h.ctx, p.Id)
	mustStatus(t, err, pr.StatusCode(), pr.Body, http.StatusOK)
	if g := pr.JSON200; g.EffectiveLimit == nil || *g.EffectiveLimit != 0 || g.LimitSource == nil || *g.LimitSource != "hold" || g.Hold == nil {
		t.Fatalf("policy under the hold: %s", pr.Body)
	}

	// The hold ends by itself.
	clock.Advance(30 * time.Minute)
	sr, err = ck.GetPolicyStatusWithResponse(h.ctx, p.Id)
	mustStatus(t, err, sr.StatusCode(), sr.Body, http.StatusOK)
	if s := sr.JSON200; s.EffectiveLimit != 10 || s.LimitSource != "policy" || s.Hold != nil {
		t.Fatalf("status after the hold's end: %s", sr.Body)
	}

	// The tenant's own key may hold and clear too.
	hr, err = tc.SetPolicyHoldWithResponse(h.ctx, p.Id, client.HoldRequest{Until: clock.Now().Add(time.Hour), MaxInFlight: 3})
	mustStatus(t, err, hr.StatusCode(), hr.Body, http.StatusOK)
	if hr.JSON200.EffectiveLimit != 3 {
		t.Fatalf("tenant hold: %s", hr.Body)
	}
	cr, err := ck.ClearPolicyHoldWithResponse(h.ctx, p.Id)
	mustStatus(t, err, cr.StatusCode(), cr.Body, http.StatusOK)
	if cr.JSON200.EffectiveLimit != 10 || cr.JSON200.Hold != nil {
		t.Fatalf("after clearing: %s", cr.Body)
	}

	// Listed for the policy only, and revocable (by the admin too).
	lk, err := tc.ListConsumerKeysWithResponse(h.ctx, p.Id)
	mustStatus(t, err, lk.StatusCode(), lk.Body, http.StatusOK)
	if len(lk.JSON200.Items) != 1 || lk.JSON200.Items[0].Id != kr.JSON201.Id {
		t.Fatalf("consumer keys of p: %s", lk.Body)
	}
	lq, err := tc.ListConsumerKeysWithResponse(h.ctx, q.Id)
	mustStatus(t, err, lq.StatusCode(), lq.Body, http.StatusOK)
	if len(lq.JSON200.Items) != 0 {
		t.Fatalf("consumer keys of q: %s", lq.Body)
	}
	rq, err := tc.RevokeConsumerKeyWithResponse(h.ctx, q.Id, kr.JSON201.Id)
	mustStatus(t, err, rq.StatusCode(), rq.Body, http.StatusNotFound)
	rv, err := h.admin.RevokeConsumerKeyWithResponse(h.ctx, p.Id, kr.JSON201.Id)
	mustStatus(t, err, rv.StatusCode(), rv.Body, http.StatusNoContent)
	sr, err = ck.GetPolicyStatusWithResponse(h.ctx, p.Id)
	mustStatus(t, err, sr.StatusCode(), sr.Body, http.StatusUnauthorized)
}

func TestPolicyLimitSchedule(t *testing.T) {
	// Monday 2030-01-07 08:30 UTC is 09:30 in Paris.
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 7, 8, 30, 0, 0, time.UTC))
	h := newHarness(t, func(_ *master.Config, d *master.Deps) { d.Clock = clock })
	_, tc := h.tenant("acme")
	weekdays := []client.LimitWhenDays{"mon", "tue", "wed", "thu", "fri"}
	rule := func(days []client.LimitWhenDays, from, to, tz string, n int) client.LimitRule {
		return client.LimitRule{When: client.LimitWhen{Days: &days, From: ptr(from), To: ptr(to), Timezone: ptr(tz)}, MaxInFlight: n}
	}
	r, err := tc.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "office", MaxInFlight: 100,
		Limits: &[]client.LimitRule{rule(weekdays, "09:00", "17:00", "Europe/Paris", 5)}})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
	if g := r.JSON201; g.EffectiveLimit == nil || *g.EffectiveLimit != 5 || *g.LimitSource != "limits[0]" || g.Limits == nil || len(*g.Limits) != 1 {
		t.Fatalf("created: %s", r.Body)
	}
	clock.Advance(7*time.Hour + 30*time.Minute) // 17:00 in Paris
	gr, err := tc.GetPolicyWithResponse(h.ctx, r.JSON201.Id)
	mustStatus(t, err, gr.StatusCode(), gr.Body, http.StatusOK)
	if g := gr.JSON200; *g.EffectiveLimit != 100 || *g.LimitSource != "policy" {
		t.Fatalf("after hours: %s", gr.Body)
	}

	// Bad schedules name the field.
	for _, c := range []struct {
		limits []client.LimitRule
		field  string
	}{
		{[]client.LimitRule{rule(weekdays, "09:00", "17:00", "Europe/Atlantis", 5)}, "limits[0].when.timezone"},
		{[]client.LimitRule{rule(weekdays, "09:00", "17:00", "UTC", 5), rule([]client.LimitWhenDays{"fri"}, "16:00", "18:00", "UTC", 1)}, "limits[1].when"},
		{[]client.LimitRule{{When: client.LimitWhen{CalendarId: ptr("cal_nope")}, MaxInFlight: 0}}, "limits[0].when.calendarId"},
	} {
		r, err := tc.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "bad", MaxInFlight: 10, Limits: &c.limits})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusUnprocessableEntity)
		wantField(t, r.Body, c.field)
	}
	// A calendar rule: the calendar must be the tenant's, and stays while
	// the policy names it.
	cr, err := tc.CreateCalendarWithResponse(h.ctx, nil, client.CalendarCreate{Name: "maintenance", Timezone: "UTC", Dates: &[]string{"2030-01-07"}})
	mustStatus(t, err, cr.StatusCode(), cr.Body, http.StatusCreated)
	cal := cr.JSON201
	mr, err := tc.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "maint", MaxInFlight: 10,
		Limits: &[]client.LimitRule{{When: client.LimitWhen{CalendarId: ptr(cal.Id)}, MaxInFlight: 0}}})
	mustStatus(t, err, mr.StatusCode(), mr.Body, http.StatusCreated)
	if g := mr.JSON201; *g.EffectiveLimit != 0 || *g.LimitSource != "limits[0]" {
		t.Fatalf("in the calendar's day: %s", mr.Body)
	}
	dr, err := tc.DeleteCalendarWithResponse(h.ctx, cal.Id)
	mustStatus(t, err, dr.StatusCode(), dr.Body, http.StatusConflict)

	// An update replaces the schedule; [] removes it.
	ur, err := tc.UpdatePolicyWithResponse(h.ctx, r.JSON201.Id, client.PolicyUpdate{Limits: &[]client.LimitRule{}})
	mustStatus(t, err, ur.StatusCode(), ur.Body, http.StatusOK)
	if ur.JSON200.Limits != nil || ur.JSON200.EffectiveLimit != nil {
		t.Fatalf("after removing the schedule: %s", ur.Body)
	}
}
