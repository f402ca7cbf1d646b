package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/internal/testkit/hangstore"
	"github.com/schedulerd/schedulerd/store"
)

// signalWriter sends on written after each write.
type signalWriter struct {
	lockedWriter
	written chan struct{}
}

func (w *signalWriter) Write(b []byte) (int, error) {
	n, err := w.lockedWriter.Write(b)
	select {
	case w.written <- struct{}{}:
	default:
	}
	return n, err
}

// TestShutdownTimeoutWithHangingStore runs schedulerd in process with a
// store whose writes hang from the moment shutdown begins: run returns an
// error (main exits 1) within -shutdown-timeout, and the log names the
// component that did not stop.
func TestShutdownTimeoutWithHangingStore(t *testing.T) {
	var w *hangstore.Store
	hooks := app.Hooks{WrapStore: func(d store.Driver) store.Driver { w = hangstore.Wrap(d); return w }}
	env := map[string]string{
		"SCHEDULER_LISTEN_ADDR": "127.0.0.1:0", "SCHEDULER_DATA_DIR": t.TempDir(), "SCHEDULER_SHUTDOWN_TIMEOUT": "500ms",
	}
	logs := &lockedWriter{w: &bytes.Buffer{}}
	banner := &signalWriter{lockedWriter{w: &bytes.Buffer{}}, make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runWithBanner(ctx, nil, func(k string) string { return env[k] }, logs, banner, hooks)
	}()
	select {
	case <-banner.written:
	case err := <-done:
		t.Fatalf("run returned before listening: %v", err)
	}
	w.Hang()
	t.Cleanup(func() {
		w.Release()
		w.Driver.Close()
	})
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not return within the shutdown timeout") {
			t.Fatalf("run returned %v, want the shutdown timeout's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return 30s after a 500ms shutdown timeout")
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	out := logs.w.(*bytes.Buffer).String()
	if !strings.Contains(out, `"stuck":"emitter leases"`) || !strings.Contains(out, "shutdown timed out") {
		t.Fatalf("the log does not name the component that did not stop:\n%s", out)
	}
}
