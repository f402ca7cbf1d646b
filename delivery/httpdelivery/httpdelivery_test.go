package httpdelivery_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/internal/netguard"
	"github.com/schedulerd/schedulerd/model"
)

var (
	testSecret = []byte("test-signing-secret")
	testNow    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

func fixedClock() time.Time { return testNow }

// newDeliverer returns a Deliverer with the test secret and clock, closed at
// the end of the test.
func newDeliverer(t testing.TB, cfg httpdelivery.Config) *httpdelivery.Deliverer {
	t.Helper()
	if cfg.SigningSecret == nil {
		cfg.SigningSecret = testSecret
	}
	if cfg.Now == nil {
		cfg.Now = fixedClock
	}
	if cfg.ReleaseBaseURL == "" {
		cfg.ReleaseBaseURL = "https://scheduler.example"
	}
	d, err := httpdelivery.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

func testEvent(id, target string) *model.Event {
	deadline := testNow.Add(time.Minute)
	return &model.Event{
		ID:           id,
		ScheduleID:   "sch_1",
		FireID:       "sch_1.1772366400.v1",
		FireTime:     testNow,
		Index:        2,
		Count:        5,
		Deadline:     &deadline,
		Target:       model.Target{Type: model.TargetHTTP, URL: target},
		Payload:      json.RawMessage(`{"job":"resize","size":3}`),
		Attempts:     1,
		ReleaseToken: "tok-" + id,
	}
}

// deliverOne delivers a single event and returns its result.
func deliverOne(t *testing.T, d *httpdelivery.Deliverer, e *model.Event) delivery.Result {
	t.Helper()
	results := d.Deliver(context.Background(), []*model.Event{e})
	if len(results) != 1 {
		t.Fatalf("Deliver returned %d results, want 1", len(results))
	}
	return results[0]
}

// newServer starts a real listener on 127.0.0.1 and counts the connections
// it accepts.
func newServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func TestNewValidatesConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   httpdelivery.Config
		field string
	}{
		{"RequiresSigningSecret", httpdelivery.Config{}, "SigningSecret"},
		{"RejectsRelativeReleaseBaseURL", httpdelivery.Config{SigningSecret: testSecret, ReleaseBaseURL: "/v1"}, "ReleaseBaseURL"},
		{"RejectsNegativeTimeout", httpdelivery.Config{SigningSecret: testSecret, Timeout: -time.Second}, "Timeout"},
		{"RejectsNegativeMaxIdleConnsPerHost", httpdelivery.Config{SigningSecret: testSecret, MaxIdleConnsPerHost: -1}, "MaxIdleConnsPerHost"},
		{"RejectsNegativeMaxConnsPerHost", httpdelivery.Config{SigningSecret: testSecret, MaxConnsPerHost: -1}, "MaxConnsPerHost"},
		{"RejectsNegativeConcurrency", httpdelivery.Config{SigningSecret: testSecret, Concurrency: -1}, "Concurrency"},
		{"RejectsInvalidDenyCIDR", httpdelivery.Config{SigningSecret: testSecret, DenyCIDRs: []netip.Prefix{{}}}, "DenyCIDRs[0]"},
		{"RejectsInvalidAllowCIDR", httpdelivery.Config{SigningSecret: testSecret, AllowCIDRs: []netip.Prefix{{}}}, "AllowCIDRs[0]"},
		{"RejectsEmptyPreviousSecret", httpdelivery.Config{SigningSecret: testSecret, PreviousSigningSecrets: [][]byte{[]byte("old"), nil}}, "PreviousSigningSecrets[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := httpdelivery.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New error = %v, want one naming %s", err, tc.field)
			}
		})
	}
	t.Run("AcceptsMinimalConfig", func(t *testing.T) {
		if _, err := httpdelivery.New(httpdelivery.Config{SigningSecret: testSecret}); err != nil {
			t.Fatalf("New: %v", err)
		}
	})
}

