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
	"github.com/schedulerd/schedulerd/delivery"
)

// logSignal passes on the "completed schedules" log lines of the app.
type logSignal chan map[string]any

func (c logSignal) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"completed schedules"`)) {
		var m map[string]any
		if json.Unmarshal(p, &m) == nil {
			c <- m
		}
	}
	return len(p), nil
}

// TestOneOffCompletes: a one-off fires to a consumer on 127.0.0.1, which
// releases it; the schedule becomes completed, stops counting against
// maxSchedules (a tenant whose quota is 1 creates another), and is
// deleted with its fire after -completed-retention.
func TestOneOffCompletes(t *testing.T) {
	t.Parallel()
	deliveries := make(chan delivery.Message, 4)
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m delivery.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		deliveries <- m
	}))
	t.Cleanup(consumer.Close)

	env := map[string]string{
		"SCHEDULER_LISTEN_ADDR": "127.0.0.1:0", "SCHEDULER_DATA_DIR": t.TempDir(),
		"SCHEDULER_HTTP_ALLOW_CIDRS": "127.0.0.0/8", "SCHEDULER_COMPLETED_RETENTION": "3s",
	}
	cfg, err := app.ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	completions := make(logSignal, 16)
	a, err := app.New(ctx, cfg, zerolog.New(completions).Level(zerolog.InfoLevel))
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
	call := caller(t, ctx, "http://"+a.Addr())
	wait := func(what string, ok func(m map[string]any) bool) {
		t.Helper()
		for {
			select {
			case m := <-completions:
				if ok(m) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %s", what)
			}
		}
	}

	tenant := call(http.MethodPost, a.AdminKey(), "/v1/tenants", map[string]any{"name": "acme"}, http.StatusCreated)
	call(http.MethodPatch, a.AdminKey(), "/v1/tenants/"+tenant["id"].(string), map[string]any{"quotas": map[string]any{"maxSchedules": 1}}, http.StatusOK)
	key := call(http.MethodPost, a.AdminKey(), "/v1/tenants/"+tenant["id"].(string)+"/keys", nil, http.StatusCreated)["key"].(string)
	oneOff := func(name string, in time.Duration) map[string]any {
		return map[string]any{"name": name, "runAt": time.Now().Add(in).UTC().Format(time.RFC3339Nano),
			"target": map[string]any{"type": "http", "url": consumer.URL + "/hook"}}
	}
	// Due after the master's count of the tenant is stale (its
	// QuotaCountTTL, 5s), so that the create after the completion counts
	// again.
	first := call(http.MethodPost, key, "/v1/schedules", oneOff("first", 6*time.Second), http.StatusCreated)
	id := first["id"].(string)
	call(http.MethodPost, key, "/v1/schedules", oneOff("refused", time.Second), http.StatusUnprocessableEntity)

	var m delivery.Message
	select {
	case m = <-deliveries:
	case <-ctx.Done():
		t.Fatal("the one-off was not delivered")
	}
	if m.ScheduleID != id {
		t.Fatalf("delivered schedule %s, want %s", m.ScheduleID, id)
	}
	release := strings.TrimPrefix(m.Release.URL, "http://"+a.Addr())
	call(http.MethodPost, "", release, map[string]any{"token": m.Release.Token}, http.StatusOK)

	wait("completion", func(m map[string]any) bool { n, _ := m["completed"].(float64); return n > 0 })
	if got := call(http.MethodGet, key, "/v1/schedules/"+id, nil, http.StatusOK)["state"]; got != "completed" {
		t.Fatalf("state %v after the release, want completed", got)
	}
	second := call(http.MethodPost, key, "/v1/schedules", oneOff("second", time.Hour), http.StatusCreated)

	wait("deletion", func(m map[string]any) bool { n, _ := m["deleted"].(float64); return n > 0 })
	call(http.MethodGet, key, "/v1/schedules/"+id, nil, http.StatusNotFound)
	call(http.MethodGet, key, "/v1/fires/"+m.FireID, nil, http.StatusNotFound)
	call(http.MethodGet, key, "/v1/schedules/"+second["id"].(string), nil, http.StatusOK)
}

// TestCompletedRetentionFlag: -completed-retention defaults to -retention
// and is held to the same range.
func TestCompletedRetentionFlag(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want time.Duration
		err  string
	}{
		"DefaultsToRetention": {env: map[string]string{"SCHEDULER_RETENTION": "2h"}, want: 2 * time.Hour},
		"Own":                 {args: []string{"-completed-retention", "90m"}, want: 90 * time.Minute},
		"Env":                 {env: map[string]string{"SCHEDULER_COMPLETED_RETENTION": "3h"}, want: 3 * time.Hour},
		"RejectsHuge":         {args: []string{"-completed-retention", "1000000h"}, err: "completed-retention:"},
		"RejectsBad":          {args: []string{"-completed-retention", "soon"}, err: "completed-retention:"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := app.ParseConfig(tc.args, func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.CompletedRetention != tc.want {
				t.Fatalf("CompletedRetention %s, want %s", cfg.CompletedRetention, tc.want)
			}
		})
	}
}
