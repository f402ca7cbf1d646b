package httpdelivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/internal/netguard"
	"github.com/schedulerd/schedulerd/model"
)

// batchEvent is testEvent with an http_batch target.
func batchEvent(id, target string) *model.Event {
	e := testEvent(id, target)
	e.Target.Type = model.TargetHTTPBatch
	return e
}

// received is one request a batchConsumer took.
type received struct {
	path   string
	count  string // the event count header
	ids    []string
	sigErr error
	bytes  int
	body   httpdelivery.BatchBody
}

// batchConsumer is a consumer on 127.0.0.1 that records each batch request,
// checks its signature and answers with answer (nil: 204).
type batchConsumer struct {
	mu   sync.Mutex
	reqs []received
	url  string
}

func newBatchConsumer(t *testing.T, answer func(w http.ResponseWriter, got received)) *batchConsumer {
	t.Helper()
	c := &batchConsumer{}
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
			return
		}
		got := received{path: r.URL.Path, count: r.Header.Get(httpdelivery.HeaderEventCount), bytes: len(body)}
		v := consumer.Verifier{Secrets: [][]byte{testSecret}, Now: func() time.Time { return testNow }}
		_, got.sigErr = v.Verify(r.Header.Get(httpdelivery.HeaderSignature), r.Header.Get(httpdelivery.HeaderTimestamp), body)
		if err := json.Unmarshal(body, &got.body); err != nil {
			t.Errorf("batch body %q: %v", body, err)
		}
		for _, m := range got.body.Events {
			got.ids = append(got.ids, m.EventID)
		}
		c.mu.Lock()
		c.reqs = append(c.reqs, got)
		c.mu.Unlock()
		if answer != nil {
			answer(w, got)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	c.url = srv.URL
	return c
}

func (c *batchConsumer) requests() []received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs)
}

