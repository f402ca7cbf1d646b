// Package testseed gives randomized tests their seed: a fixed default or
// the clock, or the value of an environment variable, logged so that a
// failing draw can be repeated.
package testseed

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// Get returns the seed in the environment variable env, or def when env is
// unset or empty. A value that is not a whole number fails the test.
func Get(t testing.TB, env string, def uint64) uint64 {
	t.Helper()
	seed, ok := fromEnv(t, env)
	if !ok {
		seed = def
	}
	t.Logf("seed %d (set %s to change)", seed, env)
	return seed
}

// GetOrClock is Get with a new seed from the clock each run as the
// default.
func GetOrClock(t testing.TB, env string) uint64 {
	t.Helper()
	seed, ok := fromEnv(t, env)
	if !ok {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (repeat with %s=%d)", seed, env, seed)
	return seed
}

func fromEnv(t testing.TB, env string) (uint64, bool) {
	t.Helper()
	s := os.Getenv(env)
	if s == "" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q is not a seed (a whole number from 0): %v", env, s, err)
	}
	return v, true
}
