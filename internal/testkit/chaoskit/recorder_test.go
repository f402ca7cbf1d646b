package chaoskit

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
)

var testSecret = []byte("chaoskit-test-secret")

// post delivers m to the recorder as schedulerd would, signed with secret.
func post(t *testing.T, url string, secret []byte, m delivery.Message) int {
	t.Helper()
	body, _ := json.Marshal(m)
	ts := time.Now().Unix()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set(httpdelivery.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(httpdelivery.HeaderSignature, httpdelivery.Sign(secret, ts, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The checker must be able to fail: more deliveries of a policy than its
// bound before any release is a violation; a redelivery is a duplicate; a
// bad signature is refused and counted; a release that fails on its own URL
// is retried against the other bases.
func TestRecorderDetects(t *testing.T) {
	var releases, deadCalls atomic.Int32
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadCalls.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer dead.Close()
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		releases.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer live.Close()

	r := NewRecorder(RecorderConfig{Secret: testSecret, Latency: 200 * time.Millisecond,
		ReleaseBases: func() []string { return []string{live.URL} }})
	u, err := r.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetPolicy("p", 2)

	msg := func(id string) delivery.Message {
		return delivery.Message{EventID: id, ScheduleID: "s", FireID: "f", FireTime: time.Now(), Index: 0, Count: 3,
			Attempt: 1, Payload: Payload{Policy: "p"}.JSON(),
			Release: delivery.Release{URL: dead.URL + "/v1/events/" + id + "/release", Token: "tok"}}
	}
	for _, id := range []string{"e1", "e2", "e3", "e1"} {
		if code := post(t, u, testSecret, msg(id)); code != http.StatusOK {
			t.Fatalf("delivery %s answered %d", id, code)
		}
	}
	if code := post(t, u, []byte("wrong"), msg("e4")); code != http.StatusUnauthorized {
		t.Fatalf("a bad signature answered %d, want 401", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitReleases(ctx); err != nil {
		t.Fatal(err)
	}
	s := r.Snapshot()
	if len(s.Violations) != 2 || s.MaxHeld["p"] != 4 {
		t.Errorf("violations %d (want 2), max held %d (want 4)", len(s.Violations), s.MaxHeld["p"])
	}
	if s.Duplicates() != 1 || s.Accepted() != 3 {
		t.Errorf("duplicates %d (want 1), accepted %d (want 3)", s.Duplicates(), s.Accepted())
	}
	// Each accepted copy records its sender (the release URL's base) and
	// that its release was acknowledged.
	e1 := s.Events["e1"]
	if len(e1.AcceptedFrom) != 2 || e1.AcceptedFrom[0] != dead.URL || e1.AcceptedFrom[1] != dead.URL {
		t.Errorf("e1 accepted from %q, want %q twice", e1.AcceptedFrom, dead.URL)
	}
	if len(e1.ReleaseOutcome) != 2 || e1.ReleaseOutcome[0] != "ok" || e1.ReleaseOutcome[1] != "ok" ||
		e1.ReleasedAt[0].Before(e1.AcceptedAt[0]) || e1.ReleasedAt[1].Before(e1.AcceptedAt[1]) {
		t.Errorf("e1 releases %q at %v, accepted at %v: want two ok, each after its copy", e1.ReleaseOutcome, e1.ReleasedAt, e1.AcceptedAt)
	}
	if s.Counters["bad_signature"] != 1 {
		t.Errorf("bad signatures %d, want 1", s.Counters["bad_signature"])
	}
	if s.Held["p"] != 0 {
		t.Errorf("tokens still held after the releases: %d", s.Held["p"])
	}
	if releases.Load() != 4 || deadCalls.Load() != 4 || s.Counters["release_ok"] != 4 {
		t.Errorf("releases: %d on the live base, %d on the dead one, %d ok; want 4, 4, 4", releases.Load(), deadCalls.Load(), s.Counters["release_ok"])
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for p, want := range map[float64]time.Duration{50: 50, 95: 95, 99: 99, 100: 100, 0: 1} {
		if got := Percentile(d, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("empty percentile is not 0")
	}
}

// A token whose expiry passed no longer counts against the bound (the
// scheduler reclaims it), and the recorder reports that its consumer held
// it past the expiry; unexpired tokens still count.
func TestRecorderDropsExpiredTokens(t *testing.T) {
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer live.Close()
	r := NewRecorder(RecorderConfig{Secret: testSecret, Latency: time.Second})
	u, err := r.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetPolicy("p", 1)
	send := func(id string, expiresAt time.Time) {
		t.Helper()
		m := delivery.Message{EventID: id, ScheduleID: "s", FireID: "f", FireTime: time.Now(), Count: 3, Attempt: 1,
			Payload: Payload{Policy: "p"}.JSON(),
			Release: delivery.Release{URL: live.URL + "/v1/events/" + id + "/release", Token: "tok", ExpiresAt: expiresAt}}
		if code := post(t, u, testSecret, m); code != http.StatusOK {
			t.Fatalf("delivery %s answered %d", id, code)
		}
	}
	send("e1", time.Now().Add(-time.Second)) // reached the consumer after its token expired
	send("e2", time.Now().Add(time.Minute))
	s := r.Snapshot()
	if len(s.Violations) != 0 || s.Counters["held_past_expiry"] != 1 || s.Held["p"] != 1 {
		t.Fatalf("after an expired and a live token: violations %v, held_past_expiry %d, held %d; want none, 1, 1",
			s.Violations, s.Counters["held_past_expiry"], s.Held["p"])
	}
	send("e3", time.Now().Add(time.Minute))
	if s := r.Snapshot(); len(s.Violations) != 1 || s.MaxHeld["p"] != 2 {
		t.Fatalf("two live tokens with bound 1: violations %v, max held %d; want 1 and 2", s.Violations, s.MaxHeld["p"])
	}
}

// With ReleaseOnlyTokens a delivery whose release has no expiry (no token
// held) is not released; one with an expiry is.
func TestRecorderReleaseOnlyTokens(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	r := NewRecorder(RecorderConfig{Secret: testSecret, Latency: time.Millisecond, ReleaseOnlyTokens: true})
	u, err := r.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for id, expires := range map[string]time.Time{"free": {}, "held": time.Now().Add(time.Minute)} {
		m := delivery.Message{EventID: id, ScheduleID: "s", FireID: "f", FireTime: time.Now(), Count: 1, Attempt: 1,
			Payload: Payload{}.JSON(), Release: delivery.Release{URL: srv.URL + "/v1/events/" + id + "/release", Token: "tok", ExpiresAt: expires}}
		if code := post(t, u, testSecret, m); code != http.StatusOK {
			t.Fatalf("delivery %s answered %d", id, code)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitReleases(ctx); err != nil {
		t.Fatal(err)
	}
	s := r.Snapshot()
	if calls.Load() != 1 || s.Events["free"].ReleaseOutcome[0] != "skipped" || s.Events["held"].ReleaseOutcome[0] != "ok" {
		t.Errorf("%d release calls, outcomes free %q held %q; want 1, skipped, ok", calls.Load(),
			s.Events["free"].ReleaseOutcome, s.Events["held"].ReleaseOutcome)
	}
}

// postBatch delivers ms to the recorder in one http_batch request, signed
// with the test secret, and returns the status and the decoded answer.
func postBatch(t *testing.T, url string, ms ...delivery.Message) (int, httpdelivery.BatchAnswer) {
	t.Helper()
	body, _ := json.Marshal(httpdelivery.BatchBody{Events: ms})
	ts := time.Now().Unix()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set(httpdelivery.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(httpdelivery.HeaderSignature, httpdelivery.Sign(testSecret, ts, body))
	req.Header.Set(httpdelivery.HeaderEventCount, strconv.Itoa(len(ms)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a httpdelivery.BatchAnswer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a
}

// Each event of a batch request is recorded and released as a delivery of
// its own; events drawn to fail are named in the answer's retry list.
func TestRecorderBatches(t *testing.T) {
	var releases atomic.Int32
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		releases.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer live.Close()
	r := NewRecorder(RecorderConfig{Secret: testSecret, Latency: time.Millisecond})
	u, err := r.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetPolicy("p", 10)
	msg := func(id string) delivery.Message {
		return delivery.Message{EventID: id, ScheduleID: "s", FireID: "f", FireTime: time.Now(), Count: 3, Attempt: 1,
			Payload: Payload{Policy: "p"}.JSON(), Release: delivery.Release{URL: live.URL + "/v1/events/" + id + "/release", Token: "tok"}}
	}
	if code, a := postBatch(t, u, msg("e1"), msg("e2"), msg("e3")); code != http.StatusOK || len(a.Retry) != 0 {
		t.Fatalf("batch answered %d with retry %v, want 200 and none", code, a.Retry)
	}
	r.SetFailures(1, 0)
	if code, a := postBatch(t, u, msg("e4"), msg("e1")); code != http.StatusOK || len(a.Retry) != 2 || a.Retry[0] != "e4" || a.Retry[1] != "e1" {
		t.Fatalf("failing batch answered %d with retry %v, want 200 naming e4 and e1", code, a.Retry)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitReleases(ctx); err != nil {
		t.Fatal(err)
	}
	s := r.Snapshot()
	if s.Accepted() != 3 || s.Duplicates() != 0 || s.Counters["answered_500"] != 2 || s.Counters["batches"] != 2 {
		t.Errorf("accepted %d, duplicates %d, failed %d, batches %d; want 3, 0, 2, 2", s.Accepted(), s.Duplicates(), s.Counters["answered_500"], s.Counters["batches"])
	}
	if e1 := s.Events["e1"]; e1.Seen != 2 || e1.Accepted != 1 {
		t.Errorf("e1 recorded %+v, want seen twice, accepted once", e1)
	}
	if releases.Load() != 3 || s.MaxHeld["p"] != 3 {
		t.Errorf("%d releases, most held %d; want 3 and 3", releases.Load(), s.MaxHeld["p"])
	}
}

// A batch's events that hold no token need no release: with
// ReleaseOnlyTokens they are done at once, recorded as skipped.
func TestRecorderBatchSkipsReleases(t *testing.T) {
	r := NewRecorder(RecorderConfig{Secret: testSecret, Latency: time.Hour, ReleaseOnlyTokens: true})
	u, err := r.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	msg := func(id string) delivery.Message {
		return delivery.Message{EventID: id, ScheduleID: "s", FireID: "f", FireTime: time.Now(), Count: 2, Attempt: 1,
			Release: delivery.Release{URL: "http://127.0.0.1:1/v1/events/" + id + "/release", Token: "tok"}}
	}
	if code, _ := postBatch(t, u, msg("e1"), msg("e2")); code != http.StatusOK {
		t.Fatalf("batch answered %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitReleases(ctx); err != nil {
		t.Fatal(err)
	}
	s := r.Snapshot()
	if s.Counters["release_skipped"] != 2 || s.Events["e1"].ReleaseOutcome[0] != "skipped" || s.Accepted() != 2 {
		t.Errorf("counters %v, e1 outcomes %v; want 2 accepted and skipped", s.Counters, s.Events["e1"].ReleaseOutcome)
	}
}
