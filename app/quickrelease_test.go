package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
)

// A consumer on 127.0.0.1 releases each event inside its handler, before it
// answers: the release is written before the delivery's outcome (which
// waits for the answer and then for the outcome linger). The event still
// ends released with its attempt counted and deliveredAt set, and the
// summary samples its lateness; unthrottled (the release finishes a
// scheduled event) and throttled (it releases a delivering one) alike.
func TestReleaseBeforeAnswerKeepsDelivery(t *testing.T) {
	for _, throttled := range []bool{false, true} {
		t.Run(fmt.Sprintf("throttled=%v", throttled), func(t *testing.T) {
			a, call := runApp(t, map[string]string{
				"SCHEDULER_HTTP_ALLOW_CIDRS": "127.0.0.0/8", "SCHEDULER_LOG_LEVEL": "warn",
				"SCHEDULER_OUTCOME_LINGER": "200ms",
			})
			key := tenantKey(a, call)
			released := make(chan string, 1)
			consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var m delivery.Message
				if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
					t.Errorf("consumer: bad body: %v", err)
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				body, _ := json.Marshal(map[string]string{"token": m.Release.Token})
				resp, err := http.Post(m.Release.URL, "application/json", bytes.NewReader(body))
				if err != nil {
					t.Errorf("release %s: %v", m.EventID, err)
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				var st struct{ Status string }
				_ = json.NewDecoder(resp.Body).Decode(&st)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || st.Status != "released" {
					t.Errorf("release %s: status %d %q, want 200 released", m.EventID, resp.StatusCode, st.Status)
				}
				w.WriteHeader(http.StatusOK)
				released <- m.EventID
			}))
			defer consumer.Close()

			sched := map[string]any{
				"name": "s", "cron": "0 3 * * *", "eventCount": 1,
				"target": map[string]any{"type": "http", "url": consumer.URL + "/hook"},
			}
			if throttled {
				pol := call(http.MethodPost, key, "/v1/policies", map[string]any{"name": "p", "maxInFlight": 1, "tokenTimeout": "10m"}, http.StatusCreated)
				sched["policyId"] = pol["id"]
			}
			s := call(http.MethodPost, key, "/v1/schedules", sched, http.StatusCreated)
			call(http.MethodPost, key, "/v1/schedules/"+s["id"].(string)+"/trigger", nil, http.StatusAccepted)
			var id string
			select {
			case id = <-released:
			case <-time.After(30 * time.Second):
				t.Fatal("the event was not delivered within 30s")
			}
			// The handler counts the delivery once its outcome is
			// written (or recorded on the released event).
			deadline := time.Now().Add(10 * time.Second)
			for n, _ := metric(a, "schedulerd_events_delivered_total"); n < 1; n, _ = metric(a, "schedulerd_events_delivered_total") {
				if time.Now().After(deadline) {
					t.Fatal("the delivery's outcome was not written within 10s")
				}
				time.Sleep(10 * time.Millisecond) // polling the app's metrics
			}

			e := call(http.MethodGet, key, "/v1/events/"+id, nil, http.StatusOK)
			if e["status"] != "released" {
				t.Errorf("status %v, want released", e["status"])
			}
			if n, _ := e["attempts"].(float64); n < 1 {
				t.Errorf("attempts %v, want at least 1", e["attempts"])
			}
			if _, ok := e["deliveredAt"].(string); !ok {
				t.Errorf("no deliveredAt: %v", e)
			}
			if _, ok := e["finishedAt"].(string); !ok {
				t.Errorf("no finishedAt: %v", e)
			}
			sum := call(http.MethodGet, key, "/v1/summary", nil, http.StatusOK)
			if late, _ := sum["lateness"].(map[string]any); late["sampled"] != float64(1) {
				t.Errorf("summary lateness %v, want 1 event sampled", sum["lateness"])
			}
		})
	}
}
