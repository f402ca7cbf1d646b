package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
)

// captured is one delivery request as the consumer received it.
type captured struct {
	header http.Header
	body   []byte
}

// replay sends c again to h, with body instead of c's if not nil, and
// returns the status h answered.
func (c captured) replay(h http.Handler, body []byte) int {
	if body == nil {
		body = c.body
	}
	req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	req.Header = c.header.Clone()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestSignatureWithServer checks the Verifier on a real delivery of a
// scheduler whose signing secret is being rotated ("new,old"): the new
// secret and the old one are each accepted, a wrong secret, a changed body
// and a stale timestamp are refused with their typed errors, and the
// Handler answers 401 to them without calling its function.
func TestSignatureWithServer(t *testing.T) {
	s := startScheduler(t, nil)
	got := make(chan captured, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- captured{r.Header.Clone(), body}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	s.fire(map[string]any{"type": "http", "url": srv.URL}, 1, false, nil)
	c := waitFor(t, got)
	sig, ts := c.header.Get(consumer.HeaderSignature), c.header.Get(consumer.HeaderTimestamp)
	if n := strings.Count(sig, "v1="); n != 2 {
		t.Fatalf("signature header %q: %d signatures, want one per secret", sig, n)
	}
	tampered := bytes.Replace(c.body, []byte(`"daily"`), []byte(`"weekly"`), 1)
	if bytes.Equal(tampered, c.body) {
		t.Fatalf("body %s has no payload to change", c.body)
	}
	signedAt, err := consumer.NewVerifier(newSecret).Verify(sig, ts, c.body)
	if err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return signedAt.Add(6 * time.Minute) }

	for _, tc := range []struct {
		name     string
		verifier *consumer.Verifier
		sig      string
		body     []byte
		want     error
	}{
		{"NewSecret", consumer.NewVerifier(newSecret), sig, c.body, nil},
		{"OldSecret", consumer.NewVerifier(oldSecret), sig, c.body, nil},
		{"EitherSecret", consumer.NewVerifier("unrelated", oldSecret), sig, c.body, nil},
		{"WrongSecret", consumer.NewVerifier("unrelated"), sig, c.body, consumer.ErrBadSignature},
		{"TamperedBody", consumer.NewVerifier(newSecret), sig, tampered, consumer.ErrBadSignature},
		{"Stale", &consumer.Verifier{Secrets: [][]byte{[]byte(newSecret)}, Now: later}, sig, c.body, consumer.ErrStale},
		{"StaleWithinWiderTolerance", &consumer.Verifier{Secrets: [][]byte{[]byte(newSecret)}, Now: later, Tolerance: 10 * time.Minute}, sig, c.body, nil},
		{"NoSignature", consumer.NewVerifier(newSecret), "", c.body, consumer.ErrNoSignature},
		{"OtherVersionOnly", consumer.NewVerifier(newSecret), strings.ReplaceAll(sig, "v1=", "v2="), c.body, consumer.ErrNoSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.verifier.Verify(tc.sig, ts, tc.body)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
			var se *consumer.SignatureError
			if tc.want != nil && (!errors.As(err, &se) || se.Reason != tc.want) {
				t.Fatalf("Verify: %#v is not a *SignatureError with reason %v", err, tc.want)
			}
		})
	}

	t.Run("HandlerRefusesWithoutCalling", func(t *testing.T) {
		var refused []error
		called := false
		h := &consumer.Handler{
			Verifier: consumer.NewVerifier(oldSecret),
			Func: func(context.Context, *consumer.Delivery) error {
				called = true
				return nil
			},
			OnError: func(_ *consumer.Delivery, err error) { refused = append(refused, err) },
		}
		if st := c.replay(h, tampered); st != http.StatusUnauthorized || called {
			t.Errorf("tampered body: %d, called %v; want 401 and not called", st, called)
		}
		h.Verifier = &consumer.Verifier{Secrets: [][]byte{[]byte(oldSecret)}, Now: later}
		if st := c.replay(h, nil); st != http.StatusUnauthorized || called {
			t.Errorf("stale request: %d, called %v; want 401 and not called", st, called)
		}
		if len(refused) != 2 || !errors.Is(refused[0], consumer.ErrBadSignature) || !errors.Is(refused[1], consumer.ErrStale) {
			t.Errorf("OnError got %v, want ErrBadSignature then ErrStale", refused)
		}
		// The same request, fresh and untouched, is accepted under the
		// old secret.
		h.Verifier = consumer.NewVerifier(oldSecret)
		if st := c.replay(h, nil); st != http.StatusNoContent || !called {
			t.Errorf("the request as sent: %d, called %v; want 204 and called", st, called)
		}
	})
}
