package app_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// TestIdempotentKeyReplaysAfterRestart checks the wiring of the key that
// seals idempotency records: it comes from the data directory's signing
// secret, so a retry after a restart still gets the first answer's API key,
// and the record the store keeps does not hold that key in clear.
func TestIdempotentKeyReplaysAfterRestart(t *testing.T) {
	env := map[string]string{"SCHEDULER_LISTEN_ADDR": "127.0.0.1:0", "SCHEDULER_DATA_DIR": t.TempDir()}
	cfg, err := app.ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := func() *app.App {
		t.Helper()
		a, err := app.New(ctx, cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return a
	}
	post := func(a *app.App, path, body, idemKey string) (map[string]any, http.Header) {
		t.Helper()
		return postKeyed(t, ctx, a, a.AdminKey(), path, body, idemKey, http.StatusCreated)
	}

	a := start()
	tenant, _ := post(a, "/v1/tenants", `{"name":"acme"}`, "")
	tid, _ := tenant["id"].(string)
	first, _ := post(a, "/v1/tenants/"+tid+"/keys", "", "k-1")
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	b := start()
	again, h := post(b, "/v1/tenants/"+tid+"/keys", "", "k-1")
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	clearKey, _ := first["key"].(string)
	if clearKey == "" || again["key"] != clearKey || again["id"] != first["id"] || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after restart answered %v (replayed %q), want the first answer %v", again, h.Get("Idempotent-Replayed"), first)
	}

	// The record at rest holds no clear key.
	st, err := embedded.Open(env["SCHEDULER_DATA_DIR"], embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.IdempotencyGet(ctx, "admin", "k-1")
	if err != nil {
		t.Fatalf("IdempotencyGet: %v", err)
	}
	prefix, _ := first["prefix"].(string)
	if secret := strings.TrimPrefix(clearKey, prefix); len(secret) < 16 || bytes.Contains(rec.Body, []byte(secret)) {
		t.Fatalf("stored idempotency record holds the clear key: %q", rec.Body)
	}
}