// TestDeliverSignsWithEachSecret: during a rotation every request carries
// one signature per secret, the current one's first, so that a consumer
// checking with either secret accepts it.
func TestDeliverSignsWithEachSecret(t *testing.T) {
	newSecret, oldSecret := []byte("new-signing-secret"), []byte("old-signing-secret")
	type seen struct {
		header string
		ts     string
		body   []byte
	}
	got := make(chan seen, 2)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Header.Get(httpdelivery.HeaderSignature), r.Header.Get(httpdelivery.HeaderTimestamp), body}
		w.WriteHeader(http.StatusNoContent)
	})
	d := newDeliverer(t, httpdelivery.Config{SigningSecret: newSecret, PreviousSigningSecrets: [][]byte{oldSecret}})
	for _, e := range []*model.Event{testEvent("single", srv.URL), batchEvent("batched", srv.URL)} {
		if res := deliverOne(t, d, e); res.Err != nil {
			t.Fatalf("%s: %v", e.ID, res.Err)
		}
		s := <-got
		ts, _ := strconv.ParseInt(s.ts, 10, 64)
		want := httpdelivery.Sign(newSecret, ts, s.body) + "," + httpdelivery.Sign(oldSecret, ts, s.body)
		if s.header != want {
			t.Errorf("%s: signature header %q, want %q", e.ID, s.header, want)
		}
		for _, secret := range [][]byte{newSecret, oldSecret} {
			v := consumer.Verifier{Secrets: [][]byte{secret}, Now: func() time.Time { return testNow }}
			if _, err := v.Verify(s.header, s.ts, s.body); err != nil {
				t.Errorf("%s: Verify with %q: %v", e.ID, secret, err)
			}
		}
		v := consumer.Verifier{Secrets: [][]byte{[]byte("third-secret")}, Now: func() time.Time { return testNow }}
		if _, err := v.Verify(s.header, s.ts, s.body); !errors.Is(err, consumer.ErrBadSignature) {
			t.Errorf("%s: Verify with another secret = %v, want ErrBadSignature", e.ID, err)
		}
	}
}

