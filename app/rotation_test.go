package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
)

// TestSigningSecretRotation rotates the signing secret of an embedded
// deployment the way docs/delivery.md says: restarted with "new,old", it
// still replays an idempotency record sealed under the old secret, and a
// consumer on 127.0.0.1 finds a delivery signed under both.
func TestSigningSecretRotation(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := func(secret string) *app.App {
		t.Helper()
		env := map[string]string{"SCHEDULER_LISTEN_ADDR": "127.0.0.1:0", "SCHEDULER_DATA_DIR": dir,
			"SCHEDULER_SIGNING_SECRET": secret, "SCHEDULER_HTTP_ALLOW_CIDRS": "127.0.0.0/8", "SCHEDULER_LOG_LEVEL": "warn"}
		cfg, err := app.ParseConfig(nil, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(ctx, cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return a
	}
	post := func(a *app.App, key, path, body, idemKey string) (map[string]any, http.Header) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a.Addr()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
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
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: status %d: %v", path, resp.StatusCode, out)
		}
		return out, resp.Header
	}

	oldSecret, newSecret := "old-signing-secret-0123456789", "new-signing-secret-0123456789"
	a := start(oldSecret)
	tenant, _ := post(a, a.AdminKey(), "/v1/tenants", `{"name":"acme"}`, "")
	tid, _ := tenant["id"].(string)
	first, _ := post(a, a.AdminKey(), "/v1/tenants/"+tid+"/keys", "", "k-1")
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	b := start(newSecret + "," + oldSecret)
	defer func() {
		if err := b.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	again, h := post(b, b.AdminKey(), "/v1/tenants/"+tid+"/keys", "", "k-1")
	key, _ := first["key"].(string)
	if key == "" || again["key"] != key || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after the rotation answered %v (replayed %q), want the first answer %v", again, h.Get("Idempotent-Replayed"), first)
	}

	type seen struct{ sig, ts, body string }
	got := make(chan seen, 1)
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- seen{r.Header.Get(httpdelivery.HeaderSignature), r.Header.Get(httpdelivery.HeaderTimestamp), string(body)}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer consumer.Close()
	sched, _ := post(b, key, "/v1/schedules", `{"name":"s","cron":"0 3 * * *","eventCount":1,"target":{"type":"http","url":"`+consumer.URL+`"}}`, "")
	post(b, key, "/v1/schedules/"+sched["id"].(string)+"/trigger", "", "")
	var s seen
	select {
	case s = <-got:
	case <-ctx.Done():
		t.Fatal("no delivery within a minute")
	}
	for _, secret := range []string{newSecret, oldSecret} {
		if err := httpdelivery.Verify([]byte(secret), s.sig, s.ts, []byte(s.body), time.Now(), 5*time.Minute); err != nil {
			t.Errorf("consumer checking with %q: %v (header %q)", secret, err, s.sig)
		}
	}
}
