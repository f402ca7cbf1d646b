package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the log lines whose message starts with prefix.
func (l *lockedLog) lines(t *testing.T, prefix string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("log line %q: %v", s, err)
		}
		if msg, _ := m["message"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, m)
		}
	}
	return out
}

type failureCounts struct {
	handler.NopMetrics
	mu   sync.Mutex
	n    map[delivery.Reason]int
	dead map[string]int
}

func (m *failureCounts) Dead(priority string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead == nil {
		m.dead = map[string]int{}
	}
	m.dead[priority] += n
}

func (m *failureCounts) deadOf(priority string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dead[priority]
}

func (m *failureCounts) DeliveryFailed(r delivery.Reason, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[delivery.Reason]int{}
	}
	m.n[r] += n
}

func (m *failureCounts) get(r delivery.Reason) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[r]
}

// closedPort returns an address on which nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// Deliveries to a consumer that refuses connections are logged, one line
// per target per interval with the count of lines left out, and counted by
// reason.
func TestFailedDeliveriesAreLoggedAndCounted(t *testing.T) {
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 2, 59, 0, 0, time.UTC))
	url := "http://" + closedPort(t) + "/hook"
	launch := clock.Now().Add(time.Second)
	dead := makeEvents(30, evOpts{schedule: "s1", url: url, launch: launch, maxAttempts: 1})
	for _, e := range dead[:10] {
		e.Priority = 2
	}
	insert(t, st, dead)
	var logs lockedLog
	m := &failureCounts{}
	var attempted atomic.Int32
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock, Metrics: m,
		Logger:     zerolog.New(&logs),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)},
		Hooks:      handler.Hooks{Attempted: func(*model.Event, delivery.Result, model.EventStatus) { attempted.Add(1) }}})
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "30 events in the timer heap", func() bool { return h.Scheduled() == 30 })
	clock.Advance(time.Second)
	waitFor(t, 10*time.Second, "30 outcomes", func() bool { return attempted.Load() == 30 })
	if !allIn(t, st, dead, model.EventDead) {
		t.Fatal("events to a refusing consumer with maxAttempts 1 are not dead")
	}
	if n := m.get(delivery.ReasonRefused); n != 30 {
		t.Errorf("%d failures counted as refused, want 30", n)
	}
	if h, d := m.deadOf("high"), m.deadOf("default"); h != 10 || d != 20 {
		t.Errorf("dead counted %d high and %d default, want 10 and 20", h, d)
	}
	lines := logs.lines(t, "delivery failed")
	if len(lines) != 1 {
		t.Fatalf("%d log lines for 30 dead deliveries to one target within one interval, want 1", len(lines))
	}
	host := strings.TrimPrefix(strings.TrimSuffix(url, "/hook"), "http://")
	if l := lines[0]; l["level"] != "error" || l["target"] != host || l["reason"] != "refused" || l["eventId"] == nil {
		t.Errorf("dead line %v", l)
	}

	// The next interval: one line, with the count of those left out.
	clock.Advance(11 * time.Second)
	later := makeEvents(1, evOpts{schedule: "s2", url: url, launch: clock.Now(), maxAttempts: 1})
	insert(t, st, later)
	if err := h.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "31 outcomes", func() bool { return attempted.Load() == 31 })
	lines = logs.lines(t, "delivery failed")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2", len(lines))
	}
	if s, _ := lines[1]["suppressed"].(float64); s != 29 {
		t.Errorf("second line reports %v suppressed, want 29: %v", lines[1]["suppressed"], lines[1])
	}
}
