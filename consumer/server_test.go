package consumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/consumer"
)

const (
	newSecret = "new-signing-secret-0123456789"
	oldSecret = "old-signing-secret-0123456789"
)

// scheduler is a running schedulerd with a tenant, signing with newSecret
// and oldSecret (the rotation's middle step).
type scheduler struct {
	t    *testing.T
	ctx  context.Context
	base string
	key  string
}

func startScheduler(t *testing.T, env map[string]string) *scheduler {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	all := map[string]string{
		"SCHEDULER_LISTEN_ADDR": "127.0.0.1:0", "SCHEDULER_DATA_DIR": t.TempDir(),
		"SCHEDULER_SIGNING_SECRET": newSecret + "," + oldSecret, "SCHEDULER_HTTP_ALLOW_CIDRS": "127.0.0.0/8",
		"SCHEDULER_LOG_LEVEL": "warn",
	}
	for k, v := range env {
		all[k] = v
	}
	cfg, err := app.ParseConfig(nil, func(k string) string { return all[k] })
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
	t.Cleanup(func() {
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	s := &scheduler{t: t, ctx: ctx, base: "http://" + a.Addr()}
	tenant := s.call(http.MethodPost, a.AdminKey(), "/v1/tenants", map[string]any{"name": "acme"}, http.StatusCreated)
	s.key = s.call(http.MethodPost, a.AdminKey(), "/v1/tenants/"+tenant["id"].(string)+"/keys", nil, http.StatusCreated)["key"].(string)
	return s
}

// call sends a JSON request with key and fails the test unless the answer
// is want; it returns the decoded answer.
func (s *scheduler) call(method, key, path string, body any, want int) map[string]any {
	s.t.Helper()
	var r io.Reader = http.NoBody
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(s.ctx, method, s.base+path, r)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != want {
		s.t.Fatalf("%s %s: status %d, want %d: %v", method, path, resp.StatusCode, want, out)
	}
	return out
}

// fire creates a schedule of n events to target (with a policy of
// maxInFlight 1 if throttled) and triggers it; it returns the schedule id.
func (s *scheduler) fire(target map[string]any, n int, throttled bool, extra map[string]any) string {
	s.t.Helper()
	body := map[string]any{"name": "s", "cron": "0 3 * * *", "eventCount": n, "target": target, "payload": map[string]any{"report": "daily"}}
	if throttled {
		pol := s.call(http.MethodPost, s.key, "/v1/policies", map[string]any{"name": "p-" + strconv.FormatInt(time.Now().UnixNano(), 36), "maxInFlight": 1, "tokenTimeout": "10m"}, http.StatusCreated)
		body["policyId"] = pol["id"]
	}
	for k, v := range extra {
		body[k] = v
	}
	sched := s.call(http.MethodPost, s.key, "/v1/schedules", body, http.StatusCreated)
	id := sched["id"].(string)
	s.call(http.MethodPost, s.key, "/v1/schedules/"+id+"/trigger", nil, http.StatusAccepted)
	return id
}

func (s *scheduler) event(id string) map[string]any {
	s.t.Helper()
	return s.call(http.MethodGet, s.key, "/v1/events/"+id, nil, http.StatusOK)
}

// served wraps h and reports each request once h has answered it, with
// the status it answered.
func served(h http.Handler) (http.Handler, <-chan int) {
	done := make(chan int, 64)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		done <- rec.status
	}), done
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// countingTransport counts the requests of a client.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func waitFor[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting")
		var zero T
		return zero
	}
}

