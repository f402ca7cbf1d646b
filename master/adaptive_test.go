package master_test

import (
	"net/http"
	"testing"

	"github.com/schedulerd/schedulerd/client"
)

func TestPolicyAdaptive(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")

	t.Run("CreateShowsLimitAtMax", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "a1", MaxInFlight: 50, Adaptive: &client.AdaptiveLimit{Min: 5}})
		if err != nil || r.JSON201 == nil {
			t.Fatalf("create: %v %s", err, r.Body)
		}
		p := r.JSON201
		if p.Adaptive == nil || p.Adaptive.Min != 5 || p.Adaptive.Max == nil || *p.Adaptive.Max != 50 {
			t.Fatalf("adaptive = %+v, want min 5 max 50", p.Adaptive)
		}
		if p.EffectiveLimit == nil || *p.EffectiveLimit != 50 || p.LimitReason == nil || *p.LimitReason != client.PolicyLimitReason("start") || p.LimitChangedAt == nil {
			t.Fatalf("effective limit %v reason %v at %v, want 50 start", p.EffectiveLimit, p.LimitReason, p.LimitChangedAt)
		}
		// maxInFlight stays the ceiling: lowering it lowers adaptive.max.
		u, err := c.UpdatePolicyWithResponse(h.ctx, p.Id, client.PolicyUpdate{MaxInFlight: ptr(20)})
		if err != nil || u.JSON200 == nil {
			t.Fatalf("update: %v %s", err, u.Body)
		}
		if u.JSON200.Adaptive == nil || *u.JSON200.Adaptive.Max != 20 || *u.JSON200.EffectiveLimit != 20 {
			t.Fatalf("after maxInFlight 20: adaptive %+v limit %v", u.JSON200.Adaptive, u.JSON200.EffectiveLimit)
		}
		// min 0 makes the limit fixed again.
		u, err = c.UpdatePolicyWithResponse(h.ctx, p.Id, client.PolicyUpdate{Adaptive: &client.AdaptiveLimit{Min: 0}})
		if err != nil || u.JSON200 == nil {
			t.Fatalf("update: %v %s", err, u.Body)
		}
		if u.JSON200.Adaptive != nil || u.JSON200.EffectiveLimit != nil || u.JSON200.LimitReason != nil || u.JSON200.MaxInFlight != 20 {
			t.Fatalf("after removing adaptive: %s", u.Body)
		}
	})

	t.Run("NotAdaptiveByDefault", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "plain", MaxInFlight: 5})
		if err != nil || r.JSON201 == nil {
			t.Fatalf("create: %v %s", err, r.Body)
		}
		if r.JSON201.Adaptive != nil || r.JSON201.EffectiveLimit != nil || r.JSON201.LimitReason != nil || r.JSON201.LimitChangedAt != nil {
			t.Fatalf("a fixed policy shows adaptive fields: %s", r.Body)
		}
	})

	bad := []struct {
		name, body, field string
	}{
		{"ZeroMin", `{"name":"b","maxInFlight":10,"adaptive":{"min":0}}`, "adaptive.min"},
		{"MinAboveMax", `{"name":"b","maxInFlight":10,"adaptive":{"min":11}}`, "adaptive.min"},
		{"MaxNotMaxInFlight", `{"name":"b","maxInFlight":10,"adaptive":{"min":1,"max":20}}`, "adaptive.max"},
	}
	for _, tc := range bad {
		t.Run("Create"+tc.name, func(t *testing.T) {
			r, err := c.CreatePolicyWithBodyWithResponse(h.ctx, nil, "application/json", stringsReader(tc.body))
			wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, tc.field)
		})
	}

	t.Run("UpdateRefusals", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "u1", MaxInFlight: 10, Adaptive: &client.AdaptiveLimit{Min: 4}})
		if err != nil || r.JSON201 == nil {
			t.Fatalf("create: %v %s", err, r.Body)
		}
		id := r.JSON201.Id
		u, err := c.UpdatePolicyWithResponse(h.ctx, id, client.PolicyUpdate{MaxInFlight: ptr(3)})
		wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "maxInFlight")
		u, err = c.UpdatePolicyWithResponse(h.ctx, id, client.PolicyUpdate{Adaptive: &client.AdaptiveLimit{Min: 0, Max: ptr(10)}})
		wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "adaptive.max")
		u, err = c.UpdatePolicyWithResponse(h.ctx, id, client.PolicyUpdate{Adaptive: &client.AdaptiveLimit{Min: 2, Max: ptr(9)}})
		wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "adaptive.max")
		g, _ := c.GetPolicyWithResponse(h.ctx, id)
		if g.JSON200 == nil || g.JSON200.Version != 1 || g.JSON200.Adaptive == nil || g.JSON200.Adaptive.Min != 4 {
			t.Fatalf("refused updates changed the policy: %s", g.Body)
		}
	})
}
