package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/throttle"
)

const testShards = 4

// shards is a hand-driven handler.Shards.
type shards struct {
	mu      sync.Mutex
	held    map[int]int64
	changed chan struct{}
}

func allShards(fence int64) *shards {
	s := &shards{changed: make(chan struct{}, 1)}
	s.set(fence)
	return s
}

// set holds every shard under fence (0: none).
func (s *shards) set(fence int64) {
	s.mu.Lock()
	s.held = map[int]int64{}
	if fence > 0 {
		for i := range testShards {
			s.held[i] = fence
		}
	}
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *shards) Held() map[int]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int64, len(s.held))
	for k, v := range s.held {
		out[k] = v
	}
	return out
}

func (s *shards) Owns(shard int, fence int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.held[shard]
	return ok && f == fence
}

func (s *shards) Changed() <-chan struct{} { return s.changed }

func (s *shards) Refence(int) {}

func openStore(t testing.TB) *embedded.Store {
	t.Helper()
	dir := t.TempDir()
	if base := os.Getenv("STORE_DIR"); base != "" {
		// For benchmarks on another file system (e.g. /dev/shm).
		d, err := os.MkdirTemp(base, "handler-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(d) })
		dir = d
	}
	var opts embedded.Options
	if d, err := time.ParseDuration(os.Getenv("STORE_BATCH_DELAY")); err == nil {
		opts.BatchDelay = d
	}
	st, err := embedded.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// consumer is an HTTP consumer listening on 127.0.0.1.
func consumer(t testing.TB, h func(m delivery.Message, w http.ResponseWriter, r *http.Request)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m delivery.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			t.Errorf("consumer: bad body: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h(m, w, r)
	}))
	if host, _, _ := net.SplitHostPort(srv.Listener.Addr().String()); host != "127.0.0.1" {
		t.Fatalf("consumer listens on %s", host)
	}
	t.Cleanup(srv.Close)
	return srv
}

func httpDeliverer(t testing.TB, timeout time.Duration) *httpdelivery.Deliverer {
	t.Helper()
	d, err := httpdelivery.New(httpdelivery.Config{
		SigningSecret:  []byte("test-secret"),
		ReleaseBaseURL: "http://127.0.0.1:1",
		Timeout:        timeout,
		Concurrency:    256, MaxIdleConnsPerHost: 256,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

type evOpts struct {
	schedule    string
	policy      string
	url         string
	launch      time.Time
	spread      time.Duration // launch times spread over this
	maxAttempts int
	priority    int
}

// makeEvents builds n pending events like the emitter does.
func makeEvents(n int, o evOpts) []*model.Event {
	evs := make([]*model.Event, n)
	fire := o.launch.Truncate(time.Second)
	for i := range n {
		// Wall clock only, as the store returns it: lateness measured
		// against it is on the clock the handler waits on, whatever a
		// step of the wall clock does to the monotonic one.
		launch := o.launch.Round(0)
		if o.spread > 0 && n > 1 {
			launch = launch.Add(o.spread * time.Duration(i) / time.Duration(n-1))
		}
		e := &model.Event{
			ID: fmt.Sprintf("%s.%d.%d", o.schedule, fire.Unix(), i), TenantID: "t1", ScheduleID: o.schedule,
			FireID: fmt.Sprintf("%s.%d", o.schedule, fire.Unix()), FireTime: fire, Index: i, Count: n,
			LaunchAt: launch, PolicyID: o.policy, Priority: o.priority,
			Target: model.Target{Type: model.TargetHTTP, URL: o.url}, Payload: json.RawMessage(`{"k":1}`),
			MaxAttempts: o.maxAttempts, Status: model.EventPending, ReleaseToken: "rt-" + fmt.Sprint(i),
			CreatedAt: time.Now(),
		}
		e.Shard = model.ShardOf(e, testShards)
		evs[i] = e
	}
	return evs
}

func insert(t testing.TB, st *embedded.Store, evs []*model.Event) {
	t.Helper()
	for i := 0; i < len(evs); i += 5000 {
		if _, err := st.EventInsertMany(context.Background(), evs[i:min(i+5000, len(evs))]); err != nil {
			t.Fatal(err)
		}
	}
}

func createPolicy(t testing.TB, st *embedded.Store, p *model.Policy) {
	t.Helper()
	if p.TenantID == "" {
		p.TenantID = "t1"
	}
	if p.Name == "" {
		p.Name = p.ID
	}
	if err := st.PolicyCreate(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// throttleOpt adjusts the throttle a test handler is given.
type throttleOpt func(*throttle.Config, *throttle.Deps)

// throttles maps each handler started by startHandler to its throttle.
var throttles sync.Map // *handler.Handler → *throttle.Throttle

// throttleOf returns the throttle startHandler gave h.
func throttleOf(h *handler.Handler) *throttle.Throttle {
	thr, _ := throttles.Load(h)
	return thr.(*throttle.Throttle)
}

// newThrottle builds the throttle of a handler with cfg and deps, as the
// runtime does (same shards, max attempts, store, clock).
func newThrottle(t testing.TB, cfg handler.Config, deps handler.Deps, opts ...throttleOpt) *throttle.Throttle {
	t.Helper()
	tc := throttle.Config{Shards: cfg.Shards, DefaultMaxAttempts: cfg.DefaultMaxAttempts, DrainTimeout: cfg.DrainTimeout}
	td := throttle.Deps{Store: deps.Store, Shards: deps.Shards, Clock: deps.Clock, Logger: deps.Logger}
	if deps.Metrics != nil {
		td.Metrics = deps.Metrics
	}
	for _, o := range opts {
		o(&tc, &td)
	}
	thr, err := throttle.New(tc, td)
	if err != nil {
		t.Fatal(err)
	}
	return thr
}

func startHandler(t testing.TB, cfg handler.Config, deps handler.Deps, opts ...throttleOpt) *handler.Handler {
	t.Helper()
	if cfg.Shards == 0 {
		cfg.Shards = testShards
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	if os.Getenv("TEST_LOG") != "" {
		deps.Logger = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	}
	thr := newThrottle(t, cfg, deps, opts...)
	deps.Throttle = thr
	h, err := handler.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	throttles.Store(h, thr)
	if err := thr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Stop()
		thr.Stop()
	})
	return h
}

func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func statusOf(t testing.TB, st *embedded.Store, id string) *model.Event {
	t.Helper()
	e, err := st.EventGetByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func allIn(t testing.TB, st *embedded.Store, evs []*model.Event, statuses ...model.EventStatus) bool {
	t.Helper()
	for _, e := range evs {
		cur := statusOf(t, st, e.ID)
		ok := false
		for _, s := range statuses {
			if cur.Status == s {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
