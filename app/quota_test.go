package app_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEmitterQuotaWiring checks that the emitter gets the configured
// maxEventsPerMinute: a trigger of more events than the quota is recorded,
// held back, and its note says why.
func TestEmitterQuotaWiring(t *testing.T) {
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(consumer.Close)
	env := map[string]string{
		"SCHEDULER_HTTP_DENY_CIDRS":              "192.0.2.0/24",
		"SCHEDULER_TENANT_MAX_EVENTS_PER_MINUTE": "5",
	}
	a, call := runApp(t, env)
	key := tenantKey(a, call)
	s := call(http.MethodPost, key, "/v1/schedules", map[string]any{
		"name": "s", "cron": "0 3 1 1 *", "eventCount": 6,
		"target": map[string]any{"type": "http", "url": consumer.URL + "/hook"},
	}, http.StatusCreated)
	f := call(http.MethodPost, key, "/v1/schedules/"+s["id"].(string)+"/trigger", nil, http.StatusAccepted)
	if note, _ := f["note"].(string); !strings.Contains(note, "deferred: tenant over maxEventsPerMinute (5)") || f["emitting"] != true {
		t.Fatalf("trigger of 6 events with a quota of 5 = %v, want a deferred fire still emitting", f)
	}
}
