package testseed_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
)

func TestGet(t *testing.T) {
	const env = "TESTSEED_TEST_SEED"
	t.Setenv(env, "")
	if got := testseed.Get(t, env, 7); got != 7 {
		t.Fatalf("unset: %d, want the default 7", got)
	}
	t.Setenv(env, "42")
	if got := testseed.Get(t, env, 7); got != 42 {
		t.Fatalf("%s=42: %d", env, got)
	}
	if got := testseed.GetOrClock(t, env); got != 42 {
		t.Fatalf("GetOrClock with %s=42: %d", env, got)
	}
	t.Setenv(env, "")
	if a, b := testseed.GetOrClock(t, env), testseed.GetOrClock(t, env); a == b {
		t.Fatalf("two seeds from the clock are both %d", a)
	}
}

// A value that is not a seed fails the test that asked, naming the
// variable.
func TestGetRefusesBadValue(t *testing.T) {
	const env = "TESTSEED_TEST_SEED"
	for _, bad := range []string{"-1", "x", "1.5"} {
		t.Setenv(env, bad)
		rec := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			testseed.Get(rec, env, 1)
		}()
		<-done
		if !strings.Contains(rec.fatal, env) {
			t.Errorf("%s=%q: fatal %q, want one naming %s", env, bad, rec.fatal, env)
		}
	}
}

// recorder is a testing.TB whose Fatalf records and ends its goroutine.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Fatalf(f string, a ...any) {
	r.fatal = fmt.Sprintf(f, a...)
	runtime.Goexit()
}
