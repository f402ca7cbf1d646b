package handler_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

// batchReceiver is an http_batch consumer on 127.0.0.1: it records when
// each event arrived and the size of each request, answers with retry
// (ids to name in the retry list of the first request holding them), and
// closes done once want events arrived.
type batchReceiver struct {
	mu       sync.Mutex
	at       map[string][]time.Time // arrivals by event id
	sizes    []int
	retry    map[string]bool
	received int
	want     int
	done     chan struct{}
}

func newBatchReceiver(t *testing.T, want int, retry ...string) (*batchReceiver, string) {
	t.Helper()
	b := &batchReceiver{at: map[string][]time.Time{}, retry: map[string]bool{}, want: want, done: make(chan struct{})}
	for _, id := range retry {
		b.retry[id] = true
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var body httpdelivery.BatchBody
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("consumer: bad batch body: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var ans httpdelivery.BatchAnswer
		b.mu.Lock()
		b.sizes = append(b.sizes, len(body.Events))
		for _, m := range body.Events {
			b.at[m.EventID] = append(b.at[m.EventID], now)
			if b.retry[m.EventID] {
				delete(b.retry, m.EventID)
				ans.Retry = append(ans.Retry, m.EventID)
			}
		}
		b.received += len(body.Events)
		if b.received >= b.want && b.want > 0 {
			close(b.done)
			b.want = 0
		}
		b.mu.Unlock()
		_ = json.NewEncoder(w).Encode(ans)
	}))
	t.Cleanup(srv.Close)
	return b, srv.URL
}

func (b *batchReceiver) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(d):
		b.mu.Lock()
		defer b.mu.Unlock()
		t.Fatalf("%d events received in %s, want %d", b.received, d, b.want)
	}
}

func batchTarget(evs []*model.Event) []*model.Event {
	for _, e := range evs {
		e.Target.Type = model.TargetHTTPBatch
	}
	return evs
}

// Events of an http_batch target due at one instant reach the consumer in
// few requests, none before its launch instant; events spread over a
// window are never early either; an event the consumer names in its retry
// list is sent again and the others once.
func TestHTTPBatchThroughHandler(t *testing.T) {
	st := openStore(t)
	const burst, spread = 400, 40
	launch := time.Now().Add(400 * time.Millisecond)
	evs := batchTarget(makeEvents(burst, evOpts{schedule: "burst", launch: launch, maxAttempts: 5}))
	retried := evs[7].ID
	rec, url := newBatchReceiver(t, burst+spread+1, retried)
	for _, e := range evs {
		e.Target.URL = url
	}
	sp := batchTarget(makeEvents(spread, evOpts{schedule: "spread", url: url, launch: launch.Add(50 * time.Millisecond), spread: 300 * time.Millisecond}))
	insert(t, st, append(append([]*model.Event(nil), evs...), sp...))
	startHandler(t, handler.Config{Backoff: fastBackoff}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTPBatch: httpDeliverer(t, 5*time.Second)}})
	rec.wait(t, 15*time.Second)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	requests := len(rec.sizes)
	for _, e := range append(append([]*model.Event(nil), evs...), sp...) {
		at := rec.at[e.ID]
		want := 1
		if e.ID == retried {
			want = 2
		}
		if len(at) != want {
			t.Errorf("%s received %d times, want %d", e.ID, len(at), want)
			continue
		}
		if at[0].Before(e.LaunchAt) {
			t.Errorf("%s received %s before its launch instant", e.ID, e.LaunchAt.Sub(at[0]))
		}
	}
	// The burst alone would take 400 requests one by one; the spread
	// events go a few per launch gap at most.
	if requests > (burst+spread)/4 {
		t.Errorf("%d requests for %d events (sizes %v): not batched", requests, burst+spread+1, rec.sizes)
	}
	t.Logf("%d requests for %d events", requests, burst+spread+1)
	waitFor(t, 5*time.Second, "the outcomes written", func() bool {
		return allIn(t, st, evs, model.EventReleased) && allIn(t, st, sp, model.EventReleased)
	})
	if e := statusOf(t, st, retried); e.Attempts != 2 {
		t.Errorf("retried event: %d attempts, want 2", e.Attempts)
	}
	if e := statusOf(t, st, evs[0].ID); e.Attempts != 1 {
		t.Errorf("event not retried: %d attempts, want 1", e.Attempts)
	}
}

// The events of an adaptive policy with an http_batch target go one per
// request, so that each answer and latency reaches the limit as its own.
func TestHTTPBatchAdaptiveOnePerRequest(t *testing.T) {
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "pol", MaxInFlight: 8, TokenTimeout: time.Minute, AutoRelease: true,
		Adaptive: &model.AdaptiveLimit{Min: 1, Max: 8}})
	const n = 30
	rec, url := newBatchReceiver(t, n)
	insert(t, st, batchTarget(makeEvents(n, evOpts{schedule: "s", policy: "pol", url: url, launch: time.Now().Add(-time.Second)})))
	startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTPBatch: httpDeliverer(t, 5*time.Second)}})
	rec.wait(t, 10*time.Second)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, size := range rec.sizes {
		if size != 1 {
			t.Fatalf("request sizes %v, want 1 each", rec.sizes)
		}
	}
}

// BenchmarkBurst100kHTTPBatch is BenchmarkBurst100k delivered for real: an
// http_batch target on 127.0.0.1 whose consumer reads each request's body
// and counts its events (it does not decode them), through
// httpdelivery.
func BenchmarkBurst100kHTTPBatch(b *testing.B) {
	const n = 100_000
	for range b.N {
		b.StopTimer()
		st := openStore(b)
		var got, requests atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			c, _ := strconv.Atoi(r.Header.Get(httpdelivery.HeaderEventCount))
			requests.Add(1)
			got.Add(int64(c))
		}))
		launch := time.Now().Add(25 * time.Second)
		insert(b, st, batchTarget(makeEvents(n, evOpts{schedule: "s", url: srv.URL, launch: launch})))
		var done atomic.Int64
		h := startHandler(b, handler.Config{MaxScheduled: n}, handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTPBatch: httpDeliverer(b, 10*time.Second)},
			Hooks:      handler.Hooks{Attempted: func(*model.Event, delivery.Result, model.EventStatus) { done.Add(1) }}})
		for h.Scheduled() < n && time.Now().Before(launch) {
			time.Sleep(5 * time.Millisecond)
		}
		if h.Scheduled() < n {
			b.Logf("warning: not all events were claimed before the launch instant")
		}
		time.Sleep(time.Until(launch))
		b.StartTimer()
		lastDelivered := waitCount(b, &got, n, time.Minute)
		lastWritten := waitCount(b, &done, n, time.Minute)
		b.StopTimer()
		srv.Close()
		b.ReportMetric(lastDelivered.Sub(launch).Seconds(), "s-to-last-delivery")
		b.ReportMetric(lastWritten.Sub(launch).Seconds(), "s-to-last-write")
		b.ReportMetric(float64(requests.Load()), "requests")
		b.Logf("burst of %d to http_batch: last delivered %s after the instant in %d requests, last outcome written %s after",
			n, lastDelivered.Sub(launch).Round(time.Millisecond), requests.Load(), lastWritten.Sub(launch).Round(time.Millisecond))
	}
}
