package app_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/store/embedded"
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

// TestReadyzFullDisk: with no space left on the data disk the instance
// stays ready while the store's writes go through (in its reserve), and
// /readyz says the disk is full; once the store's writes fail for lack of
// space it is not ready and /readyz says why. The log says so once per
// change, and again when there is room.
func TestReadyzFullDisk(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(32 << 20)
	var storeFull atomic.Bool
	space := func() embedded.SpaceStatus {
		if storeFull.Load() {
			return embedded.SpaceStatus{Full: true, Err: syscall.ENOSPC}
		}
		return embedded.SpaceStatus{Reserved: 12 << 20}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	logs := &syncBuffer{}
	a := startAppLog(t, ctx, nil, app.Hooks{Disk: disk, StoreSpace: space}, zerolog.New(logs))
	t.Cleanup(func() {
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	call := caller(t, ctx, "http://"+a.Addr())
	call(http.MethodGet, "", "/readyz", nil, http.StatusOK)

	disk.free.Store(0)
	for range 2 {
		out := call(http.MethodGet, "", "/readyz", nil, http.StatusOK)
		d, _ := out["checks"].(map[string]any)["disk"].(string)
		if !strings.HasPrefix(d, "full: 0 bytes free") || !strings.Contains(d, "deliveries and releases go on in the store's reserve (12.0 MiB left)") {
			t.Fatalf("/readyz checks.disk = %q, want it to say the disk is full and deliveries go on: %v", d, out)
		}
	}
	if v, _ := metric(a, "schedulerd_store_reserve_bytes"); v != 12<<20 {
		t.Fatalf("schedulerd_store_reserve_bytes %v, want %d", v, 12<<20)
	}
	if n := strings.Count(logs.String(), "data disk full: deliveries and releases go on"); n != 1 {
		t.Fatalf("the log says the disk is full %d times, want once:\n%s", n, logs.String())
	}

	storeFull.Store(true)
	for range 2 {
		out := call(http.MethodGet, "", "/readyz", nil, http.StatusServiceUnavailable)
		if d, _ := out["checks"].(map[string]any)["disk"].(string); !strings.HasPrefix(d, "full: store writes fail for lack of space (no space left on device)") {
			t.Fatalf("/readyz checks.disk = %q, want it to say the store's writes fail: %v", d, out)
		}
	}
	if v, ok := metric(a, "schedulerd_store_out_of_space"); !ok || v != 1 {
		t.Fatalf("schedulerd_store_out_of_space %v (exported: %v), want 1", v, ok)
	}
	if n := strings.Count(logs.String(), "data disk full: store writes fail"); n != 1 {
		t.Fatalf("the log says the store's writes fail %d times, want once:\n%s", n, logs.String())
	}

	storeFull.Store(false)
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
