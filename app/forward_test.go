package app_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// twoOnMongo starts two instances, a and b, sharing one MongoDB-protocol
// store (a FerretDB of the test's own unless SCHEDULER_TEST_MONGO_URI names
// a server), with
// short leases (6s) so that they split the shards within seconds, HTTP targets
// allowed on loopback.
func twoOnMongo(t testing.TB) (insts [2]*app.App, calls [2]apiCall) {
	t.Helper()
	uri := ""
	if mongotest.IsRealMongo() {
		uri = mongotest.URI(t)
	} else {
		// FerretDB with its write-serialising proxy, for the per-document
		// atomicity MongoDB has (docs/reliability.md): without it two
		// processes' token writes can both apply and the bound would not be
		// the product's.
		base, stop, err := mongotest.StartConfig(t.Context(), mongotest.Config{Dir: t.TempDir(), SerializeWrites: true})
		if err != nil {
			t.Fatalf("start FerretDB: %v", err)
		}
		t.Cleanup(stop)
		if uri, err = mongotest.WithDatabase(base, mongotest.DatabaseName(t)); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range []string{"a", "b"} {
		insts[i], calls[i] = runApp(t, map[string]string{
			"SCHEDULER_STORE": "mongo", "SCHEDULER_MONGO_URI": uri,
			"SCHEDULER_ADMIN_KEY": "admin-key-for-tests-0123456789", "SCHEDULER_SIGNING_SECRET": "signing-secret-for-tests-0123",
			"SCHEDULER_INSTANCE_ID": id, "SCHEDULER_LEASE_TTL": "6s", "SCHEDULER_SHARDS": "4",
			"SCHEDULER_HTTP_ALLOW_CIDRS": "127.0.0.0/8", "SCHEDULER_LOG_LEVEL": "warn",
			// Forwarding is what makes early dispatch safe across instances.
			"SCHEDULER_EARLY_DISPATCH": "on",
		})
	}
	return insts, calls
}

// waitSplit waits until each of the two instances holds half the shards.
func waitSplit(t testing.TB, insts [2]*app.App) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h0, ok0 := metric(insts[0], `schedulerd_leases_held{group="handler"}`)
		h1, ok1 := metric(insts[1], `schedulerd_leases_held{group="handler"}`)
		if ok0 && ok1 && h0 == 2 && h1 == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the two instances did not split the shards within 30s")
		}
		time.Sleep(200 * time.Millisecond) // polling the instances' lease gauges
	}
}