func TestDeliver(t *testing.T) {
	t.Run("PostsSignedMessage", func(t *testing.T) {
		type seen struct {
			method, path string
			header       http.Header
			body         []byte
		}
		got := make(chan seen, 1)
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			got <- seen{r.Method, r.URL.Path, r.Header.Clone(), body}
			w.WriteHeader(http.StatusNoContent)
		})
		d := newDeliverer(t, httpdelivery.Config{UserAgent: "ua-test"})
		e := testEvent("sch_1.1772366400.v1.2", srv.URL+"/hook")

		res := deliverOne(t, d, e)
		if res.Err != nil || res.StatusCode != http.StatusNoContent {
			t.Fatalf("result = %+v, want delivered with 204", res)
		}
		s := <-got
		if s.method != http.MethodPost || s.path != "/hook" {
			t.Errorf("request = %s %s, want POST /hook", s.method, s.path)
		}
		for name, want := range map[string]string{
			"Content-Type":               "application/json",
			"User-Agent":                 "ua-test",
			httpdelivery.HeaderEventID:   e.ID,
			httpdelivery.HeaderTimestamp: strconv.FormatInt(testNow.Unix(), 10),
			"Idempotency-Key":            e.ID,
		} {
			if v := s.header.Get(name); v != want {
				t.Errorf("header %s = %q, want %q", name, v, want)
			}
		}
		v := consumer.Verifier{Secrets: [][]byte{testSecret}, Now: func() time.Time { return testNow }}
		if _, err := v.Verify(s.header.Get(httpdelivery.HeaderSignature), s.header.Get(httpdelivery.HeaderTimestamp), s.body); err != nil {
			t.Errorf("Verify: %v", err)
		}

		var m delivery.Message
		if err := json.Unmarshal(s.body, &m); err != nil {
			t.Fatalf("body is not a delivery.Message: %v", err)
		}
		if m.EventID != e.ID || m.ScheduleID != "sch_1" || m.FireID != e.FireID || !m.FireTime.Equal(testNow) ||
			m.Index != 2 || m.Count != 5 || m.Attempt != 2 || m.Deadline == nil || !m.Deadline.Equal(*e.Deadline) {
			t.Errorf("message = %+v, fields do not match the event", m)
		}
		if string(m.Payload) != `{"job":"resize","size":3}` {
			t.Errorf("payload = %s", m.Payload)
		}
		wantRelease := delivery.Release{URL: "https://scheduler.example/v1/events/" + e.ID + "/release", Token: "tok-" + e.ID}
		if m.Release != wantRelease || strings.Contains(string(s.body), "expiresAt") {
			t.Errorf("release = %+v, want %+v (an event without a policy has no token expiry)", m.Release, wantRelease)
		}
	})

	t.Run("MessageNamesTokenExpiry", func(t *testing.T) {
		got := make(chan []byte, 1)
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			got <- body
		})
		d := newDeliverer(t, httpdelivery.Config{})
		e := testEvent("evt_tok", srv.URL)
		exp := testNow.Add(90 * time.Second)
		e.PolicyID, e.TokenExpiresAt = "pol_1", &exp
		if r := deliverOne(t, d, e); r.Err != nil {
			t.Fatalf("deliver: %v", r.Err)
		}
		var m delivery.Message
		if err := json.Unmarshal(<-got, &m); err != nil {
			t.Fatalf("body is not a delivery.Message: %v", err)
		}
		if !m.Release.ExpiresAt.Equal(exp) {
			t.Errorf("release.expiresAt = %v, want %v", m.Release.ExpiresAt, exp)
		}
	})

	t.Run("ReturnsResultsInEventOrder", func(t *testing.T) {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
			w.WriteHeader(code)
		})
		d := newDeliverer(t, httpdelivery.Config{Concurrency: 4})
		codes := []int{200, 500, 201, 404, 202, 502, 200, 400, 299, 300}
		var events []*model.Event
		for i, c := range codes {
			events = append(events, testEvent("e"+strconv.Itoa(i), srv.URL+"/"+strconv.Itoa(c)))
		}
		results := d.Deliver(context.Background(), events)
		if len(results) != len(codes) {
			t.Fatalf("got %d results, want %d", len(results), len(codes))
		}
		for i, c := range codes {
			ok := c >= 200 && c < 300
			if results[i].StatusCode != c || (results[i].Err == nil) != ok || results[i].Permanent {
				t.Errorf("result %d = %+v, want status %d, delivered %v, retryable", i, results[i], c, ok)
			}
		}
	})

	t.Run("ServerErrorIsRetryableWithBody", func(t *testing.T) {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "database is down", http.StatusInternalServerError)
		})
		res := deliverOne(t, newDeliverer(t, httpdelivery.Config{}), testEvent("e1", srv.URL))
		var se *httpdelivery.StatusError
		if !errors.As(res.Err, &se) || se.StatusCode != 500 || !strings.Contains(se.Body, "database is down") {
			t.Fatalf("err = %v, want a StatusError 500 with the body", res.Err)
		}
		if res.Permanent || res.RetryAfter != 0 {
			t.Errorf("result = %+v, want retryable without RetryAfter", res)
		}
	})

	t.Run("TooManyRequestsWithRetryAfterSeconds", func(t *testing.T) {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		res := deliverOne(t, newDeliverer(t, httpdelivery.Config{}), testEvent("e1", srv.URL))
		if res.Err == nil || res.Permanent || res.RetryAfter != 7*time.Second || res.StatusCode != 429 {
			t.Fatalf("result = %+v, want retryable 429 with RetryAfter 7s", res)
		}
	})

	t.Run("ServiceUnavailableWithRetryAfterDate", func(t *testing.T) {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", testNow.Add(90*time.Second).Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		res := deliverOne(t, newDeliverer(t, httpdelivery.Config{}), testEvent("e1", srv.URL))
		if res.Err == nil || res.RetryAfter != 90*time.Second || res.StatusCode != 503 {
			t.Fatalf("result = %+v, want 503 with RetryAfter 90s", res)
		}
	})

	t.Run("TooManyRequestsWithoutRetryAfter", func(t *testing.T) {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
		})
		res := deliverOne(t, newDeliverer(t, httpdelivery.Config{}), testEvent("e1", srv.URL))
		if res.Err == nil || res.RetryAfter != 0 || res.Permanent {
			t.Fatalf("result = %+v, want retryable error without RetryAfter", res)
		}
	})

	t.Run("TimeoutIsRetryable", func(t *testing.T) {
		release := make(chan struct{})
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		t.Cleanup(func() { close(release) }) // runs before srv.Close
		d := newDeliverer(t, httpdelivery.Config{Timeout: 100 * time.Millisecond})
		res := deliverOne(t, d, testEvent("e1", srv.URL))
		if !errors.Is(res.Err, context.DeadlineExceeded) || res.Permanent {
			t.Fatalf("result = %+v, want retryable deadline exceeded", res)
		}
	})

	t.Run("ConnectionRefusedIsRetryable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		res := deliverOne(t, newDeliverer(t, httpdelivery.Config{}), testEvent("e1", "http://"+addr))
		if res.Err == nil || res.Permanent {
			t.Fatalf("result = %+v, want retryable connection error", res)
		}
	})

	t.Run("RedirectIsNotFollowed", func(t *testing.T) {
		var hits atomic.Int64
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		})
		res := deliverOne(t, newDeliverer(t, httpdelivery.Config{}), testEvent("e1", srv.URL))
		if res.Err == nil || res.Permanent || res.StatusCode != 307 || hits.Load() != 1 {
			t.Fatalf("result = %+v after %d requests, want one retryable 307", res, hits.Load())
		}
	})

	t.Run("InvalidTargetIsPermanent", func(t *testing.T) {
		d := newDeliverer(t, httpdelivery.Config{})
		for _, target := range []string{"ftp://example.com/x", "/relative", "http://", "::bad"} {
			if res := deliverOne(t, d, testEvent("e1", target)); res.Err == nil || !res.Permanent {
				t.Errorf("target %q: result = %+v, want permanent error", target, res)
			}
		}
	})

	t.Run("InvalidPayloadIsPermanent", func(t *testing.T) {
		e := testEvent("e1", "http://127.0.0.1:1/")
		e.Payload = json.RawMessage(`{not json`)
		if res := deliverOne(t, newDeliverer(t, httpdelivery.Config{}), e); res.Err == nil || !res.Permanent {
			t.Fatalf("result = %+v, want permanent error", res)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		results := newDeliverer(t, httpdelivery.Config{}).Deliver(ctx, []*model.Event{testEvent("e1", srv.URL)})
		if !errors.Is(results[0].Err, context.Canceled) || results[0].Permanent {
			t.Fatalf("result = %+v, want retryable context.Canceled", results[0])
		}
		if n := conns.Load(); n != 0 {
			t.Errorf("%d connections opened, want 0", n)
		}
	})

	t.Run("EmptyBatch", func(t *testing.T) {
		if got := newDeliverer(t, httpdelivery.Config{}).Deliver(context.Background(), nil); len(got) != 0 {
			t.Fatalf("Deliver(nil) = %v, want no results", got)
		}
	})
}

