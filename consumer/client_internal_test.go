package consumer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// answer is one reply of the fake scheduler.
type answer struct {
	status int
	header map[string]string
	body   string
}

// newScheduler answers the release and extend calls it gets with answers,
// in turn (the last one repeats), and counts them.
func newScheduler(t *testing.T, answers ...answer) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1))
		a := answers[min(n, len(answers))-1]
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// fakeClock makes c record its waits instead of sleeping, with now fixed.
func fakeClock(c *Client, now time.Time) *[]time.Duration {
	var waits []time.Duration
	c.now = func() time.Time { return now }
	c.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return &waits
}

func delivery(base string) *Delivery {
	return &Delivery{EventID: "e1", Release: Release{URL: base + "/v1/events/e1/release", Token: "tok"}}
}

func TestReleaseRetries(t *testing.T) {
	released := answer{status: http.StatusOK, body: `{"id":"e1","status":"released"}`}
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

	t.Run("HonoursRetryAfterSeconds", func(t *testing.T) {
		srv, calls := newScheduler(t, answer{status: http.StatusServiceUnavailable, header: map[string]string{"Retry-After": "7"}}, released)
		c := NewClient(Options{})
		waits := fakeClock(c, now)
		if err := c.Release(context.Background(), delivery(srv.URL)); err != nil {
			t.Fatal(err)
		}
		if calls.Load() != 2 || !slices.Equal(*waits, []time.Duration{7 * time.Second}) {
			t.Fatalf("%d calls, waits %v; want 2 calls and one wait of 7s", calls.Load(), *waits)
		}
	})

	t.Run("HonoursRetryAfterDate", func(t *testing.T) {
		date := now.Add(90 * time.Second).Format(http.TimeFormat)
		srv, calls := newScheduler(t, answer{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": date}}, released)
		c := NewClient(Options{})
		waits := fakeClock(c, now)
		if err := c.Release(context.Background(), delivery(srv.URL)); err != nil {
			t.Fatal(err)
		}
		if calls.Load() != 2 || !slices.Equal(*waits, []time.Duration{90 * time.Second}) {
			t.Fatalf("%d calls, waits %v; want 2 calls and one wait of 90s", calls.Load(), *waits)
		}
	})

	t.Run("BacksOffWithJitterWithoutRetryAfter", func(t *testing.T) {
		srv, calls := newScheduler(t, answer{status: http.StatusBadGateway}, answer{status: http.StatusInternalServerError}, released)
		c := NewClient(Options{})
		waits := fakeClock(c, now)
		if err := c.Release(context.Background(), delivery(srv.URL)); err != nil {
			t.Fatal(err)
		}
		if calls.Load() != 3 || len(*waits) != 2 {
			t.Fatalf("%d calls, waits %v; want 3 calls and 2 waits", calls.Load(), *waits)
		}
		for i, w := range *waits {
			if bound := backoffBase<<i + time.Millisecond; w <= 0 || w > bound {
				t.Errorf("wait %d: %s, want within (0, %s]", i, w, bound)
			}
		}
	})

	t.Run("StopsAfterMaxAttempts", func(t *testing.T) {
		srv, calls := newScheduler(t, answer{status: http.StatusServiceUnavailable, header: map[string]string{"Retry-After": "1"}})
		c := NewClient(Options{MaxAttempts: 3})
		fakeClock(c, now)
		err := c.Release(context.Background(), delivery(srv.URL))
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || calls.Load() != 3 {
			t.Fatalf("error %v after %d calls; want the 503 after 3", err, calls.Load())
		}
	})

	t.Run("RetryAfterBeyondTheDeadlineEndsAtOnce", func(t *testing.T) {
		srv, calls := newScheduler(t, answer{status: http.StatusServiceUnavailable, header: map[string]string{"Retry-After": "120"}}, released)
		c := NewClient(Options{})
		start := time.Now()
		waits := fakeClock(c, start)
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(time.Minute))
		defer cancel()
		if err := c.Release(ctx, delivery(srv.URL)); err == nil || calls.Load() != 1 || len(*waits) != 0 {
			t.Fatalf("error %v, %d calls, waits %v; want an error after 1 call and no wait", err, calls.Load(), *waits)
		}
	})

	t.Run("DoesNotRetryRefusals", func(t *testing.T) {
		for _, tc := range []struct {
			status     int
			superseded bool
		}{{http.StatusNotFound, false}, {http.StatusConflict, true}, {http.StatusBadRequest, false}} {
			srv, calls := newScheduler(t, answer{status: tc.status, header: map[string]string{"Content-Type": "application/problem+json"},
				body: `{"type":"about:blank","title":"refused","status":` + strconv.Itoa(tc.status) + `}`})
			c := NewClient(Options{})
			waits := fakeClock(c, now)
			err := c.Release(context.Background(), delivery(srv.URL))
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Problem.Title != "refused" || calls.Load() != 1 || len(*waits) != 0 {
				t.Errorf("%d: error %v after %d calls and waits %v; want an *APIError with the problem after 1 call", tc.status, err, calls.Load(), *waits)
			}
			if errors.Is(err, ErrSuperseded) != tc.superseded {
				t.Errorf("%d: errors.Is(err, ErrSuperseded) = %v", tc.status, !tc.superseded)
			}
		}
	})
}

func TestClientURLs(t *testing.T) {
	paths := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.EscapedPath()
		_, _ = w.Write([]byte(`{"id":"e/1","status":"delivered","tokenExpiresAt":"2030-01-01T00:00:00Z"}`))
	}))
	defer srv.Close()
	d := &Delivery{EventID: "e/1", Release: Release{URL: "http://elsewhere.invalid/v1/events/e%2F1/release", Token: "tok"}}

	c := NewClient(Options{BaseURL: srv.URL + "/"})
	if err := c.Release(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	until, err := c.Extend(context.Background(), d, time.Minute)
	if err != nil || !until.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("Extend: %s, %v", until, err)
	}
	if got := []string{<-paths, <-paths}; !slices.Equal(got, []string{"/v1/events/e%2F1/release", "/v1/events/e%2F1/extend"}) {
		t.Errorf("paths %v, want the event's release and extend paths under BaseURL", got)
	}

	d.Release.URL = srv.URL + "/somewhere"
	if _, err := NewClient(Options{}).Extend(context.Background(), d, 0); err == nil || len(paths) != 0 {
		t.Errorf("Extend with a release URL not ending in /release: %v, want an error and no call", err)
	}
}

// TestBackoffStaysBounded: many tries never wait longer than backoffMax
// (nor overflow the exponential bound).
func TestBackoffStaysBounded(t *testing.T) {
	srv, calls := newScheduler(t, answer{status: http.StatusBadGateway})
	c := NewClient(Options{MaxAttempts: 80})
	waits := fakeClock(c, time.Now())
	if err := c.Release(context.Background(), delivery(srv.URL)); err == nil || calls.Load() != 80 {
		t.Fatalf("error %v after %d calls, want the 502 after 80", err, calls.Load())
	}
	for i, w := range *waits {
		if w <= 0 || w > backoffMax+time.Millisecond {
			t.Fatalf("wait %d: %s, want within (0, %s]", i, w, backoffMax)
		}
	}
}
