package master_test

import (
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

type storeListParams = store.ScheduleListParams

func TestAuth(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	t.Run("MissingKeyIs401", func(t *testing.T) {
		r, err := h.client("").ListSchedulesWithResponse(h.ctx, nil)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnauthorized, "")
		if r.HTTPResponse.Header.Get("WWW-Authenticate") == "" {
			t.Fatal("no WWW-Authenticate header")
		}
	})
	t.Run("UnknownKeyIs401", func(t *testing.T) {
		r, err := h.client("sk_notakey").CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "p", MaxInFlight: 1})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnauthorized, "")
	})
	t.Run("MalformedHeaderIs401", func(t *testing.T) {
		r, err := c.ListSchedulesWithResponse(h.ctx, nil, func(_ ctxT, req *http.Request) error {
			req.Header.Set("Authorization", "Basic Zm9vOmJhcg==")
			return nil
		})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnauthorized, "")
	})
	t.Run("Every401BeforeValidation", func(t *testing.T) {
		r, err := h.client("").CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", stringsReader(`{"bogus":1}`))
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnauthorized, "")
	})
	t.Run("TenantKeyOnAdminIs403", func(t *testing.T) {
		r, err := c.CreateTenantWithResponse(h.ctx, nil, client.TenantCreate{Name: "evil"})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusForbidden, "")
	})
	t.Run("AdminKeyOnTenantOpsIs403", func(t *testing.T) {
		r, err := h.admin.ListSchedulesWithResponse(h.ctx, nil)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusForbidden, "")
	})
	t.Run("AdminAPIOffWithoutAdminKey", func(t *testing.T) {
		h2 := newHarness(t, func(c *master.Config, _ *master.Deps) { c.AdminKey = "" })
		r, err := h2.client("").CreateTenantWithResponse(h2.ctx, nil, client.TenantCreate{Name: "x"})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnauthorized, "")
	})
}

func TestCrossTenant(t *testing.T) {
	h := newHarness(t)
	aID, a := h.tenant("a")
	_, b := h.tenant("b")
	pol := h.policy(a, "pa", 5)
	s := h.schedule(a, client.ScheduleCreate{Name: "a-sched", Cron: ptr("0 3 * * *"), PolicyId: &pol.Id, EventCount: ptr(2), Target: httpTarget()})
	tr, err := a.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{})
	mustStatus(t, err, tr.StatusCode(), tr.Body, http.StatusAccepted)
	fire := tr.JSON202
	dead := h.insertEvent(aID, s.Id, "", model.EventDead)
	delivered := h.insertEvent(aID, s.Id, pol.Id, model.EventDelivered)
	bID, _ := h.tenantIDOf(b)
	bEvent := h.insertEvent(bID, "sch_b", "", model.EventDelivered)

	// What a missing object looks like to B, to compare bodies with.
	missing, err := b.GetScheduleWithResponse(h.ctx, "sch_missing")
	wantProblem(t, err, missing.HTTPResponse, missing.Body, http.StatusNotFound, "")

	check := func(t *testing.T, err error, resp *http.Response, body []byte) {
		t.Helper()
		p := wantProblem(t, err, resp, body, http.StatusNotFound, "")
		if p.Detail == nil || *p.Detail != *mustProblem(t, missing.Body).Detail || p.Title != mustProblem(t, missing.Body).Title {
			t.Fatalf("404 for another tenant's object differs from a missing one: %s", body)
		}
	}
	t.Run("GetSchedule", func(t *testing.T) {
		r, err := b.GetScheduleWithResponse(h.ctx, s.Id)
		check(t, err, r.HTTPResponse, r.Body)
	})
	t.Run("UpdateSchedule", func(t *testing.T) {
		r, err := b.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{Name: ptr("stolen")})
		check(t, err, r.HTTPResponse, r.Body)
	})
	t.Run("PauseResumeTriggerPreviewFires", func(t *testing.T) {
		p, err := b.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{})
		check(t, err, p.HTTPResponse, p.Body)
		r, err := b.ResumeScheduleWithResponse(h.ctx, s.Id)
		check(t, err, r.HTTPResponse, r.Body)
		tr, err := b.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{})
		check(t, err, tr.HTTPResponse, tr.Body)
		pv, err := b.PreviewScheduleWithResponse(h.ctx, s.Id, nil)
		check(t, err, pv.HTTPResponse, pv.Body)
		f, err := b.ListScheduleFiresWithResponse(h.ctx, s.Id, nil)
		check(t, err, f.HTTPResponse, f.Body)
	})
	t.Run("DeleteSchedule", func(t *testing.T) {
		r, err := b.DeleteScheduleWithResponse(h.ctx, s.Id)
		check(t, err, r.HTTPResponse, r.Body)
	})
	t.Run("Policy", func(t *testing.T) {
		g, err := b.GetPolicyWithResponse(h.ctx, pol.Id)
		check(t, err, g.HTTPResponse, g.Body)
		u, err := b.UpdatePolicyWithResponse(h.ctx, pol.Id, client.PolicyUpdate{MaxInFlight: ptr(1000)})
		check(t, err, u.HTTPResponse, u.Body)
		d, err := b.DeletePolicyWithResponse(h.ctx, pol.Id)
		check(t, err, d.HTTPResponse, d.Body)
	})
	t.Run("UsePolicyInSchedule", func(t *testing.T) {
		r, err := b.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "x", Cron: ptr("0 3 * * *"), PolicyId: &pol.Id, Target: httpTarget()})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "policyId")
	})
	t.Run("FireAndEvents", func(t *testing.T) {
		f, err := b.GetFireWithResponse(h.ctx, fire.Id)
		check(t, err, f.HTTPResponse, f.Body)
		e, err := b.GetEventWithResponse(h.ctx, dead.ID)
		check(t, err, e.HTTPResponse, e.Body)
		rd, err := b.RedriveEventWithResponse(h.ctx, dead.ID)
		check(t, err, rd.HTTPResponse, rd.Body)
	})
	t.Run("Release", func(t *testing.T) {
		// B's key and B's own event's token do not release A's event.
		r, err := b.ReleaseEventWithResponse(h.ctx, delivered.ID, client.ReleaseRequest{Token: bEvent.ReleaseToken})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusNotFound, "")
		x, err := b.ExtendEventWithResponse(h.ctx, delivered.ID, client.ExtendRequest{Token: bEvent.ReleaseToken})
		wantProblem(t, err, x.HTTPResponse, x.Body, http.StatusNotFound, "")
		if e, _ := h.st.EventGetByID(h.ctx, delivered.ID); e.Status != model.EventDelivered {
			t.Fatal("A's event changed")
		}
	})
	t.Run("ListsShowNothingOfA", func(t *testing.T) {
		l, err := b.ListSchedulesWithResponse(h.ctx, nil)
		mustStatus(t, err, l.StatusCode(), l.Body, http.StatusOK)
		if len(l.JSON200.Items) != 0 {
			t.Fatalf("B sees %d schedules", len(l.JSON200.Items))
		}
		e, err := b.ListEventsWithResponse(h.ctx, &client.ListEventsParams{ScheduleId: &s.Id})
		mustStatus(t, err, e.StatusCode(), e.Body, http.StatusOK)
		if len(e.JSON200.Items) != 0 {
			t.Fatalf("B sees %d of A's events", len(e.JSON200.Items))
		}
		p, err := b.ListPoliciesWithResponse(h.ctx)
		mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
		for _, x := range p.JSON200.Items {
			if x.Id == pol.Id {
				t.Fatal("B sees A's policy")
			}
		}
	})
	t.Run("AStillHasEverything", func(t *testing.T) {
		g, err := a.GetScheduleWithResponse(h.ctx, s.Id)
		mustStatus(t, err, g.StatusCode(), g.Body, http.StatusOK)
		if g.JSON200.Name != "a-sched" || g.JSON200.State != client.ScheduleStateActive {
			t.Fatalf("A's schedule changed: %s", g.Body)
		}
		p, err := a.GetPolicyWithResponse(h.ctx, pol.Id)
		mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
		if p.JSON200.MaxInFlight != 5 {
			t.Fatal("A's policy changed")
		}
	})
}

