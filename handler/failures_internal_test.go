package handler

import (
	"fmt"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

func TestFailureLogSamplesPerTarget(t *testing.T) {
	var f failureLog
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a := failureKey{target: "a.example"}
	if ok, _, n := f.allow(a, now); !ok || n != 0 {
		t.Fatalf("first line: ok %v, suppressed %d", ok, n)
	}
	for range 5 {
		if ok, _, _ := f.allow(a, now.Add(time.Second)); ok {
			t.Fatal("a second line within the interval")
		}
	}
	if ok, _, _ := f.allow(failureKey{target: "a.example", dead: true}, now); !ok {
		t.Fatal("a dead line is held back by a failure line")
	}
	if ok, _, _ := f.allow(failureKey{target: "b.example"}, now); !ok {
		t.Fatal("another target is held back")
	}
	if ok, _, n := f.allow(a, now.Add(failureLogEvery)); !ok || n != 5 {
		t.Fatalf("after the interval: ok %v, suppressed %d, want 5", ok, n)
	}
}

func TestFailureLogIsBounded(t *testing.T) {
	var f failureLog
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	logged := 0
	for i := range 10 * failureLogTargets {
		if ok, _, _ := f.allow(failureKey{target: fmt.Sprintf("h%d", i)}, now); ok {
			logged++
		}
	}
	if n := len(f.targets); n > failureLogTargets+1 {
		t.Fatalf("%d targets tracked, bound %d", n, failureLogTargets)
	}
	if logged != failureLogTargets+1 {
		t.Fatalf("%d lines for %d new targets within one interval, want %d (one shared by the overflow)", logged, 10*failureLogTargets, failureLogTargets+1)
	}
	// A new interval: quiet targets are forgotten and new ones tracked again.
	later := now.Add(failureLogEvery)
	if ok, key, _ := f.allow(failureKey{target: "fresh"}, later); !ok || key.target != "fresh" {
		t.Fatalf("a new target after the interval: ok %v, logged as %q", ok, key.target)
	}
}

func TestTargetOfNamesTheHost(t *testing.T) {
	for _, tt := range []model.TargetType{model.TargetHTTP, model.TargetHTTPBatch} {
		if got := targetOf(model.Target{Type: tt, URL: "https://u:p@hooks.example:8443/batch?x=1"}); got != "hooks.example:8443" {
			t.Errorf("%s target: %q, want the host only", tt, got)
		}
	}
}
