package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/model"
)

var secret = []byte("example-secret")

// releaseCall is what the fake scheduler's release endpoint received.
type releaseCall struct {
	path  string
	token string
}

// newScheduler starts a stand-in for schedulerd's release endpoint that
// reports each release call on the returned channel.
func newScheduler(t *testing.T) (*httptest.Server, <-chan releaseCall) {
	t.Helper()
	calls := make(chan releaseCall, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Token string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Method != http.MethodPost {
			http.Error(w, "bad release request", http.StatusBadRequest)
			return
		}
		calls <- releaseCall{path: r.URL.Path, token: req.Token}
		_, _ = io.WriteString(w, `{"status":"released"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, calls
}

func TestConsumer(t *testing.T) {
	scheduler, releases := newScheduler(t)
	worked := make(chan *consumer.Delivery, 8)
	c := NewConsumer(context.Background(), secret, func(_ context.Context, d *consumer.Delivery) error {
		worked <- d
		return nil
	})
	consumer := httptest.NewServer(c)
	t.Cleanup(consumer.Close)
	t.Cleanup(c.Wait)

	t.Run("VerifiesWorksAndReleases", func(t *testing.T) {
		// A real delivery from the real transport, signed with the secret.
		d, err := httpdelivery.New(httpdelivery.Config{SigningSecret: secret, ReleaseBaseURL: scheduler.URL})
		if err != nil {
			t.Fatal(err)
		}
		e := &model.Event{
			ID: "sch_1.1772366400.v1.0", ScheduleID: "sch_1", FireID: "sch_1.1772366400.v1",
			FireTime: time.Now(), Count: 1, ReleaseToken: "tok-123",
			Target:  model.Target{Type: model.TargetHTTP, URL: consumer.URL + "/jobs"},
			Payload: json.RawMessage(`{"job":"report"}`),
		}
		res := d.Deliver(context.Background(), []*model.Event{e})[0]
		if res.Err != nil || res.StatusCode != http.StatusAccepted {
			t.Fatalf("delivery result = %+v, want 202", res)
		}
		m := waitFor(t, worked)
		if m.EventID != e.ID || string(m.Payload) != `{"job":"report"}` {
			t.Errorf("worked on %+v", m)
		}
		call := waitFor(t, releases)
		if call.path != "/v1/events/"+e.ID+"/release" || call.token != "tok-123" {
			t.Errorf("release call = %+v, want token tok-123 at the event's release path", call)
		}
	})

	t.Run("RefusesBadSignature", func(t *testing.T) {
		body := `{"eventId":"e1","release":{"url":"` + scheduler.URL + `/v1/events/e1/release","token":"t"}}`
		ts := time.Now().Unix()
		req, _ := http.NewRequest(http.MethodPost, consumer.URL, strings.NewReader(body))
		req.Header.Set(httpdelivery.HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(httpdelivery.HeaderSignature, httpdelivery.Sign([]byte("wrong"), ts, []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status = %d, want 401", resp.StatusCode)
		}
	})

	t.Run("RefusesReplayedRequest", func(t *testing.T) {
		body := `{"eventId":"e1"}`
		old := time.Now().Add(-time.Hour).Unix()
		req, _ := http.NewRequest(http.MethodPost, consumer.URL, strings.NewReader(body))
		req.Header.Set(httpdelivery.HeaderTimestamp, strconv.FormatInt(old, 10))
		req.Header.Set(httpdelivery.HeaderSignature, httpdelivery.Sign(secret, old, []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status = %d, want 401", resp.StatusCode)
		}
	})
}

// waitFor returns the next value of ch, failing the test after 10 seconds.
func waitFor[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting")
		var zero T
		return zero
	}
}
