package app_test

import (
	"net/http"
	"testing"
	"time"
)

// TestBrakeMetrics: a consumer key's hold reaches the policy's owner in
// the running service, which exports the effective limit and its source.
func TestBrakeMetrics(t *testing.T) {
	a, call := runApp(t, map[string]string{"SCHEDULER_LOG_LEVEL": "warn"})
	key := tenantKey(a, call)
	pol := call(http.MethodPost, key, "/v1/policies", map[string]any{"name": "billing", "maxInFlight": 8}, http.StatusCreated)["id"].(string)
	ck := call(http.MethodPost, key, "/v1/policies/"+pol+"/consumer-keys", nil, http.StatusCreated)["key"].(string)
	status := call(http.MethodPost, ck, "/v1/policies/"+pol+"/hold",
		map[string]any{"until": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "maxInFlight": 1}, http.StatusOK)
	if status["effectiveLimit"] != float64(1) || status["limitSource"] != "hold" {
		t.Fatalf("hold answered %v", status)
	}
	call(http.MethodGet, ck, "/v1/policies", nil, http.StatusForbidden)
	// The owner picks the hold up at its next pass over its policies.
	source := `schedulerd_policy_limit_source{policy="` + pol + `",source="hold"}`
	limit := `schedulerd_policy_effective_limit{policy="` + pol + `"}`
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, ok1 := metric(a, source)
		l, ok2 := metric(a, limit)
		if ok1 && ok2 && s == 1 && l == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s 1 and %s 1 after 30s", source, limit)
		}
		time.Sleep(100 * time.Millisecond) // polling the exported gauges
	}
	call(http.MethodDelete, ck, "/v1/policies/"+pol+"/hold", nil, http.StatusOK)
	policySource := `schedulerd_policy_limit_source{policy="` + pol + `",source="policy"}`
	for {
		s, ok := metric(a, policySource)
		l, _ := metric(a, limit)
		if ok && s == 1 && l == 8 {
			break
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("no %s 1 after the hold ended", policySource)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, ok := metric(a, source); ok {
		t.Fatalf("%s still exported after the hold ended", source)
	}
}
