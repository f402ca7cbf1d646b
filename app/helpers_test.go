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

// apiCall sends a JSON request to the running app with key (none if empty)
// and fails the test unless it answers want; it returns the decoded body.
type apiCall func(method, key, path string, body any, want int) map[string]any

// runApp starts the app configured by env (SCHEDULER_* variables) on
// 127.0.0.1:0 with a data directory in t.TempDir(), shuts it down at the
// end of the test, and returns it with a caller of its API.
func runApp(t testing.TB, env map[string]string) (*app.App, apiCall) {
	t.Helper()
	return runAppWith(t, env, app.Hooks{})
}

// runAppWith is runApp with test hooks.
func runAppWith(t testing.TB, env map[string]string, hooks app.Hooks) (*app.App, apiCall) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	a := startApp(t, ctx, env, hooks)
	t.Cleanup(func() {
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return a, caller(t, ctx, "http://"+a.Addr())
}

// startApp starts the app as runApp does, and leaves shutting it down to
// the test.
func startApp(t testing.TB, ctx context.Context, env map[string]string, hooks app.Hooks) *app.App {
	t.Helper()
	return startAppLog(t, ctx, env, hooks, zerolog.Nop())
}

// startAppLog is startApp logging to log.
func startAppLog(t testing.TB, ctx context.Context, env map[string]string, hooks app.Hooks, log zerolog.Logger) *app.App {
	t.Helper()
	all := map[string]string{"SCHEDULER_LISTEN_ADDR": "127.0.0.1:0", "SCHEDULER_DATA_DIR": t.TempDir()}
	for k, v := range env {
		all[k] = v
	}
	cfg, err := app.ParseConfig(nil, func(k string) string { return all[k] })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.NewWithHooks(ctx, cfg, log, hooks)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return a
}

// caller returns an apiCall to the app at base.
func caller(t testing.TB, ctx context.Context, base string) apiCall {
	t.Helper()
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
	return call
}

// tenantKey creates a tenant through the admin API and returns a key of it.
func tenantKey(a *app.App, call apiCall) string {
	tenant := call(http.MethodPost, a.AdminKey(), "/v1/tenants", map[string]any{"name": "acme"}, http.StatusCreated)
	return call(http.MethodPost, a.AdminKey(), "/v1/tenants/"+tenant["id"].(string)+"/keys", nil, http.StatusCreated)["key"].(string)
}

// postKeyed POSTs body (JSON, none if empty) to the app a with key (none if
// empty) and an Idempotency-Key (none if empty), and fails the test unless
// it answers want (0: any 2xx); it returns the decoded answer and its
// headers.
func postKeyed(t testing.TB, ctx context.Context, a *app.App, key, path, body, idemKey string, want int) (map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a.Addr()+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if want == 0 && resp.StatusCode/100 != 2 || want != 0 && resp.StatusCode != want {
		t.Fatalf("POST %s: status %d: %v", path, resp.StatusCode, out)
	}
	return out, resp.Header
}