// tenantIDOf finds the tenant of a client by creating a policy and reading it
// back from the store.
func (h *harness) tenantIDOf(c *client.ClientWithResponses) (string, error) {
	h.t.Helper()
	p := h.policy(c, "probe-"+newTestID(), 1)
	return h.storedPolicyTenant(p.Id), nil
}

func mustProblem(t *testing.T, body []byte) client.Problem {
	t.Helper()
	var p client.Problem
	if err := jsonUnmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRateLimit(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	advance := clock.Advance
	h := newHarness(t, func(c *master.Config, d *master.Deps) {
		c.RateLimit = master.RateLimit{PerSecond: 1, Burst: 3}
		d.Clock = clock
	})
	_, a := h.tenant("a")
	advance(time.Hour) // refill the admin's bucket
	_, b := h.tenant("b")
	advance(time.Hour)
	t.Run("Answers429WithRetryAfter", func(t *testing.T) {
		for i := range 3 {
			r, err := a.ListPoliciesWithResponse(h.ctx)
			mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
			_ = i
		}
		r, err := a.ListPoliciesWithResponse(h.ctx)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusTooManyRequests, "")
		ra, _ := strconv.Atoi(r.HTTPResponse.Header.Get("Retry-After"))
		if ra < 1 {
			t.Fatalf("Retry-After %q", r.HTTPResponse.Header.Get("Retry-After"))
		}
	})
	t.Run("OtherTenantUnaffected", func(t *testing.T) {
		r, err := b.ListPoliciesWithResponse(h.ctx)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	})
	t.Run("RefillsOverTime", func(t *testing.T) {
		advance(time.Second)
		r, err := a.ListPoliciesWithResponse(h.ctx)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	})
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   master.Config
		field string
	}{
		{"RequiresPartitions", master.Config{}, "Partitions"},
		{"RejectsShortAdminKey", master.Config{Partitions: 1, AdminKey: "short"}, "AdminKey"},
		{"RejectsBodyLimitBelowPayload", master.Config{Partitions: 1, MaxBodyBytes: 1000}, "MaxBodyBytes"},
		{"RejectsBurstlessRateLimit", master.Config{Partitions: 1, RateLimit: master.RateLimit{PerSecond: 5}}, "RateLimit.Burst"},
		{"RejectsInvalidTargetAllowCIDR", master.Config{Partitions: 1, TargetAllowCIDRs: []netip.Prefix{{}}}, "TargetAllowCIDRs[0]"},
		{"RejectsInvalidTargetDenyCIDR", master.Config{Partitions: 1, TargetDenyCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}}}, "TargetDenyCIDRs[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := master.New(tc.cfg, master.Deps{Store: nil})
			if err == nil || !containsStr(err.Error(), tc.field) {
				t.Fatalf("error %v does not name %s", err, tc.field)
			}
		})
	}
}
