package app_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestDiskGuardWiring checks that the app probes the data directory's disk:
// with a threshold of the whole disk (100%, and bytes beyond any disk) the
// disk is always "nearly full", so new schedules answer 507, /readyz stays
// ready and says why, and the rest of the API answers as usual.
func TestDiskGuardWiring(t *testing.T) {
	env := map[string]string{
		"SCHEDULER_DISK_MIN_FREE_BYTES":   "9223372036854775807",
		"SCHEDULER_DISK_MIN_FREE_PERCENT": "100",
	}
	a, call := runApp(t, env)
	key := tenantKey(a, call)

	p := call(http.MethodPost, key, "/v1/schedules", map[string]any{
		"name": "s", "cron": "0 3 * * *", "target": map[string]any{"type": "http", "url": "https://consumer.example.com/hook"},
	}, http.StatusInsufficientStorage)
	if d, _ := p["detail"].(string); !strings.Contains(d, "below the threshold") {
		t.Fatalf("507 without the reason: %v", p)
	}
	ready := call(http.MethodGet, "", "/readyz", nil, http.StatusOK)
	checks, _ := ready["checks"].(map[string]any)
	if d, _ := checks["disk"].(string); !strings.Contains(d, "below the threshold") {
		t.Fatalf("/readyz does not say why: %v", ready)
	}
	call(http.MethodGet, key, "/v1/schedules", nil, http.StatusOK)
	// A release is not refused by the guard (an unknown event answers 404).
	call(http.MethodPost, "", "/v1/events/ev_unknown/release", map[string]any{"token": "rt_x"}, http.StatusNotFound)
}
