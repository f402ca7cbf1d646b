package master_test

import (
	"net/http"
	"testing"

	"github.com/schedulerd/schedulerd/client"
)

func TestPolicyRate(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")

	t.Run("CreateShowsRateAndDefaultBurst", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "r1", MaxInFlight: 5, RatePerSecond: ptr(2.5)})
		if err != nil || r.JSON201 == nil {
			t.Fatalf("create: %v %s", err, r.Body)
		}
		p := r.JSON201
		if p.RatePerSecond == nil || *p.RatePerSecond != 2.5 || p.Burst == nil || *p.Burst != 3 {
			t.Fatalf("rate %v burst %v, want 2.5 and ceil(2.5) = 3", p.RatePerSecond, p.Burst)
		}
		// A default burst follows the rate.
		u, err := c.UpdatePolicyWithResponse(h.ctx, p.Id, client.PolicyUpdate{RatePerSecond: ptr(7.2)})
		if err != nil || u.JSON200 == nil {
			t.Fatalf("update: %v %s", err, u.Body)
		}
		if *u.JSON200.RatePerSecond != 7.2 || *u.JSON200.Burst != 8 {
			t.Fatalf("after update: rate %v burst %v, want 7.2 and 8", *u.JSON200.RatePerSecond, *u.JSON200.Burst)
		}
		// A burst that was set stays when the rate changes.
		u, _ = c.UpdatePolicyWithResponse(h.ctx, p.Id, client.PolicyUpdate{Burst: ptr(20)})
		if u.JSON200 == nil || *u.JSON200.Burst != 20 {
			t.Fatalf("burst update: %s", u.Body)
		}
		u, _ = c.UpdatePolicyWithResponse(h.ctx, p.Id, client.PolicyUpdate{RatePerSecond: ptr(1.0)})
		if u.JSON200 == nil || *u.JSON200.Burst != 20 {
			t.Fatalf("burst after a rate change: %s", u.Body)
		}
		// 0 removes the rate and the burst.
		u, _ = c.UpdatePolicyWithResponse(h.ctx, p.Id, client.PolicyUpdate{RatePerSecond: ptr(0.0)})
		if u.JSON200 == nil || u.JSON200.RatePerSecond != nil || u.JSON200.Burst != nil {
			t.Fatalf("after removing the rate: %s", u.Body)
		}
		g, _ := c.GetPolicyWithResponse(h.ctx, p.Id)
		if g.JSON200 == nil || g.JSON200.RatePerSecond != nil {
			t.Fatalf("get after removing the rate: %s", g.Body)
		}
	})

	t.Run("NoRateByDefault", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "plain", MaxInFlight: 5})
		if err != nil || r.JSON201 == nil {
			t.Fatalf("create: %v %s", err, r.Body)
		}
		if r.JSON201.RatePerSecond != nil || r.JSON201.Burst != nil {
			t.Fatalf("a policy without a rate shows rate %v burst %v", r.JSON201.RatePerSecond, r.JSON201.Burst)
		}
	})

	bad := []struct {
		name, body, field string
	}{
		{"ZeroRate", `{"name":"b","maxInFlight":1,"ratePerSecond":0}`, "ratePerSecond"},
		{"NegativeRate", `{"name":"b","maxInFlight":1,"ratePerSecond":-1}`, "ratePerSecond"},
		{"TinyRate", `{"name":"b","maxInFlight":1,"ratePerSecond":1e-9}`, "ratePerSecond"},
		{"HugeRate", `{"name":"b","maxInFlight":1,"ratePerSecond":1e12}`, "ratePerSecond"},
		{"ZeroBurst", `{"name":"b","maxInFlight":1,"ratePerSecond":5,"burst":0}`, "burst"},
		{"NegativeBurst", `{"name":"b","maxInFlight":1,"ratePerSecond":5,"burst":-3}`, "burst"},
		{"HugeBurst", `{"name":"b","maxInFlight":1,"ratePerSecond":5,"burst":1000000000}`, "burst"},
		{"BurstWithoutRate", `{"name":"b","maxInFlight":1,"burst":3}`, "burst"},
	}
	for _, tc := range bad {
		t.Run("Create"+tc.name, func(t *testing.T) {
			r, err := c.CreatePolicyWithBodyWithResponse(h.ctx, nil, "application/json", stringsReader(tc.body))
			wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, tc.field)
		})
	}
	t.Run("CreateOverflowingRate", func(t *testing.T) {
		// Not a float64 at all (the JSON form of +Inf): refused before the
		// checks, still naming the field.
		r, err := c.CreatePolicyWithBodyWithResponse(h.ctx, nil, "application/json", stringsReader(`{"name":"b","maxInFlight":1,"ratePerSecond":1e400}`))
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() < 400 || r.StatusCode() >= 500 || !containsStr(string(r.Body), "ratePerSecond") {
			t.Fatalf("status %d body %s, want a 4xx naming ratePerSecond", r.StatusCode(), r.Body)
		}
	})

	t.Run("UpdateRefusals", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "u1", MaxInFlight: 5})
		if err != nil || r.JSON201 == nil {
			t.Fatalf("create: %v %s", err, r.Body)
		}
		id := r.JSON201.Id
		u, err := c.UpdatePolicyWithResponse(h.ctx, id, client.PolicyUpdate{Burst: ptr(4)})
		wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "burst")
		u, err = c.UpdatePolicyWithResponse(h.ctx, id, client.PolicyUpdate{RatePerSecond: ptr(-2.0)})
		wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "ratePerSecond")
		u, err = c.UpdatePolicyWithResponse(h.ctx, id, client.PolicyUpdate{RatePerSecond: ptr(0.0), Burst: ptr(2)})
		wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "burst")
		g, _ := c.GetPolicyWithResponse(h.ctx, id)
		if g.JSON200 == nil || g.JSON200.RatePerSecond != nil || g.JSON200.Version != 1 {
			t.Fatalf("refused updates changed the policy: %s", g.Body)
		}
	})
}