func TestDeliverReusesConnections(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		// Answer with a body, as real consumers do, to check it is drained.
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	const concurrency = 8
	d := newDeliverer(t, httpdelivery.Config{
		Concurrency: concurrency, MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency,
	})
	events := make([]*model.Event, 100)
	for i := range events {
		events[i] = testEvent("e"+strconv.Itoa(i), srv.URL)
	}
	for round := range 5 {
		for i, res := range d.Deliver(context.Background(), events) {
			if res.Err != nil {
				t.Fatalf("round %d event %d: %v", round, i, res.Err)
			}
		}
	}
	if n := conns.Load(); n > concurrency {
		t.Fatalf("500 deliveries opened %d connections, want at most %d", n, concurrency)
	}
}

func TestSSRFGuard(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

	t.Run("RefusesLinkLocalAndMetadataByDefault", func(t *testing.T) {
		d := newDeliverer(t, httpdelivery.Config{Timeout: 5 * time.Second})
		for _, target := range []string{
			"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
			"http://169.254.170.2/v2/credentials",
			"http://[fd00:ec2::254]/latest/meta-data/",
			"http://100.100.100.200/latest/meta-data/",
			"http://[::ffff:169.254.169.254]/",
			"http://[fe80::1]/",
			"http://0.0.0.0:1/",
		} {
			t.Run(url.PathEscape(target), func(t *testing.T) {
				res := deliverOne(t, d, testEvent("e1", target))
				// ErrTargetRefused comes only from the dialer's Control hook,
				// which runs before connect(2): no packet left the host.
				if !errors.Is(res.Err, httpdelivery.ErrTargetRefused) || !res.Permanent {
					t.Fatalf("result = %+v, want permanent ErrTargetRefused", res)
				}
			})
		}
	})

	t.Run("AllowsLoopbackByDefault", func(t *testing.T) {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
		if res := deliverOne(t, newDeliverer(t, httpdelivery.Config{}), testEvent("e1", srv.URL)); res.Err != nil {
			t.Fatalf("delivery to %s: %v", srv.URL, res.Err)
		}
	})

	t.Run("DenyLoopbackRefusesLocalServer", func(t *testing.T) {
		srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
		d := newDeliverer(t, httpdelivery.Config{DenyCIDRs: loopback})
		res := deliverOne(t, d, testEvent("e1", srv.URL))
		if !errors.Is(res.Err, httpdelivery.ErrTargetRefused) || !res.Permanent {
			t.Fatalf("result = %+v, want permanent ErrTargetRefused", res)
		}
		if n := conns.Load(); n != 0 {
			t.Errorf("server accepted %d connections, want 0", n)
		}
	})

	t.Run("ChecksResolvedAddressOfHostName", func(t *testing.T) {
		// "localhost" is not a denied literal; only its resolved address is.
		srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
		port := srv.Listener.Addr().(*net.TCPAddr).Port
		d := newDeliverer(t, httpdelivery.Config{DenyCIDRs: loopback})
		res := deliverOne(t, d, testEvent("e1", "http://localhost:"+strconv.Itoa(port)+"/"))
		if !errors.Is(res.Err, httpdelivery.ErrTargetRefused) || !res.Permanent || conns.Load() != 0 {
			t.Fatalf("result = %+v with %d connections, want permanent ErrTargetRefused and none", res, conns.Load())
		}
	})

	t.Run("AllowCIDRsOpensHoleInDeniedRange", func(t *testing.T) {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
		d := newDeliverer(t, httpdelivery.Config{
			DenyCIDRs:  loopback,
			AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		})
		if res := deliverOne(t, d, testEvent("e1", srv.URL)); res.Err != nil {
			t.Fatalf("delivery to allowed %s: %v", srv.URL, res.Err)
		}
	})
}

