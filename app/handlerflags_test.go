package app

import (
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/handler"
)

// The handler's outcome linger and launch gap: defaults, values, 0 as off
// (a negative handler setting) and refusals naming the flag.
func TestHandlerTimingFlags(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig(nil, mongoEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.OutcomeLinger != 100*time.Millisecond || c.LaunchGap != 4*time.Millisecond {
		t.Fatalf("defaults: linger %s, gap %s; want 100ms, 4ms", c.OutcomeLinger, c.LaunchGap)
	}
	if c.MaxHeld != handler.DefaultMaxScheduled {
		t.Fatalf("default max-held-events %d, want %d", c.MaxHeld, handler.DefaultMaxScheduled)
	}
	c, err = ParseConfig([]string{"-outcome-linger", "0", "-launch-gap", "2ms", "-max-held-events", "500"}, mongoEnv(map[string]string{"SCHEDULER_LAUNCH_GAP": "9ms"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := offIfZero(c.OutcomeLinger); got >= 0 {
		t.Errorf("-outcome-linger 0 gives the handler %s, want a negative (off)", got)
	}
	if c.MaxHeld != 500 {
		t.Errorf("-max-held-events 500 gives %d", c.MaxHeld)
	}
	if got := offIfZero(c.LaunchGap); got != 2*time.Millisecond {
		t.Errorf("-launch-gap 2ms (flag over environment) gives the handler %s, want 2ms", got)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"-outcome-linger", "2s"}}, {[]string{"-outcome-linger", "-1ms"}},
		{[]string{"-launch-gap", "1s"}}, {[]string{"-launch-gap", "soon"}},
		{[]string{"-max-held-events", "9"}}, {[]string{"-max-held-events", "10000001"}},
	} {
		_, err := ParseConfig(tc.args, mongoEnv(nil))
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(tc.args[0], "-")+":") {
			t.Errorf("%v: error %v, want one naming %s", tc.args, err, tc.args[0])
		}
	}
}

// -early-dispatch: auto is on with the embedded store and off with MongoDB;
// on and off decide; anything else is refused naming the flag.
func TestEarlyDispatchFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		store, value string
		want         bool
	}{
		{"embedded", "", true}, {"mongo", "", false}, {"mongo", "on", true}, {"embedded", "off", false}, {"mongo", "auto", false},
	} {
		c := Config{Store: tc.store, EarlyDispatch: tc.value}
		if c.EarlyDispatch == "" {
			parsed, err := ParseConfig(nil, mongoEnv(nil))
			if err != nil {
				t.Fatal(err)
			}
			c.EarlyDispatch = parsed.EarlyDispatch
		}
		if got := earlyDispatch(c); got != tc.want {
			t.Errorf("store %s, -early-dispatch %q: %v, want %v", tc.store, c.EarlyDispatch, got, tc.want)
		}
	}
	if _, err := ParseConfig([]string{"-early-dispatch", "yes"}, mongoEnv(nil)); err == nil || !strings.Contains(err.Error(), "early-dispatch:") {
		t.Errorf("-early-dispatch yes: %v, want an error naming the flag", err)
	}
}

// -gc-percent and -memory-limit-percent: the defaults, the environment,
// the flag over it, and refusals naming the flag.
func TestMemoryFlags(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig(nil, mongoEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.GCPercent != DefaultGCPercent || c.MemoryLimitPercent != DefaultMemoryLimitPercent {
		t.Fatalf("defaults: gc percent %d, memory limit percent %d; want %d, %d", c.GCPercent, c.MemoryLimitPercent, DefaultGCPercent, DefaultMemoryLimitPercent)
	}
	c, err = ParseConfig([]string{"-memory-limit-percent", "0"}, mongoEnv(map[string]string{"SCHEDULER_MEMORY_LIMIT_PERCENT": "75"}))
	if err != nil || c.MemoryLimitPercent != 0 {
		t.Fatalf("-memory-limit-percent 0 over the environment's 75: %d, %v", c.MemoryLimitPercent, err)
	}
	c, err = ParseConfig(nil, mongoEnv(map[string]string{"SCHEDULER_GC_PERCENT": "150"}))
	if err != nil || c.GCPercent != 150 {
		t.Fatalf("SCHEDULER_GC_PERCENT=150: %d, %v", c.GCPercent, err)
	}
	c, err = ParseConfig([]string{"-gc-percent", "800"}, mongoEnv(map[string]string{"SCHEDULER_GC_PERCENT": "150"}))
	if err != nil || c.GCPercent != 800 {
		t.Fatalf("-gc-percent 800 over the environment's 150: %d, %v", c.GCPercent, err)
	}
	for _, tc := range []struct{ flag, v string }{
		{"gc-percent", "24"}, {"gc-percent", "10001"}, {"gc-percent", "off"}, {"gc-percent", "-1"},
		{"memory-limit-percent", "101"}, {"memory-limit-percent", "-1"}, {"memory-limit-percent", "90%"},
	} {
		_, err := ParseConfig([]string{"-" + tc.flag, tc.v}, mongoEnv(nil))
		if err == nil || !strings.HasPrefix(err.Error(), tc.flag+":") {
			t.Errorf("-%s %s: error %v, want one naming %s", tc.flag, tc.v, err, tc.flag)
		}
	}
}
