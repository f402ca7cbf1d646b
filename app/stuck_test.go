package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/internal/testkit/hangstore"
	"github.com/schedulerd/schedulerd/store"
)

// hangHook returns hooks wrapping the app's store in a hangstore, and the
// wrapper (set once the app is built).
func hangHook() (app.Hooks, **hangstore.Store) {
	var w *hangstore.Store
	return app.Hooks{WrapStore: func(d store.Driver) store.Driver { w = hangstore.Wrap(d); return w }}, &w
}

// TestReadyzReportsHangingStoreWrites: with the store answering pings but
// its writes hanging, /readyz answers 503 naming the write probe.
func TestReadyzReportsHangingStoreWrites(t *testing.T) {
	hooks, w := hangHook()
	_, call := runAppWith(t, nil, hooks)
	if out := call(http.MethodGet, "", "/readyz", nil, http.StatusOK); out["checks"].(map[string]any)["storeWrite"] != "ok" {
		t.Fatalf("/readyz before the store hangs: %v", out)
	}
	(*w).Hang()
	t.Cleanup((*w).Release) // before the shutdown registered by runAppWith
	for range 2 {
		// The second call finds the first probe still hanging.
		out := call(http.MethodGet, "", "/readyz", nil, http.StatusServiceUnavailable)
		got, _ := out["checks"].(map[string]any)["storeWrite"].(string)
		if !strings.Contains(got, "store write probe") || !strings.Contains(got, "has not completed") {
			t.Fatalf("/readyz checks.storeWrite = %q, want the write probe reported hanging: %v", got, out)
		}
	}
	(*w).Release()
	call(http.MethodGet, "", "/readyz", nil, http.StatusOK)
}

// TestShutdownReturnsWhenAComponentHangs: with the store's writes hanging,
// a lease group's Stop (which hands its leases back) never returns;
// Shutdown still returns within its context, naming it.
func TestShutdownReturnsWhenAComponentHangs(t *testing.T) {
	hooks, w := hangHook()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := startApp(t, ctx, nil, hooks)
	(*w).Hang()
	t.Cleanup(func() {
		(*w).Release()
		(*w).Driver.Close()
	})
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer scancel()
	done := make(chan error, 1)
	go func() { done <- a.Shutdown(sctx) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "leases stop did not return within the shutdown timeout") {
			t.Fatalf("Shutdown returned %v, want it to name the lease group that did not stop", err)
		}
		if sctx.Err() == nil {
			t.Fatalf("Shutdown returned %v before its context ended", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown did not return 30s after its 500ms context ended")
	}
}
