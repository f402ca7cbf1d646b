package consumer_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
)

// signed returns a delivery request of body signed with secret now.
func signed(secret, body string, header map[string]string) *http.Request {
	ts := time.Now().Unix()
	req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
	req.Header.Set(consumer.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(consumer.HeaderSignature, httpdelivery.Sign([]byte(secret), ts, []byte(body)))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req
}

// TestHandlerAnswers covers the answers that need no scheduler: the
// method, the size, the body, a failing Func, and the traceparent passed
// on to the release.
func TestHandlerAnswers(t *testing.T) {
	const secret = "s3cret"
	traceparents := make(chan string, 1)
	release := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparents <- r.Header.Get(consumer.HeaderTraceparent)
		_, _ = w.Write([]byte(`{"id":"e1","status":"released"}`))
	}))
	defer release.Close()
	body := `{"eventId":"e1","payload":{"a":1},"release":{"url":"` + release.URL + `/v1/events/e1/release","token":"t","expiresAt":"2030-01-01T00:00:00Z"}}`
	var fail error
	var got *consumer.Delivery
	h := &consumer.Handler{
		Verifier: consumer.NewVerifier(secret),
		MaxBody:  1024,
		Func: func(_ context.Context, d *consumer.Delivery) error {
			got = d
			return fail
		},
	}
	serve := func(req *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	t.Run("ReleasesWithTheTraceparent", func(t *testing.T) {
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		if rec := serve(signed(secret, body, map[string]string{consumer.HeaderTraceparent: tp})); rec.Code != http.StatusNoContent {
			t.Fatalf("answered %d, want 204", rec.Code)
		}
		if got.Traceparent != tp || string(got.Payload) != `{"a":1}` {
			t.Errorf("delivery %+v", got)
		}
		if sent := waitFor(t, traceparents); sent != tp {
			t.Errorf("the release carried traceparent %q, want %q", sent, tp)
		}
	})
	t.Run("FailureAnswers500", func(t *testing.T) {
		fail = errors.New("down")
		defer func() { fail = nil }()
		if rec := serve(signed(secret, body, nil)); rec.Code != http.StatusInternalServerError || len(traceparents) != 0 {
			t.Fatalf("answered %d, %d releases; want 500 and no release", rec.Code, len(traceparents))
		}
	})
	t.Run("RetryAfterAnswers503", func(t *testing.T) {
		fail = &consumer.RetryAfterError{After: 1500 * time.Millisecond, Err: errors.New("busy")}
		defer func() { fail = nil }()
		rec := serve(signed(secret, body, nil))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "2" || len(traceparents) != 0 {
			t.Fatalf("answered %d with Retry-After %q, %d releases; want 503, 2 (seconds, rounded up) and no release",
				rec.Code, rec.Header().Get("Retry-After"), len(traceparents))
		}
	})
	t.Run("Refusals", func(t *testing.T) {
		got = nil
		get := httptest.NewRequest(http.MethodGet, "/hook", nil)
		for name, tc := range map[string]struct {
			req  *http.Request
			want int
		}{
			"Get":          {get, http.StatusMethodNotAllowed},
			"TooLarge":     {signed(secret, `{"eventId":"`+strings.Repeat("x", 2000)+`"}`, nil), http.StatusRequestEntityTooLarge},
			"NotADelivery": {signed(secret, `{"hello":"world"}`, nil), http.StatusBadRequest},
			"BadBatch":     {signed(secret, body, map[string]string{consumer.HeaderEventCount: "1"}), http.StatusBadRequest},
			"Unsigned":     {httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body)), http.StatusUnauthorized},
		} {
			if rec := serve(tc.req); rec.Code != tc.want {
				t.Errorf("%s: answered %d, want %d", name, rec.Code, tc.want)
			}
		}
		if got != nil {
			t.Errorf("Func was called with %+v", got)
		}
	})
}