func TestDeliverBatch(t *testing.T) {
	t.Run("GroupsByURLSignedWithCount", func(t *testing.T) {
		c := newBatchConsumer(t, nil)
		d := newDeliverer(t, httpdelivery.Config{})
		events := []*model.Event{
			batchEvent("a1", c.url+"/a"), batchEvent("b1", c.url+"/b"), batchEvent("a2", c.url+"/a"),
			batchEvent("b2", c.url+"/b"), batchEvent("a3", c.url+"/a"),
		}
		for i, r := range d.Deliver(context.Background(), events) {
			if r.Err != nil || r.StatusCode != http.StatusNoContent {
				t.Fatalf("event %d: %+v, want delivered with 204", i, r)
			}
		}
		reqs := c.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d requests, want one per URL (2)", len(reqs))
		}
		byPath := map[string]received{}
		for _, r := range reqs {
			byPath[r.path] = r
			if r.sigErr != nil {
				t.Fatalf("request to %s: signature: %v", r.path, r.sigErr)
			}
			if r.count != strconv.Itoa(len(r.ids)) {
				t.Fatalf("request to %s: count header %q for %d events", r.path, r.count, len(r.ids))
			}
		}
		if got := byPath["/a"].ids; !slices.Equal(got, []string{"a1", "a2", "a3"}) {
			t.Fatalf("/a got %v", got)
		}
		if got := byPath["/b"].ids; !slices.Equal(got, []string{"b1", "b2"}) {
			t.Fatalf("/b got %v", got)
		}
		// Each event's message is the one a single delivery sends.
		want := delivery.NewMessage(events[2], "https://scheduler.example")
		got := byPath["/a"].body.Events[1]
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got)
		if string(wb) != string(gb) {
			t.Fatalf("message\n%s, want\n%s", gb, wb)
		}
	})

	t.Run("SplitsAtMaxEvents", func(t *testing.T) {
		c := newBatchConsumer(t, nil)
		d := newDeliverer(t, httpdelivery.Config{BatchMaxEvents: 3})
		var events []*model.Event
		for i := range 7 {
			events = append(events, batchEvent("e"+strconv.Itoa(i), c.url))
		}
		for i, r := range d.Deliver(context.Background(), events) {
			if r.Err != nil {
				t.Fatalf("event %d: %v", i, r.Err)
			}
		}
		var sizes []int
		var ids []string
		for _, r := range c.requests() {
			sizes = append(sizes, len(r.ids))
			ids = append(ids, r.ids...)
		}
		slices.Sort(sizes)
		slices.Sort(ids)
		if !slices.Equal(sizes, []int{1, 3, 3}) {
			t.Fatalf("request sizes %v, want 3, 3 and 1", sizes)
		}
		if len(ids) != 7 || len(slices.Compact(ids)) != 7 {
			t.Fatalf("events received %v, want each of 7 once", ids)
		}
	})

	t.Run("SplitsAtMaxBytes", func(t *testing.T) {
		c := newBatchConsumer(t, nil)
		var events []*model.Event
		for i := range 6 {
			events = append(events, batchEvent("e"+strconv.Itoa(i), c.url))
		}
		msg, _ := json.Marshal(delivery.NewMessage(events[0], "https://scheduler.example"))
		// Room for two messages, not three.
		limit := len(`{"events":[]}`) + 3*len(msg) + 1
		d := newDeliverer(t, httpdelivery.Config{BatchMaxBytes: limit})
		for i, r := range d.Deliver(context.Background(), events) {
			if r.Err != nil {
				t.Fatalf("event %d: %v", i, r.Err)
			}
		}
		reqs := c.requests()
		if len(reqs) != 3 {
			t.Fatalf("%d requests, want 3 of 2 events", len(reqs))
		}
		for _, r := range reqs {
			if len(r.ids) != 2 || r.bytes > limit {
				t.Fatalf("request of %d events and %d bytes, want 2 events within %d bytes", len(r.ids), r.bytes, limit)
			}
		}
	})

	t.Run("LargeMessageGoesAlone", func(t *testing.T) {
		c := newBatchConsumer(t, nil)
		d := newDeliverer(t, httpdelivery.Config{BatchMaxBytes: 100})
		events := []*model.Event{batchEvent("e0", c.url), batchEvent("e1", c.url)}
		for i, r := range d.Deliver(context.Background(), events) {
			if r.Err != nil {
				t.Fatalf("event %d: %v", i, r.Err)
			}
		}
		if reqs := c.requests(); len(reqs) != 2 || len(reqs[0].ids) != 1 || len(reqs[1].ids) != 1 {
			t.Fatalf("requests %+v, want two of one event", reqs)
		}
	})

	t.Run("RetryListFailsOnlyNamedEvents", func(t *testing.T) {
		c := newBatchConsumer(t, func(w http.ResponseWriter, got received) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"retry":["e1","e3","not-in-this-request"]}`))
		})
		d := newDeliverer(t, httpdelivery.Config{})
		var events []*model.Event
		for i := range 4 {
			events = append(events, batchEvent("e"+strconv.Itoa(i), c.url))
		}
		rs := d.Deliver(context.Background(), events)
		for i, r := range rs {
			retry := i == 1 || i == 3
			if retry != (r.Err != nil) || r.StatusCode != http.StatusOK || r.Permanent || r.RetryAfter != 0 {
				t.Fatalf("event %d: %+v, want failed %v (retryable) with 200", i, r, retry)
			}
			if retry && (!errors.Is(r.Err, httpdelivery.ErrRetryRequested) || !strings.Contains(r.Err.Error(), events[i].ID)) {
				t.Fatalf("event %d: error %v, want ErrRetryRequested naming the event", i, r.Err)
			}
		}
	})

	t.Run("AnswerWithoutRetryListDeliversAll", func(t *testing.T) {
		for _, body := range []string{`OK`, `{"received":2}`, `{"retry":[]}`, `[1,2]`} {
			c := newBatchConsumer(t, func(w http.ResponseWriter, got received) { _, _ = w.Write([]byte(body)) })
			d := newDeliverer(t, httpdelivery.Config{})
			for i, r := range d.Deliver(context.Background(), []*model.Event{batchEvent("e0", c.url), batchEvent("e1", c.url)}) {
				if r.Err != nil {
					t.Fatalf("answer %s: event %d: %v", body, i, r.Err)
				}
			}
		}
	})

	t.Run("TooManyRequestsRetryAfterForAll", func(t *testing.T) {
		c := newBatchConsumer(t, func(w http.ResponseWriter, got received) {
			w.Header().Set("Retry-After", "30")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		})
		d := newDeliverer(t, httpdelivery.Config{})
		events := []*model.Event{batchEvent("e0", c.url), batchEvent("e1", c.url), batchEvent("e2", c.url)}
		for i, r := range d.Deliver(context.Background(), events) {
			var se *httpdelivery.StatusError
			if r.RetryAfter != 30*time.Second || r.StatusCode != http.StatusTooManyRequests || r.Permanent ||
				!errors.As(r.Err, &se) || se.EventID != events[i].ID || !strings.Contains(se.Body, "slow down") {
				t.Fatalf("event %d: %+v, want a 429 naming it with Retry-After 30s", i, r)
			}
		}
		if n := len(c.requests()); n != 1 {
			t.Fatalf("%d requests, want 1", n)
		}
	})

	t.Run("ServerErrorFailsAll", func(t *testing.T) {
		c := newBatchConsumer(t, func(w http.ResponseWriter, got received) { w.WriteHeader(http.StatusBadGateway) })
		d := newDeliverer(t, httpdelivery.Config{})
		for i, r := range d.Deliver(context.Background(), []*model.Event{batchEvent("e0", c.url), batchEvent("e1", c.url)}) {
			if r.Err == nil || r.StatusCode != http.StatusBadGateway || r.Permanent {
				t.Fatalf("event %d: %+v, want a retryable 502", i, r)
			}
		}
	})

	t.Run("MixedWithHTTPEvents", func(t *testing.T) {
		c := newBatchConsumer(t, nil)
		var singles []string
		var mu sync.Mutex
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			singles = append(singles, r.Header.Get(httpdelivery.HeaderEventID))
			mu.Unlock()
		})
		d := newDeliverer(t, httpdelivery.Config{})
		events := []*model.Event{batchEvent("b0", c.url), testEvent("s0", srv.URL), batchEvent("b1", c.url), nil}
		rs := d.Deliver(context.Background(), events)
		if rs[0].Err != nil || rs[1].Err != nil || rs[2].Err != nil || rs[3].Err == nil || !rs[3].Permanent {
			t.Fatalf("results %+v", rs)
		}
		if reqs := c.requests(); len(reqs) != 1 || !slices.Equal(reqs[0].ids, []string{"b0", "b1"}) {
			t.Fatalf("batch requests %+v", reqs)
		}
		if !slices.Equal(singles, []string{"s0"}) {
			t.Fatalf("single requests %v", singles)
		}
	})

	t.Run("BadURLIsPermanent", func(t *testing.T) {
		d := newDeliverer(t, httpdelivery.Config{})
		for i, r := range d.Deliver(context.Background(), []*model.Event{batchEvent("e0", "ftp://x/"), batchEvent("e1", "ftp://x/")}) {
			if r.Err == nil || !r.Permanent {
				t.Fatalf("event %d: %+v, want permanent", i, r)
			}
		}
	})

	t.Run("SSRFGuardRefusesAll", func(t *testing.T) {
		c := newBatchConsumer(t, nil)
		d := newDeliverer(t, httpdelivery.Config{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
		for i, r := range d.Deliver(context.Background(), []*model.Event{batchEvent("e0", c.url), batchEvent("e1", c.url)}) {
			if !errors.Is(r.Err, httpdelivery.ErrTargetRefused) || !r.Permanent {
				t.Fatalf("event %d: %+v, want permanent ErrTargetRefused", i, r)
			}
		}
		if n := len(c.requests()); n != 0 {
			t.Fatalf("consumer got %d requests", n)
		}
	})

	t.Run("TenantRuleJudgesResolvedAddress", func(t *testing.T) {
		c := newBatchConsumer(t, nil)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(c.url, "http://"))
		target := "http://localhost:" + port + "/hook"
		d := newDeliverer(t, httpdelivery.Config{})
		rule, err := netguard.NewTargetRule(nil, []string{"10.0.0.0/8"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := netguard.WithTargetRule(context.Background(), "outOfRange", rule)
		for i, r := range d.Deliver(ctx, []*model.Event{batchEvent("e0", target), batchEvent("e1", target)}) {
			if !errors.Is(r.Err, httpdelivery.ErrTargetRefused) || !r.Permanent {
				t.Fatalf("event %d: %+v, want permanent ErrTargetRefused", i, r)
			}
		}
		if n := len(c.requests()); n != 0 {
			t.Fatalf("consumer got %d requests", n)
		}
	})
}

func TestNewValidatesBatchConfig(t *testing.T) {
	for _, field := range []string{"BatchMaxEvents", "BatchMaxBytes"} {
		cfg := httpdelivery.Config{SigningSecret: testSecret}
		if field == "BatchMaxEvents" {
			cfg.BatchMaxEvents = -1
		} else {
			cfg.BatchMaxBytes = -1
		}
		if _, err := httpdelivery.New(cfg); err == nil || !strings.Contains(err.Error(), field) {
			t.Fatalf("New error = %v, want one naming %s", err, field)
		}
	}
}
