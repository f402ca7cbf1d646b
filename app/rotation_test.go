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
	"github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
)

// TestSigningSecretRotation rotates the signing secret of an embedded
// deployment the way docs/delivery.md says: restarted with "new,old", it
// still replays an idempotency record sealed under the old secret, still
// releases a token delivered before the restart (the store's token key
// was sealed under the old secret), and a consumer on 127.0.0.1 finds a
// delivery signed under both.
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
		return postKeyed(t, ctx, a, key, path, body, idemKey, 0)
	}

	type seen struct{ sig, ts, body string }
	got := make(chan seen, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- seen{r.Header.Get(httpdelivery.HeaderSignature), r.Header.Get(httpdelivery.HeaderTimestamp), string(body)}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	deliver := func(a *app.App, key, policy string) seen {
		t.Helper()
		body := `{"name":"s","cron":"0 3 * * *","eventCount":1,"target":{"type":"http","url":"` + hook.URL + `"}` + policy + `}`
		sched, _ := post(a, key, "/v1/schedules", body, "")
		post(a, key, "/v1/schedules/"+sched["id"].(string)+"/trigger", "", "")
		select {
		case s := <-got:
			return s
		case <-ctx.Done():
			t.Fatal("no delivery within a minute")
		}
		return seen{}
	}

	oldSecret, newSecret := "old-signing-secret-0123456789", "new-signing-secret-0123456789"
	a := start(oldSecret)
	tenant, _ := post(a, a.AdminKey(), "/v1/tenants", `{"name":"acme"}`, "")
	tid, _ := tenant["id"].(string)
	first, _ := post(a, a.AdminKey(), "/v1/tenants/"+tid+"/keys", "", "k-1")
	key, _ := first["key"].(string)
	// A delivery whose token is released after the restart.
	pol, _ := post(a, key, "/v1/policies", `{"name":"p","maxInFlight":1,"tokenTimeout":"10m"}`, "")
	var before delivery.Message
	if err := json.Unmarshal([]byte(deliver(a, key, `,"policyId":"`+pol["id"].(string)+`"`).body), &before); err != nil {
		t.Fatal(err)
	}
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
	if key == "" || again["key"] != key || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after the rotation answered %v (replayed %q), want the first answer %v", again, h.Get("Idempotent-Replayed"), first)
	}
	released, _ := post(b, "", "/v1/events/"+before.EventID+"/release", `{"token":"`+before.Release.Token+`"}`, "")
	if released["status"] != "released" {
		t.Fatalf("release after the rotation of a token sent before: %v", released)
	}

	s := deliver(b, key, "")
	for _, secret := range []string{newSecret, oldSecret} {
		if _, err := consumer.NewVerifier(secret).Verify(s.sig, s.ts, []byte(s.body)); err != nil {
			t.Errorf("consumer checking with %q: %v (header %q)", secret, err, s.sig)
		}
	}
}

// TestSigningSecretList: -signing-secret is a comma-separated list whose
// items must not be empty; the error names the flag.
func TestSigningSecretList(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int // secrets; 0: refused
	}{
		{"one-secret", 1},
		{"new-secret, old-secret", 2},
		{"new-secret,,old-secret", 0},
		{"new-secret,", 0},
	} {
		env := map[string]string{"SCHEDULER_SIGNING_SECRET": tc.value}
		_, err := app.ParseConfig(nil, func(k string) string { return env[k] })
		secrets, splitErr := app.SigningSecrets(tc.value)
		switch {
		case tc.want == 0 && (err == nil || !strings.Contains(err.Error(), "signing-secret")):
			t.Errorf("%q: ParseConfig error %v, want one naming signing-secret", tc.value, err)
		case tc.want > 0 && (err != nil || splitErr != nil || len(secrets) != tc.want):
			t.Errorf("%q: %d secrets, errors %v, %v; want %d", tc.value, len(secrets), err, splitErr, tc.want)
		}
	}
}

// TestSigningSecretChangedWithoutTheOld: an embedded store started with a
// signing secret list none of whose secrets sealed its token key refuses
// to start, naming the flag, rather than give its events other tokens.
func TestSigningSecretChangedWithoutTheOld(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newApp := func(secret string) (*app.App, error) {
		env := map[string]string{"SCHEDULER_LISTEN_ADDR": "127.0.0.1:0", "SCHEDULER_DATA_DIR": dir, "SCHEDULER_SIGNING_SECRET": secret}
		cfg, err := app.ParseConfig(nil, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return app.New(ctx, cfg, zerolog.Nop())
	}
	a, err := newApp("first-signing-secret-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := newApp("other-signing-secret-0123456789"); err == nil || !strings.Contains(err.Error(), "signing-secret") {
		if b != nil {
			_ = b.Shutdown(ctx)
		}
		t.Fatalf("start with another secret: %v, want an error naming signing-secret", err)
	}
}
