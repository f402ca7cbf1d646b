package app_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
)

// TestDiskGuardWiring checks that the app probes the data directory's disk:
// with a threshold of the whole disk (100%, and bytes beyond any disk) the
// disk is always "nearly full", so new schedules answer 507, /readyz stays
// ready and says why, and the rest of the API answers as usual.
func TestDiskGuardWiring(t *testing.T) {
	env := map[string]string{
		"SCHEDULER_DISK_MIN_FREE_BYTES":   "9223372036854775807",
		"SCHEDULER_DISK_MIN_FREE_PERCENT": "100",
	}
	a, call := runApp(t, env)
	key := tenantKey(a, call)

	p := call(http.MethodPost, key, "/v1/schedules", map[string]any{
		"name": "s", "cron": "0 3 * * *", "target": map[string]any{"type": "http", "url": "https://consumer.example.com/hook"},
	}, http.StatusInsufficientStorage)
	if d, _ := p["detail"].(string); !strings.Contains(d, "below the threshold") {
		t.Fatalf("507 without the reason: %v", p)
	}
	ready := call(http.MethodGet, "", "/readyz", nil, http.StatusOK)
	checks, _ := ready["checks"].(map[string]any)
	if d, _ := checks["disk"].(string); !strings.Contains(d, "below the threshold") {
		t.Fatalf("/readyz does not say why: %v", ready)
	}
	call(http.MethodGet, key, "/v1/schedules", nil, http.StatusOK)
	// A release is not refused by the guard (an unknown event answers 404).
	call(http.MethodPost, "", "/v1/events/ev_unknown/release", map[string]any{"token": "rt_x"}, http.StatusNotFound)
}

// fakeDisk is a free-space probe whose free bytes the test sets.
type fakeDisk struct{ free atomic.Uint64 }

func (d *fakeDisk) Usage() (free, total uint64, err error) { return d.free.Load(), 64 << 20, nil }

// TestReadyzFullDisk: with no space left on the data disk the instance is
// not ready, /readyz says the disk is full, and the log says so once, and
// again when there is room.
func TestReadyzFullDisk(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(32 << 20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	logs := &syncBuffer{}
	a := startAppLog(t, ctx, nil, app.Hooks{Disk: disk}, zerolog.New(logs))
	t.Cleanup(func() {
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	call := caller(t, ctx, "http://"+a.Addr())
	call(http.MethodGet, "", "/readyz", nil, http.StatusOK)

	disk.free.Store(0)
	for range 2 {
		out := call(http.MethodGet, "", "/readyz", nil, http.StatusServiceUnavailable)
		if d, _ := out["checks"].(map[string]any)["disk"].(string); !strings.HasPrefix(d, "full: 0 bytes free") {
			t.Fatalf("/readyz checks.disk = %q, want it to say the disk is full: %v", d, out)
		}
	}
	if n := strings.Count(logs.String(), "data disk full"); n != 1 {
		t.Fatalf("the log says the disk is full %d times, want once:\n%s", n, logs.String())
	}
	disk.free.Store(32 << 20)
	call(http.MethodGet, "", "/readyz", nil, http.StatusOK)
	if !strings.Contains(logs.String(), "data disk has room again") {
		t.Fatalf("the log does not say the disk has room again:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
