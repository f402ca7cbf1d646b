package app_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A fire of 3 events on a policy of 1 token, with a 2 s deadline and
// onDeadline expire, to a consumer on 127.0.0.1 that keeps the token of
// the first: at the deadline the two waiting events expire (never sent),
// the fire records the miss with 3 left, and the metric counts it once.
func TestDeadlineMissedEndToEnd(t *testing.T) {
	a, call := runApp(t, map[string]string{"SCHEDULER_HTTP_ALLOW_CIDRS": "127.0.0.0/8", "SCHEDULER_LOG_LEVEL": "warn"})
	key := tenantKey(a, call)
	var got atomic.Int64
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got.Add(1) // keeps the token: never releases
	}))
	defer consumer.Close()
	pol := call(http.MethodPost, key, "/v1/policies", map[string]any{"name": "p", "maxInFlight": 1, "tokenTimeout": "10m"}, http.StatusCreated)
	s := call(http.MethodPost, key, "/v1/schedules", map[string]any{
		"name": "s", "cron": "0 3 * * *", "eventCount": 3, "policyId": pol["id"], "deadline": "2s", "onDeadline": "expire",
		"target": map[string]any{"type": "http", "url": consumer.URL + "/hook"},
	}, http.StatusCreated)
	f := call(http.MethodPost, key, "/v1/schedules/"+s["id"].(string)+"/trigger", nil, http.StatusAccepted)
	fireID := f["id"].(string)
	if f["deadline"] == nil {
		t.Fatalf("the fire has no deadline: %v", f)
	}

	var fire map[string]any
	until := time.Now().Add(30 * time.Second)
	for fire = call(http.MethodGet, key, "/v1/fires/"+fireID, nil, http.StatusOK); fire["deadlineMissed"] == nil; fire = call(http.MethodGet, key, "/v1/fires/"+fireID, nil, http.StatusOK) {
		if time.Now().After(until) {
			t.Fatalf("no deadlineMissed within 30s: %v", fire)
		}
		time.Sleep(50 * time.Millisecond) // polling the API
	}
	miss := fire["deadlineMissed"].(map[string]any)
	counts := fire["counts"].(map[string]any)
	if miss["remaining"].(float64) != 3 || counts["expired"].(float64) != 2 || counts["delivered"].(float64) != 1 {
		t.Fatalf("deadlineMissed %v, counts %v; want 3 remaining, 2 expired, 1 delivered", miss, counts)
	}
	if n := got.Load(); n != 1 {
		t.Fatalf("the consumer got %d deliveries, want 1: expired events are never sent", n)
	}
	name := `schedulerd_fire_deadline_missed_total{policy="` + pol["id"].(string) + `"}`
	if v, ok := metric(a, name); !ok || v != 1 {
		t.Fatalf("%s = %v (%v), want 1", name, v, ok)
	}
}
