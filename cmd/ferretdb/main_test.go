package main

import (
	"io"
	"strings"
	"testing"
)

// The backend flags are exclusive and one is required; bad ones fail
// before anything starts.
func TestRunRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "exactly one of -dir and -postgresql-url"},
		{[]string{"-dir", t.TempDir(), "-postgresql-url", "postgres://x/y"}, "exactly one of -dir and -postgresql-url"},
		{[]string{"-dir", t.TempDir(), "extra"}, `unexpected argument "extra"`},
		{[]string{"-dir", t.TempDir(), "-log-level", "loud"}, "-log-level"},
	} {
		err := run(tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q): got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