// metric reads a sample of the app's /metrics: name with its labels, as
// the exposition format writes it. ok is false if there is none.
func metric(a *app.App, name string) (v float64, ok bool) {
	resp, err := http.Get("http://" + a.Addr() + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if s, found := strings.CutPrefix(sc.Text(), name+" "); found {
			v, err := strconv.ParseFloat(s, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// nonOwnerConsumer is an HTTP consumer on 127.0.0.1 that releases each
// event at once, through the instance that did NOT deliver it (so through
// one that does not own the event's policy), retrying a 503 after its
// Retry-After. It records the most events it held at once.
type nonOwnerConsumer struct {
	bases [2]string
	work  time.Duration

	mu        sync.Mutex
	held      int
	most      int
	delivered map[string]int
	released  map[string]bool
	retries   int
	errs      []string
	done      chan string
}

func (c *nonOwnerConsumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m delivery.Message
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.delivered[m.EventID]++
	c.held++
	c.most = max(c.most, c.held)
	c.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	// Work takes a moment, so that the policy's tokens are all out
	// at once and a delivery beyond them would be seen.
	time.AfterFunc(c.work, func() { c.release(m) })
}

func (c *nonOwnerConsumer) release(m delivery.Message) {
	other := c.bases[0]
	if strings.HasPrefix(m.Release.URL, c.bases[0]) {
		other = c.bases[1]
	}
	url := other + strings.TrimPrefix(strings.TrimPrefix(m.Release.URL, c.bases[0]), c.bases[1])
	// The work is done: the token may go to the next event from here on.
	c.mu.Lock()
	c.held--
	c.mu.Unlock()
	body, _ := json.Marshal(map[string]string{"token": m.Release.Token})
	for try := 0; ; try++ {
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			c.fail(fmt.Sprintf("release %s: %v", m.EventID, err))
			return
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && try < 30 {
			c.mu.Lock()
			c.retries++
			c.mu.Unlock()
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(time.Duration(max(secs, 1)) * time.Second) // the consumer's back-off, as Retry-After asks
			continue
		}
		if resp.StatusCode != http.StatusOK {
			c.fail(fmt.Sprintf("release %s at %s: status %d", m.EventID, url, resp.StatusCode))
			return
		}
		break
	}
	c.mu.Lock()
	first := !c.released[m.EventID]
	c.released[m.EventID] = true
	c.mu.Unlock()
	if first {
		c.done <- m.EventID
	}
}

func (c *nonOwnerConsumer) fail(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, msg)
}

// Two instances on one MongoDB store, early dispatch on, and a consumer
// that releases every event through the instance that does not own its
// policy: each release is forwarded to the owner, the policy's bound holds
// at every delivery, and every event is delivered once and released.
func TestReleaseThroughNonOwnerOnMongo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts FerretDB")
	}
	insts, calls := twoOnMongo(t)
	const n, maxInFlight = 16, 2
	c := &nonOwnerConsumer{work: 100 * time.Millisecond, delivered: map[string]int{}, released: map[string]bool{}, done: make(chan string, n)}
	for i, a := range insts {
		c.bases[i] = "http://" + a.Addr()
	}
	consumer := httptest.NewServer(c)
	defer consumer.Close()

	// Both instances hold shards before the fire: each release then has an
	// owner, and the consumer's other instance is not it.
	waitSplit(t, insts)

	a, call := insts[0], calls[0]
	key := tenantKey(a, call)
	pol := call(http.MethodPost, key, "/v1/policies", map[string]any{"name": "p", "maxInFlight": maxInFlight, "tokenTimeout": "10m"}, http.StatusCreated)
	sched := call(http.MethodPost, key, "/v1/schedules", map[string]any{
		"name": "s", "cron": "0 3 * * *", "eventCount": n, "policyId": pol["id"],
		"target": map[string]any{"type": "http", "url": consumer.URL + "/hook"},
	}, http.StatusCreated)
	call(http.MethodPost, key, "/v1/schedules/"+sched["id"].(string)+"/trigger", nil, http.StatusAccepted)

	guard := time.After(90 * time.Second) // a guard, not a synchronisation
	for range n {
		select {
		case <-c.done:
		case <-guard:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("%d of %d events released in 90s; errors %v", len(c.released), n, c.errs)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs {
		t.Error(e)
	}
	if c.most > maxInFlight {
		t.Errorf("the consumer held %d events of the policy at once, maxInFlight %d", c.most, maxInFlight)
	}
	if len(c.delivered) != n {
		t.Errorf("%d events delivered, want %d", len(c.delivered), n)
	}
	for id, k := range c.delivered {
		if k != 1 {
			t.Errorf("event %s delivered %d times", id, k)
		}
	}
	f0, ok0 := metric(insts[0], "schedulerd_token_forwards_total")
	f1, ok1 := metric(insts[1], "schedulerd_token_forwards_total")
	if !ok0 || !ok1 {
		t.Fatal("/metrics has no schedulerd_token_forwards_total")
	}
	forwards := f0 + f1
	if forwards < n {
		t.Errorf("%v releases forwarded, want at least %d (every release reached a non-owner)", forwards, n)
	}
	t.Logf("%d events, most held at once %d, %v forwarded, %d 503 retries", n, c.most, forwards, c.retries)
}
