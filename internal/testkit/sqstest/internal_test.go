package sqstest

import (
	"strings"
	"testing"
)

func TestLaunchInWithoutNodeModulesSaysRunNpmCi(t *testing.T) {
	var s server
	_, err := s.launchIn(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "npm ci") {
		t.Fatalf("launchIn(empty dir) error = %v, want one that says to run npm ci", err)
	}
}

func TestQueueName(t *testing.T) {
	for _, tc := range []struct{ name, test, suffix, want string }{
		{"ReplacesSlashes", "TestA/B c", "q", "TestA_B_c_q"},
		{"KeepsFIFOSuffix", "TestA", "x.fifo", "TestA_x.fifo"},
		{"TrimsToEighty", strings.Repeat("a", 100), "q.fifo", strings.Repeat("a", 73) + "_q.fifo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := queueName(tc.test, tc.suffix); got != tc.want {
				t.Errorf("queueName(%q, %q) = %q, want %q", tc.test, tc.suffix, got, tc.want)
			}
		})
	}
}
