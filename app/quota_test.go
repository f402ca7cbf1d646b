package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
)

// TestEmitterQuotaWiring checks that the emitter gets the configured
// maxEventsPerMinute: a trigger of more events than the quota is recorded,
// held back, and its note says why.
func TestEmitterQuotaWiring(t *testing.T) {
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(consumer.Close)
	env := map[string]string{
		"SCHEDULER_LISTEN_ADDR":                  "127.0.0.1:0",
		"SCHEDULER_DATA_DIR":                     t.TempDir(),
		"SCHEDULER_HTTP_DENY_CIDRS":              "192.0.2.0/24",
		"SCHEDULER_TENANT_MAX_EVENTS_PER_MINUTE": "5",
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
	call := func(key, path string, body any, want int) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != want {
			t.Fatalf("POST %s: status %d, want %d: %v", path, resp.StatusCode, want, out)
		}
		return out
	}
	tenant := call(a.AdminKey(), "/v1/tenants", map[string]any{"name": "acme"}, http.StatusCreated)
	key := call(a.AdminKey(), "/v1/tenants/"+tenant["id"].(string)+"/keys", nil, http.StatusCreated)["key"].(string)
	s := call(key, "/v1/schedules", map[string]any{
		"name": "s", "cron": "0 3 1 1 *", "eventCount": 6,
		"target": map[string]any{"type": "http", "url": consumer.URL + "/hook"},
	}, http.StatusCreated)
	f := call(key, "/v1/schedules/"+s["id"].(string)+"/trigger", nil, http.StatusAccepted)
	if note, _ := f["note"].(string); !strings.Contains(note, "deferred: tenant over maxEventsPerMinute (5)") || f["emitting"] != true {
		t.Fatalf("trigger of 6 events with a quota of 5 = %v, want a deferred fire still emitting", f)
	}
}
