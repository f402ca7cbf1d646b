package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// keyedEvents makes n events for each of keys customers of policy pol,
// their payload naming the customer.
func keyedEventsHTTP(keys, n int, url string) []*model.Event {
	var evs []*model.Event
	for k := range keys {
		for _, e := range makeEvents(n, evOpts{schedule: fmt.Sprint("s", k), policy: "pol", url: url, launch: time.Now().Add(-time.Second)}) {
			e.Payload = json.RawMessage(fmt.Sprintf(`{"customerId":"c%d"}`, k))
			evs = append(evs, e)
		}
	}
	return evs
}

// TestKeyedBoundHTTP: a policy keyed by customer (2 per customer, 30 in
// all), 20 customers, delivered to a consumer over HTTP on 127.0.0.1 that
// releases each event after a random time: at every delivery no customer
// holds more than 2 and the consumer no more than 30.
func TestKeyedBoundHTTP(t *testing.T) {
	seed := testseed.Get(t, "HANDLER_TEST_SEED", 1)
	rng := rand.New(rand.NewPCG(seed, 2))
	const perKey, total, keys, each = 2, 30, 20, 12
	st := openStore(t)
	createPolicy(t, st, &model.Policy{ID: "pol", MaxInFlight: perKey, MaxInFlightTotal: total, ConcurrencyKey: "/customerId", TokenTimeout: time.Minute})
	ctx := context.Background()
	var h *handler.Handler
	started := make(chan struct{}) // h is set
	var mu sync.Mutex
	held := map[string]int{}
	all := 0
	var overKey, overTotal, released atomic.Int64
	done := make(chan struct{})
	srv := consumer(t, func(m delivery.Message, _ http.ResponseWriter, _ *http.Request) {
		k := model.ConcurrencyKeyOf("/customerId", "", m.Payload)
		mu.Lock()
		held[k]++
		all++
		if held[k] > perKey {
			overKey.Add(1)
		}
		if all > total {
			overTotal.Add(1)
		}
		d := time.Duration(rng.IntN(20_000)) * time.Microsecond
		mu.Unlock()
		time.AfterFunc(d, func() {
			<-started
			mu.Lock()
			held[k]--
			all--
			mu.Unlock()
			cur, err := st.EventGetByID(ctx, m.EventID)
			if err == nil {
				_, err = throttleOf(h).Release(ctx, cur, time.Now())
			}
			if err != nil {
				t.Error(err)
			}
			if released.Add(1) == keys*each {
				close(done)
			}
		})
	})
	insert(t, st, keyedEventsHTTP(keys, each, srv.URL))
	h = startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	close(started)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%d of %d released", released.Load(), keys*each)
	}
	if overKey.Load() > 0 || overTotal.Load() > 0 {
		t.Fatalf("%d deliveries found a customer over %d, %d the consumer over %d", overKey.Load(), perKey, overTotal.Load(), total)
	}
}

// BenchmarkThrottledRateKeyed is BenchmarkThrottledRate with a policy keyed
// by customer: 1,000 customers, 1 token each, 100 in all, release after
// 10 ms; the bound is 10,000 events/s. KEYED_BENCH_UNKEYED=1 runs the same
// events under an unkeyed policy of 100, to compare.
func BenchmarkThrottledRateKeyed(b *testing.B) {
	const keys, each = 1000, 40
	const n = keys * each
	for range b.N {
		b.StopTimer()
		st := openStore(b)
		pol := &model.Policy{ID: "pol", MaxInFlight: 1, MaxInFlightTotal: 100, ConcurrencyKey: "/customerId", TokenTimeout: time.Minute}
		if os.Getenv("KEYED_BENCH_UNKEYED") == "1" {
			pol = &model.Policy{ID: "pol", MaxInFlight: 100, TokenTimeout: time.Minute}
		}
		createPolicy(b, st, pol)
		insert(b, st, keyedEventsHTTP(keys, each, "http://sink"))
		var h *handler.Handler
		started := make(chan struct{}) // h is set
		var released atomic.Int64
		var inFlight, maxIn atomic.Int64
		ctx := context.Background()
		sk := &sink{onDel: func(now time.Time, evs []*model.Event) {
			for _, e := range evs {
				if v := inFlight.Add(1); v > maxIn.Load() {
					maxIn.Store(v)
				}
				id := e.ID
				time.AfterFunc(10*time.Millisecond, func() {
					<-started
					inFlight.Add(-1)
					cur, err := st.EventGetByID(ctx, id)
					if err == nil {
						_, err = throttleOf(h).Release(ctx, cur, time.Now())
					}
					if err != nil {
						b.Error(err)
					}
					released.Add(1)
				})
			}
		}}
		b.StartTimer()
		h = benchHandler(b, st, handler.Config{}, sk, handler.Hooks{}, func(c *throttle.Config, _ *throttle.Deps) {
			c.AcquireBatch, c.EarlyDispatch = 100, os.Getenv("EARLY_DISPATCH") != "0"
		})
		close(started)
		waitCount(b, &sk.n, 2_000, time.Minute)
		t0, c0 := time.Now(), sk.n.Load()
		waitCount(b, &sk.n, n-2_000, 2*time.Minute)
		t1, c1 := time.Now(), sk.n.Load()
		waitCount(b, &released, n, time.Minute)
		b.StopTimer()
		rate := float64(c1-c0) / t1.Sub(t0).Seconds()
		b.ReportMetric(rate, "events/s")
		b.ReportMetric(100*rate/10_000, "%-of-bound")
		b.Logf("1,000 keys, 1 per key, 100 in all (unkeyed: %v), release after 10ms: %.0f events/s = %.0f%% of the 10,000/s bound; at most %d held at once",
			pol.ConcurrencyKey == "", rate, 100*rate/10_000, maxIn.Load())
		if maxIn.Load() > 100 {
			b.Errorf("%d events held tokens at once, max 100", maxIn.Load())
		}
	}
}