// TestDeliverConcurrentCallers runs several Deliver calls at once on one
// Deliverer, for the race detector.
func TestDeliverConcurrentCallers(t *testing.T) {
	var hits atomic.Int64
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	d := newDeliverer(t, httpdelivery.Config{Concurrency: 4})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			events := make([]*model.Event, 20)
			for i := range events {
				events[i] = testEvent("c"+strconv.Itoa(c)+"e"+strconv.Itoa(i), srv.URL)
			}
			for i, res := range d.Deliver(context.Background(), events) {
				if res.Err != nil {
					t.Errorf("caller %d event %d: %v", c, i, res.Err)
				}
			}
		})
	}
	wg.Wait()
	if hits.Load() != 80 {
		t.Fatalf("server saw %d requests, want 80", hits.Load())
	}
}

// newBenchServer starts a real 127.0.0.1 listener for a benchmark and returns
// its URL.
func newBenchServer(b *testing.B, h http.HandlerFunc) string {
	b.Helper()
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv.URL
}

// A tenant's target rule in the context judges the address a name resolves
// to, at dial: "localhost" is refused for a tenant whose ranges do not hold
// 127.0.0.1 (Permanent, ErrTargetRefused), even right after another tenant
// left a kept connection to it, and allowed for one whose ranges or host
// patterns do.
func TestTenantRuleAfterResolution(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	target := "http://localhost:" + port + "/hook"
	d := newDeliverer(t, httpdelivery.Config{})
	rule := func(hosts, cidrs []string) *netguard.TargetRule {
		r, err := netguard.NewTargetRule(hosts, cidrs, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	deliver := func(tenant string, r *netguard.TargetRule) delivery.Result {
		ctx := netguard.WithTargetRule(context.Background(), tenant, r)
		return d.Deliver(ctx, []*model.Event{testEvent("e-"+tenant, target)})[0]
	}
	if r := deliver("open", nil); r.Err != nil {
		t.Fatalf("no rule: %v", r.Err)
	}
	if r := deliver("inRange", rule(nil, []string{"127.0.0.0/8"})); r.Err != nil {
		t.Fatalf("127.0.0.0/8: %v", r.Err)
	}
	if r := deliver("byName", rule([]string{"localhost"}, []string{"10.0.0.0/8"})); r.Err != nil {
		t.Fatalf("host pattern localhost: %v", r.Err)
	}
	for _, tenant := range []string{"outOfRange", "outOfRange"} { // its own pool: no kept connection
		r := deliver(tenant, rule(nil, []string{"10.0.0.0/8"}))
		if r.Err == nil || !r.Permanent || !errors.Is(r.Err, httpdelivery.ErrTargetRefused) {
			t.Fatalf("10.0.0.0/8 only: %+v, want a permanent refusal", r)
		}
	}
}

func TestDeliverConnections(t *testing.T) {
	t.Run("ConsumerClosedIdleConnection", func(t *testing.T) {
		// A consumer closes kept connections it finds idle (Node's
		// keepAliveTimeout, for one): the next event must not fail on it.
		closed := make(chan struct{}, 4)
		var conns atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				conns.Add(1)
			case http.StateClosed:
				closed <- struct{}{}
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		d := newDeliverer(t, httpdelivery.Config{})
		if res := deliverOne(t, d, testEvent("e1", srv.URL)); res.Err != nil {
			t.Fatalf("first delivery: %v", res.Err)
		}
		srv.CloseClientConnections()
		<-closed
		if res := deliverOne(t, d, testEvent("e2", srv.URL)); res.Err != nil {
			t.Fatalf("delivery after the consumer closed the idle connection: %v", res.Err)
		}
		if n := conns.Load(); n != 2 {
			t.Fatalf("%d connections, want 2", n)
		}
	})

	t.Run("MaxConnsPerHostBelowConcurrency", func(t *testing.T) {
		srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
		d := newDeliverer(t, httpdelivery.Config{Concurrency: 16, MaxConnsPerHost: 4})
		events := make([]*model.Event, 64)
		for i := range events {
			events[i] = testEvent("e"+strconv.Itoa(i), srv.URL)
		}
		for i, res := range d.Deliver(context.Background(), events) {
			if res.Err != nil {
				t.Fatalf("event %d: %v", i, res.Err)
			}
		}
		if n := conns.Load(); n > 4 {
			t.Fatalf("%d connections opened, want at most MaxConnsPerHost 4", n)
		}
	})

	t.Run("GzipErrorBodyInError", func(t *testing.T) {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Accept-Encoding") != "gzip" {
				t.Errorf("Accept-Encoding = %q, want gzip", r.Header.Get("Accept-Encoding"))
			}
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(http.StatusInternalServerError)
			zw := gzip.NewWriter(w)
			_, _ = io.WriteString(zw, "consumer says no")
			_ = zw.Close()
		})
		d := newDeliverer(t, httpdelivery.Config{})
		res := deliverOne(t, d, testEvent("e1", srv.URL))
		if res.Err == nil || res.StatusCode != 500 || !strings.Contains(res.Err.Error(), "consumer says no") {
			t.Fatalf("result = %+v, want a 500 whose error holds the decompressed body", res)
		}
		// The connection is not kept (its body was decompressed); the next
		// event still goes.
		if res := deliverOne(t, d, testEvent("e2", srv.URL)); res.StatusCode != 500 {
			t.Fatalf("second delivery: %+v", res)
		}
	})
}

