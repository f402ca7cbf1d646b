package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
)

// TestDenyCIDRsRefuseTargetsOnSave checks the wiring of the SSRF rule: the
// deny list the deliverer is given also refuses, on save, a target whose
// host is an address literal inside it.
func TestDenyCIDRsRefuseTargetsOnSave(t *testing.T) {
	env := map[string]string{
		"SCHEDULER_LISTEN_ADDR":     "127.0.0.1:0",
		"SCHEDULER_DATA_DIR":        t.TempDir(),
		"SCHEDULER_HTTP_DENY_CIDRS": "127.0.0.0/8",
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
	schedule := func(url string) map[string]any {
		return map[string]any{"name": "s", "cron": "0 3 * * *", "target": map[string]any{"type": "http", "url": url}}
	}

	p := call(key, "/v1/schedules", schedule("http://127.1:8080/hook"), http.StatusUnprocessableEntity)
	errs, _ := p["errors"].([]any)
	if len(errs) != 1 || errs[0].(map[string]any)["field"] != "target.url" {
		t.Fatalf("problem %v does not name target.url alone", p)
	}
	call(key, "/v1/schedules", schedule("http://10.0.0.1:8080/hook"), http.StatusCreated)
}
