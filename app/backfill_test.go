package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
)

// TestBackfillDeliversAtThePolicysPace backfills half a day of an hourly
// schedule whose policy allows 2 events in flight into a consumer on
// 127.0.0.1 that holds each token until the test releases it: every event
// arrives once, and never more than 2 hold tokens at once.
func TestBackfillDeliversAtThePolicysPace(t *testing.T) {
	const maxInFlight, fires, perFire = 2, 12, 2
	a, call := runApp(t, map[string]string{"SCHEDULER_HTTP_ALLOW_CIDRS": "127.0.0.0/8", "SCHEDULER_LOG_LEVEL": "warn"})
	key := tenantKey(a, call)
	var (
		mu             sync.Mutex
		inFlight, most int
		seen           = map[string]bool{}
		dup            []string
		delivered      = make(chan delivery.Message, fires*perFire)
	)
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m delivery.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if seen[m.EventID] {
			dup = append(dup, m.EventID)
		}
		seen[m.EventID] = true
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
		delivered <- m
	}))
	defer consumer.Close()

	pol := call(http.MethodPost, key, "/v1/policies", map[string]any{"name": "slow", "maxInFlight": maxInFlight, "tokenTimeout": "10m"}, http.StatusCreated)
	s := call(http.MethodPost, key, "/v1/schedules", map[string]any{
		"name": "hourly", "cron": "0 * * * *", "eventCount": perFire, "policyId": pol["id"],
		"target": map[string]any{"type": "http", "url": consumer.URL + "/hook"},
	}, http.StatusCreated)
	to := time.Now().UTC().Truncate(time.Hour)
	out := call(http.MethodPost, key, "/v1/schedules/"+s["id"].(string)+"/backfill",
		map[string]any{"from": to.Add(-fires * time.Hour), "to": to}, http.StatusAccepted)
	if out["fires"] != float64(fires) || out["events"] != float64(fires*perFire) {
		t.Fatalf("backfill answered %v, want %d fires and %d events", out, fires, fires*perFire)
	}

	for range fires * perFire {
		var m delivery.Message
		select {
		case m = <-delivered:
		case <-time.After(30 * time.Second):
			t.Fatalf("not every backfilled event was delivered within 30s (%d seen)", len(seen))
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		body, _ := json.Marshal(map[string]string{"token": m.Release.Token})
		resp, err := http.Post(m.Release.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("release %s: status %d", m.EventID, resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most > maxInFlight || most < 1 || len(dup) > 0 || len(seen) != fires*perFire {
		t.Fatalf("at most %d in flight (limit %d), %d events seen, duplicates %v", most, maxInFlight, len(seen), dup)
	}
	t.Logf("at most %d of %d events in flight at once", most, len(seen))
}
