package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// The process runs with the garbage collector target it is given, and
// GOGC, when set, stands; the start log says which.
func TestMemorySettings(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	for _, tc := range []struct {
		name string
		env  []string
		want float64
	}{
		{"default", []string{"GOGC="}, 400},
		{"flag's variable", []string{"GOGC=", "SCHEDULER_GC_PERCENT=250"}, 250},
		{"GOGC stands", []string{"GOGC=150", "SCHEDULER_GC_PERCENT=250"}, 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startEnv(t, t.TempDir(), tc.env...)
			p.stop(t)
			var got map[string]any
			for line := range strings.Lines(p.logs.String()) {
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil && m["message"] == "go runtime memory settings" {
					got = m
				}
			}
			if got == nil {
				t.Fatalf("no memory settings in the log:\n%s", p.logs)
			}
			if got["gcPercent"] != tc.want {
				t.Fatalf("gcPercent %v, want %v: %v", got["gcPercent"], tc.want, got)
			}
		})
	}
}
