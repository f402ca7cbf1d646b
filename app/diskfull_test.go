package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/testkit/smallfs"
)

// releasingConsumer is an HTTP consumer on 127.0.0.1 that answers each
// delivery at once and then releases the event, trying again while the
// release fails. allDelivered and allReleased close when n distinct events
// have been delivered and released.
type releasingConsumer struct {
	n int

	mu           sync.Mutex
	delivered    map[string]time.Time // first delivery
	released     map[string]bool
	allDelivered chan struct{}
	allReleased  chan struct{}
	stop         chan struct{}
}

func newReleasingConsumer(t *testing.T, n int) (*releasingConsumer, string) {
	c := &releasingConsumer{n: n, delivered: map[string]time.Time{}, released: map[string]bool{},
		allDelivered: make(chan struct{}), allReleased: make(chan struct{}), stop: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m delivery.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			t.Errorf("consumer: bad body: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		if _, ok := c.delivered[m.EventID]; !ok {
			c.delivered[m.EventID] = time.Now()
			if len(c.delivered) == c.n {
				close(c.allDelivered)
			}
		}
		c.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		go c.release(m)
	}))
	t.Cleanup(func() {
		close(c.stop)
		srv.Close()
	})
	return c, srv.URL
}

// release releases m's event, again every 100ms while the release fails
// (a consumer's retry).
func (c *releasingConsumer) release(m delivery.Message) {
	body, _ := json.Marshal(map[string]string{"token": m.Release.Token})
	for {
		resp, err := http.Post(m.Release.URL, "application/json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-c.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.released[m.EventID] {
		c.released[m.EventID] = true
		if len(c.released) == c.n {
			close(c.allReleased)
		}
	}
}

// firstAfter returns the first delivery after t.
func (c *releasingConsumer) firstAfter(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first time.Time
	for _, at := range c.delivered {
		if at.After(t) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

func (c *releasingConsumer) counts() (delivered, released int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.delivered), len(c.released)
}

// waitClosed waits up to d for ch, and fails the test with what otherwise.
func waitClosed(t *testing.T, ch chan struct{}, d time.Duration, what func() string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatal(what())
	}
}

// TestFullDataDisk runs the real server on a real file system of 64 MiB
// filled to the last byte while a throttled fire is being delivered: with
// the store's reserve every event is delivered and released on the full
// disk and the instance stays ready; without one the store's writes fail
// (for several lease lifetimes), /readyz and the log say so, and once the
// space is freed every event is delivered and released without a restart.
func TestFullDataDisk(t *testing.T) {
	const n = 1000
	for _, tc := range []struct {
		name    string
		reserve string
	}{{"Reserve", ""}, {"NoReserve", "0"}} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := smallfs.Mount(t, 64<<20)
			env := map[string]string{
				"SCHEDULER_DATA_DIR": filepath.Join(mnt, "data"), "SCHEDULER_HTTP_ALLOW_CIDRS": "127.0.0.0/8",
				"SCHEDULER_LOG_LEVEL": "info",
			}
			if tc.reserve != "" {
				env["SCHEDULER_STORE_RESERVE_BYTES"] = tc.reserve
				// Lease writes, and so their failures, come often.
				env["SCHEDULER_LEASE_TTL"] = "1s"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			logs := &syncBuffer{}
			a := startAppLog(t, ctx, env, app.Hooks{}, zerolog.New(logs))
			defer func() {
				if err := a.Shutdown(ctx); err != nil {
					t.Errorf("shutdown: %v", err)
				}
			}()
			call := caller(t, ctx, "http://"+a.Addr())
			key := tenantKey(a, call)
			consumer, url := newReleasingConsumer(t, n)
			pol := call(http.MethodPost, key, "/v1/policies", map[string]any{"name": "p", "maxInFlight": 20, "tokenTimeout": "10m"}, http.StatusCreated)
			s := call(http.MethodPost, key, "/v1/schedules", map[string]any{
				"name": "s", "cron": "0 3 * * *", "eventCount": n, "policyId": pol["id"],
				"target": map[string]any{"type": "http", "url": url + "/hook"},
			}, http.StatusCreated)
			fire := call(http.MethodPost, key, "/v1/schedules/"+s["id"].(string)+"/trigger", nil, http.StatusAccepted)

			reserve0, _ := metric(a, "schedulerd_store_reserve_bytes")
			filler := smallfs.Fill(t, mnt)
			filled := time.Now()
			d0, _ := consumer.counts()
			progress := func() string {
				d, r := consumer.counts()
				return fmt.Sprintf("delivered %d, released %d of %d; log:\n%s", d, r, n, logs.String())
			}
			if tc.reserve == "" {
				waitClosed(t, consumer.allReleased, 2*time.Minute, func() string { return "on the full disk: " + progress() })
				reserve1, _ := metric(a, "schedulerd_store_reserve_bytes")
				t.Logf("on the full disk: %d events delivered and released in %s, taking %.0f bytes of the reserve",
					n-d0, time.Since(filled).Round(time.Millisecond), reserve0-reserve1)
				out := call(http.MethodGet, "", "/readyz", nil, http.StatusOK)
				if d, _ := out["checks"].(map[string]any)["disk"].(string); !strings.HasPrefix(d, "full: 0 bytes free") || !strings.Contains(d, "deliveries and releases go on") {
					t.Fatalf("/readyz checks.disk = %q, want it to say the disk is full and deliveries go on", d)
				}
			} else {
				// The store's writes fail; /readyz says so.
				deadline := time.Now().Add(90 * time.Second)
				for {
					resp, err := http.Get("http://" + a.Addr() + "/readyz")
					if err != nil {
						t.Fatal(err)
					}
					var out map[string]any
					_ = json.NewDecoder(resp.Body).Decode(&out)
					resp.Body.Close()
					d, _ := out["checks"].(map[string]any)["disk"].(string)
					if resp.StatusCode == http.StatusServiceUnavailable && strings.HasPrefix(d, "full: store writes fail for lack of space") {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("/readyz answers %d %v on the full disk, want 503 saying the store's writes fail; %s", resp.StatusCode, out, progress())
					}
					time.Sleep(50 * time.Millisecond) // polling /readyz, the operator's view
				}
				if !strings.Contains(logs.String(), "data disk full: store writes fail") {
					t.Fatalf("the log does not say the store's writes fail:\n%s", logs.String())
				}
				// The store's writes keep failing: the lease groups fail
				// to write their membership twice, so that the disk stays
				// full across lease ticks (how many ticks a loaded machine
				// gets in is its own).
				deadline = time.Now().Add(2 * time.Minute)
				for strings.Count(logs.String(), `"message":"lease tick failed"`) < 2 {
					if time.Now().After(deadline) {
						t.Fatalf("the lease writes did not fail twice on the full disk; %s", progress())
					}
					time.Sleep(50 * time.Millisecond) // polling the log
				}
				d, r := consumer.counts()
				t.Logf("on the full disk for %s: %d delivered, %d released of %d", time.Since(filled).Round(time.Millisecond), d, r, n)
			}

			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			freed := time.Now()
			waitClosed(t, consumer.allReleased, 2*time.Minute, func() string { return "after space was freed: " + progress() })
			if first := consumer.firstAfter(freed); !first.IsZero() {
				t.Logf("after space was freed: the first delivery %s later, every event delivered and released in %s",
					first.Sub(freed).Round(time.Millisecond), time.Since(freed).Round(time.Millisecond))
			}
			got := call(http.MethodGet, key, "/v1/fires/"+fire["id"].(string), nil, http.StatusOK)
			if c, _ := got["counts"].(map[string]any); c["released"] != float64(n) {
				t.Fatalf("fire counts %v, want all %d released", got["counts"], n)
			}
			call(http.MethodGet, "", "/readyz", nil, http.StatusOK)
			if !strings.Contains(logs.String(), "data disk has room again") {
				t.Fatalf("the log does not say the disk has room again:\n%s", logs.String())
			}
		})
	}
}
