package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
)

// TestDiskGuardWiring checks that the app probes the data directory's disk:
// with a threshold of the whole disk (100%, and bytes beyond any disk) the
// disk is always "nearly full", so new schedules answer 507, /readyz stays
// ready and says why, and the rest of the API answers as usual.
func TestDiskGuardWiring(t *testing.T) {
	env := map[string]string{
		"SCHEDULER_LISTEN_ADDR":           "127.0.0.1:0",
		"SCHEDULER_DATA_DIR":              t.TempDir(),
		"SCHEDULER_DISK_MIN_FREE_BYTES":   "9223372036854775807",
		"SCHEDULER_DISK_MIN_FREE_PERCENT": "100",
	}
	cfg, err := app.ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := app.New(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	base := "http://" + a.Addr()
	call := func(method, key, path string, body any, want int) map[string]any {
		t.Helper()
		var r *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			r = bytes.NewReader(b)
		} else {
			r = bytes.NewReader(nil)
		}
		req, _ := http.NewRequestWithContext(ctx, method, base+path, r)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: status %d, want %d: %v", method, path, resp.StatusCode, want, out)
		}
		return out
	}
	tenant := call(http.MethodPost, a.AdminKey(), "/v1/tenants", map[string]any{"name": "acme"}, http.StatusCreated)
	key := call(http.MethodPost, a.AdminKey(), "/v1/tenants/"+tenant["id"].(string)+"/keys", nil, http.StatusCreated)["key"].(string)

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
