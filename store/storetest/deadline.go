package storetest

import (
	"fmt"
	"os"
	"runtime/pprof"
	"testing"
	"time"
)

// callDeadline bounds every store call a test makes through Within: far
// above what any call of the suite takes, even on FerretDB under the race
// detector.
const callDeadline = 60 * time.Second

// Within runs fn, a store call, and ends the test binary when fn has not
// returned after d (callDeadline when d is 0), printing what was stuck and
// every goroutine's stack. A driver stuck in a call cannot be closed (its
// Close waits for the call), so failing the test alone would leave the
// binary hanging until go test's own timeout, naming no call.
func Within(t testing.TB, d time.Duration, what string, fn func()) {
	t.Helper()
	if d == 0 {
		d = callDeadline
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		fmt.Fprintf(os.Stderr, "--- FAIL: %s: %s did not return within %s; goroutines:\n", t.Name(), what, d)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		os.Exit(1)
	}
}