func TestDeliverSmallBatch(t *testing.T) {
	t.Run("ConsumerHasEveryRequestAtOnce", func(t *testing.T) {
		// Each request is answered only once all four have arrived: a
		// deliverer that waited for one answer before sending the next
		// request would time out.
		const n = 4
		var arrived sync.WaitGroup
		arrived.Add(n)
		all := make(chan struct{})
		go func() { arrived.Wait(); close(all) }()
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			arrived.Done()
			select {
			case <-all:
			case <-r.Context().Done():
			}
		})
		d := newDeliverer(t, httpdelivery.Config{Timeout: 2 * time.Second})
		events := make([]*model.Event, n)
		for i := range events {
			events[i] = testEvent("e"+strconv.Itoa(i), srv.URL)
		}
		for i, res := range d.Deliver(context.Background(), events) {
			if res.Err != nil {
				t.Fatalf("event %d: %v", i, res.Err)
			}
		}
	})

	t.Run("MoreEventsThanConnections", func(t *testing.T) {
		srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
		d := newDeliverer(t, httpdelivery.Config{MaxConnsPerHost: 2, Timeout: 2 * time.Second})
		events := make([]*model.Event, 7)
		for i := range events {
			events[i] = testEvent("e"+strconv.Itoa(i), srv.URL)
		}
		for i, res := range d.Deliver(context.Background(), events) {
			if res.Err != nil {
				t.Fatalf("event %d: %v", i, res.Err)
			}
		}
		if n := conns.Load(); n > 2 {
			t.Fatalf("%d connections opened, want at most MaxConnsPerHost 2", n)
		}
	})
}
