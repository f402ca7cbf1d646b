package master_test

import (
	"net/http"
	"testing"

	"github.com/schedulerd/schedulerd/client"
)

func TestPolicyConcurrencyKey(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")

	t.Run("CreateUpdateShow", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "k1", MaxInFlight: 2,
			ConcurrencyKey: ptr("/customerId"), MaxInFlightTotal: ptr(10)})
		if err != nil || r.JSON201 == nil {
			t.Fatalf("create: %v %s", err, r.Body)
		}
		p := r.JSON201
		if p.ConcurrencyKey == nil || *p.ConcurrencyKey != "/customerId" || p.MaxInFlightTotal == nil || *p.MaxInFlightTotal != 10 {
			t.Fatalf("key %v total %v, want /customerId and 10", p.ConcurrencyKey, p.MaxInFlightTotal)
		}
		u, err := c.UpdatePolicyWithResponse(h.ctx, p.Id, client.PolicyUpdate{ConcurrencyKey: ptr("scheduleId")})
		if err != nil || u.JSON200 == nil {
			t.Fatalf("update: %v %s", err, u.Body)
		}
		if *u.JSON200.ConcurrencyKey != "scheduleId" || *u.JSON200.MaxInFlightTotal != 10 {
			t.Fatalf("after update: key %v total %v", *u.JSON200.ConcurrencyKey, *u.JSON200.MaxInFlightTotal)
		}
		// Lowering the per-key bound keeps the total valid.
		u, err = c.UpdatePolicyWithResponse(h.ctx, p.Id, client.PolicyUpdate{MaxInFlight: ptr(20)})
		wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "maxInFlight")
		// "" removes the key and the total.
		u, _ = c.UpdatePolicyWithResponse(h.ctx, p.Id, client.PolicyUpdate{ConcurrencyKey: ptr("")})
		if u.JSON200 == nil || u.JSON200.ConcurrencyKey != nil || u.JSON200.MaxInFlightTotal != nil {
			t.Fatalf("after removing the key: %s", u.Body)
		}
		g, _ := c.GetPolicyWithResponse(h.ctx, p.Id)
		if g.JSON200 == nil || g.JSON200.ConcurrencyKey != nil {
			t.Fatalf("get after removing the key: %s", g.Body)
		}
	})

	bad := []struct {
		name, body, field string
	}{
		{"NotAPointer", `{"name":"b","maxInFlight":1,"concurrencyKey":"customerId"}`, "concurrencyKey"},
		{"BadEscape", `{"name":"b","maxInFlight":1,"concurrencyKey":"/a~2"}`, "concurrencyKey"},
		{"TrailingTilde", `{"name":"b","maxInFlight":1,"concurrencyKey":"/a~"}`, "concurrencyKey"},
		{"TotalWithoutKey", `{"name":"b","maxInFlight":1,"maxInFlightTotal":5}`, "maxInFlightTotal"},
		{"TotalBelowPerKey", `{"name":"b","maxInFlight":5,"concurrencyKey":"/c","maxInFlightTotal":4}`, "maxInFlightTotal"},
		{"NegativeTotal", `{"name":"b","maxInFlight":1,"concurrencyKey":"/c","maxInFlightTotal":-1}`, "maxInFlightTotal"},
		{"HugeTotal", `{"name":"b","maxInFlight":1,"concurrencyKey":"/c","maxInFlightTotal":1000000000}`, "maxInFlightTotal"},
	}
	for _, tc := range bad {
		t.Run("Create"+tc.name, func(t *testing.T) {
			r, err := c.CreatePolicyWithBodyWithResponse(h.ctx, nil, "application/json", stringsReader(tc.body))
			wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, tc.field)
		})
	}
	t.Run("UpdateTotalWithoutKey", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "plain", MaxInFlight: 1})
		if err != nil || r.JSON201 == nil {
			t.Fatalf("create: %v %s", err, r.Body)
		}
		u, err := c.UpdatePolicyWithResponse(h.ctx, r.JSON201.Id, client.PolicyUpdate{MaxInFlightTotal: ptr(5)})
		wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "maxInFlightTotal")
	})
}

// An adaptive policy has one limit; a keyed policy bounds each key value:
// the two do not combine.
func TestPolicyAdaptiveAndKeyRefused(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "both", MaxInFlight: 10,
		ConcurrencyKey: ptr("/customerId"), Adaptive: &client.AdaptiveLimit{Min: 2}})
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "adaptive")
}