// TestHandlerWithServer: real deliveries of a real scheduler to a
// consumer on 127.0.0.1 that uses Handler with the new secret only.
func TestHandlerWithServer(t *testing.T) {
	s := startScheduler(t, nil)

	t.Run("VerifiesParsesAndReleases", func(t *testing.T) {
		var mu sync.Mutex
		var got []*consumer.Delivery
		h, answered := served(&consumer.Handler{
			Verifier: consumer.NewVerifier(newSecret),
			Func: func(_ context.Context, d *consumer.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, d)
				return nil
			},
			OnError: func(d *consumer.Delivery, err error) { t.Errorf("OnError(%v, %v)", d, err) },
		})
		srv := httptest.NewServer(h)
		defer srv.Close()
		before := time.Now().Add(-time.Second)
		// maxInFlight 1 and a 10 minute token timeout: the second and
		// third events go only once the one before is released.
		sched := s.fire(map[string]any{"type": "http", "url": srv.URL + "/hook"}, 3, true, nil)
		for range 3 {
			if st := waitFor(t, answered); st != http.StatusNoContent {
				t.Fatalf("answered %d, want 204", st)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		seen := map[int]bool{}
		for _, d := range got {
			seen[d.Index] = true
			if d.ScheduleID != sched || d.Count != 3 || d.Attempt != 1 || d.FireID == "" || d.FireTime.IsZero() ||
				string(d.Payload) != `{"report":"daily"}` || !d.HoldsToken() || d.SignedAt.Before(before) {
				t.Errorf("delivery %+v", d)
			}
			if e := s.event(d.EventID); e["status"] != "released" {
				t.Errorf("event %s is %v after the handler answered, want released", d.EventID, e["status"])
			}
		}
		if len(seen) != 3 {
			t.Errorf("indexes %v, want 0, 1 and 2", seen)
		}
	})

	t.Run("NeedsNoReleaseWithoutToken", func(t *testing.T) {
		calls := &countingTransport{}
		holds := make(chan bool, 1)
		h, answered := served(&consumer.Handler{
			Verifier: consumer.NewVerifier(newSecret),
			Client:   consumer.NewClient(consumer.Options{HTTPClient: &http.Client{Transport: calls}}),
			Func: func(_ context.Context, d *consumer.Delivery) error {
				holds <- d.HoldsToken()
				return nil
			},
		})
		srv := httptest.NewServer(h)
		defer srv.Close()
		s.fire(map[string]any{"type": "http", "url": srv.URL}, 1, false, nil)
		if st := waitFor(t, answered); st != http.StatusNoContent || <-holds || calls.n.Load() != 0 {
			t.Fatalf("answered %d, %d release calls; want 204 and none for a delivery that holds no token", st, calls.n.Load())
		}
	})

	t.Run("Extends", func(t *testing.T) {
		type extended struct {
			d     *consumer.Delivery
			until time.Time
			err   error
		}
		got := make(chan extended, 1)
		c := consumer.NewClient(consumer.Options{})
		h, answered := served(&consumer.Handler{
			Verifier: consumer.NewVerifier(newSecret),
			Client:   c,
			Func: func(ctx context.Context, d *consumer.Delivery) error {
				until, err := c.Extend(ctx, d, time.Hour)
				got <- extended{d, until, err}
				return nil
			},
		})
		srv := httptest.NewServer(h)
		defer srv.Close()
		s.fire(map[string]any{"type": "http", "url": srv.URL}, 1, true, nil)
		x := waitFor(t, got)
		if x.err != nil {
			t.Fatal(x.err)
		}
		// The new expiry is the old one (10 minutes ahead) plus an hour.
		if want := x.d.Release.ExpiresAt.Add(time.Hour); !x.until.Equal(want) {
			t.Errorf("extended until %s, want %s (the token's expiry %s plus an hour)", x.until, want, x.d.Release.ExpiresAt)
		}
		waitFor(t, answered)
		if e := s.event(x.d.EventID); e["status"] != "released" {
			t.Errorf("event %v after the extend and the release, want released", e["status"])
		}
	})

	t.Run("FailureIsSentAgain", func(t *testing.T) {
		attempts := make(chan int, 4)
		h, answered := served(&consumer.Handler{
			Verifier: consumer.NewVerifier(newSecret),
			Func: func(_ context.Context, d *consumer.Delivery) error {
				attempts <- d.Attempt
				if d.Attempt == 1 {
					return errors.New("the report service is down")
				}
				return nil
			},
		})
		srv := httptest.NewServer(h)
		defer srv.Close()
		s.fire(map[string]any{"type": "http", "url": srv.URL}, 1, true, nil)
		if a, st := waitFor(t, attempts), waitFor(t, answered); a != 1 || st != http.StatusInternalServerError {
			t.Fatalf("attempt %d answered %d, want attempt 1 answered 500", a, st)
		}
		// The scheduler's backoff after a first failure is about 6 s.
		if a, st := waitFor(t, attempts), waitFor(t, answered); a != 2 || st != http.StatusNoContent {
			t.Fatalf("attempt %d answered %d, want attempt 2 answered 204", a, st)
		}
	})

	t.Run("RetryAfterIsSentAgainWithoutAnAttempt", func(t *testing.T) {
		calls := make(chan int, 4)
		var n atomic.Int32
		h, answered := served(&consumer.Handler{
			Verifier: consumer.NewVerifier(newSecret),
			Func: func(_ context.Context, d *consumer.Delivery) error {
				calls <- d.Attempt
				if n.Add(1) == 1 {
					return &consumer.RetryAfterError{After: time.Second, Err: errors.New("busy")}
				}
				return nil
			},
		})
		srv := httptest.NewServer(h)
		defer srv.Close()
		s.fire(map[string]any{"type": "http", "url": srv.URL}, 1, true, nil)
		if a, st := waitFor(t, calls), waitFor(t, answered); a != 1 || st != http.StatusServiceUnavailable {
			t.Fatalf("attempt %d answered %d, want attempt 1 answered 503", a, st)
		}
		if a, st := waitFor(t, calls), waitFor(t, answered); a != 1 || st != http.StatusNoContent {
			t.Fatalf("attempt %d answered %d, want attempt 1 again (a Retry-After is no failed attempt) answered 204", a, st)
		}
	})

	t.Run("BatchRetriesOnlyTheFailed", func(t *testing.T) {
		var mu sync.Mutex
		attempts := map[string][]int{}
		h, answered := served(&consumer.Handler{
			Verifier: consumer.NewVerifier(newSecret),
			Func: func(_ context.Context, d *consumer.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				attempts[d.EventID] = append(attempts[d.EventID], d.Attempt)
				if d.Index == 1 && d.Attempt == 1 {
					return errors.New("not now")
				}
				return nil
			},
		})
		srv := httptest.NewServer(h)
		defer srv.Close()
		s.fire(map[string]any{"type": "http_batch", "url": srv.URL}, 3, false, nil)
		// The events may come in one request or several; wait until all
		// three were done and the one named in retry came again.
		for {
			if st := waitFor(t, answered); st != http.StatusOK {
				t.Fatalf("answered %d, want 200", st)
			}
			mu.Lock()
			retried := 0
			for id, as := range attempts {
				switch {
				case slices.Equal(as, []int{1, 2}):
					retried++
				case !slices.Equal(as, []int{1}):
					t.Errorf("event %s: attempts %v, want [1], or [1 2] for the one named in retry", id, as)
				}
			}
			done := len(attempts) == 3 && retried == 1
			mu.Unlock()
			if done {
				return
			}
		}
	})
}
