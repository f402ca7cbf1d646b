package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/model"
)

// TestRunLogsWhereItListens starts the consumer as main does and checks
// that its first log line names the address it serves on, and that it
// takes a rotation's list of secrets.
func TestRunLogsWhereItListens(t *testing.T) {
	env := map[string]string{"SCHEDULER_SIGNING_SECRET": "new-secret," + string(secret), "LISTEN_ADDR": "127.0.0.1:0"}
	logs, logw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, func(k string) string { return env[k] }, log.New(logw, "", 0)) }()
	t.Cleanup(func() {
		cancel()
		go func() { _, _ = io.Copy(io.Discard, logs) }()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})

	line, err := bufio.NewReader(logs).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^consumer listening on (http://127\.0\.0\.1:\d+) `).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("first log line %q does not name the address", line)
	}
	// The address is the consumer's: it answers a GET with 405.
	resp, err := http.Get(m[1] + "/hook")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET %s: %d, want the consumer's 405", m[1], resp.StatusCode)
	}
	// A delivery signed under the second secret of the list is accepted.
	body := `{"eventId":"e1","release":{"url":"http://127.0.0.1:1/v1/events/e1/release","token":"t"}}`
	ts := time.Now().Unix()
	req, _ := http.NewRequest(http.MethodPost, m[1]+"/hook", strings.NewReader(body))
	req.Header.Set(httpdelivery.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(httpdelivery.HeaderSignature, httpdelivery.Sign(secret, ts, []byte(body)))
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a delivery signed under the list's second secret: %d, want 202", resp.StatusCode)
	}
}

// TestDeliveryHasTheSpecHeaders checks that a real delivery carries every
// header openapi.yaml's eventDelivery webhook lists as required, and that
// Idempotency-Key is the event's id.
func TestDeliveryHasTheSpecHeaders(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	var required []string
	for _, p := range spec.Webhooks["eventDelivery"].Post.Parameters {
		if p.Value.In == "header" && p.Value.Required {
			required = append(required, p.Value.Name)
		}
	}
	if len(required) == 0 {
		t.Fatal("the eventDelivery webhook lists no required headers")
	}
	got := make(chan http.Header, 1)
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	t.Cleanup(consumer.Close)
	d, err := httpdelivery.New(httpdelivery.Config{SigningSecret: secret, ReleaseBaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	e := &model.Event{ID: "sch_1.1772366400.v1.0", ScheduleID: "sch_1", FireID: "sch_1.1772366400.v1", FireTime: time.Now(), Count: 1,
		Target: model.Target{Type: model.TargetHTTP, URL: consumer.URL + "/hook"}, Payload: json.RawMessage(`{}`)}
	if res := d.Deliver(context.Background(), []*model.Event{e})[0]; res.Err != nil {
		t.Fatal(res.Err)
	}
	h := waitFor(t, got)
	for _, name := range required {
		if h.Get(name) == "" {
			t.Errorf("the delivery lacks the %s header the spec requires", name)
		}
	}
	if k := h.Get("Idempotency-Key"); k != e.ID {
		t.Errorf("Idempotency-Key %q, want the event id %q", k, e.ID)
	}
	documented := false
	for _, name := range required {
		documented = documented || name == "Idempotency-Key"
	}
	if !documented {
		t.Errorf("the delivery sends Idempotency-Key, which the spec's required headers %v omit", required)
	}
}
