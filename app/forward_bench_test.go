package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
)

// BenchmarkThrottledRateTwoInstances measures the throttled rate of one
// policy (maxInFlight 4, tokens held for no time) over two instances on one
// MongoDB-protocol store, with a consumer that releases each event at once
// either at the instance that delivered it (the release URL as given: the
// owner of the policy) or at the other one. events/s is one fire of 48
// events over the time from its first delivery to its last release (the
// emission before is not the throttle's). On FerretDB (unless
// SCHEDULER_TEST_MONGO_URI names a server) the figures compare versions on
// one store and say nothing of MongoDB's rate.
func BenchmarkThrottledRateTwoInstances(b *testing.B) {
	for _, via := range []string{"owner", "other"} {
		b.Run("release="+via, func(b *testing.B) {
			benchThrottledRate(b, via == "other")
		})
	}
}

func benchThrottledRate(b *testing.B, other bool) {
	const n, maxInFlight = 48, 4
	insts, calls := twoOnMongo(b)
	var bases [2]string
	for i, a := range insts {
		bases[i] = "http://" + a.Addr()
	}
	waitSplit(b, insts)
	var released atomic.Int64
	var first atomic.Int64 // unix nanoseconds of the round's first delivery
	done := make(chan struct{}, n)
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m delivery.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		first.CompareAndSwap(0, time.Now().UnixNano())
		w.WriteHeader(http.StatusOK)
		go func() {
			url := m.Release.URL
			if other {
				from, to := bases[0], bases[1]
				if !strings.HasPrefix(url, from) {
					from, to = to, from
				}
				url = to + strings.TrimPrefix(url, from)
			}
			body, _ := json.Marshal(map[string]string{"token": m.Release.Token})
			for range 30 {
				resp, err := http.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable {
					break
				}
				time.Sleep(time.Second) // Retry-After
			}
			released.Add(1)
			done <- struct{}{}
		}()
	}))
	defer consumer.Close()

	a, call := insts[0], calls[0]
	key := tenantKey(a, call)
	pol := call(http.MethodPost, key, "/v1/policies", map[string]any{"name": "p", "maxInFlight": maxInFlight, "tokenTimeout": "10m"}, http.StatusCreated)
	sched := call(http.MethodPost, key, "/v1/schedules", map[string]any{
		"name": "s", "cron": "0 3 * * *", "eventCount": n, "policyId": pol["id"],
		"target": map[string]any{"type": "http", "url": consumer.URL + "/hook"},
	}, http.StatusCreated)
	b.ResetTimer()
	var total time.Duration
	for range b.N {
		first.Store(0)
		call(http.MethodPost, key, "/v1/schedules/"+sched["id"].(string)+"/trigger", nil, http.StatusAccepted)
		for range n {
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				b.Fatalf("%d events released in 5 minutes", released.Load())
			}
		}
		total += time.Since(time.Unix(0, first.Load()))
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "events/s")
}
