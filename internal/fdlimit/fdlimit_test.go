//go:build unix

package fdlimit_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/schedulerd/schedulerd/internal/fdlimit"
)

// TestRaiseLiftsSoftToHard lowers the soft limit of this test process,
// raises it and reads it back from the kernel.
func TestRaiseLiftsSoftToHard(t *testing.T) {
	var before unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	if before.Max < 128 {
		t.Skipf("hard open-file limit %d is too low to lower the soft one", before.Max)
	}
	t.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &before) })
	low := unix.Rlimit{Cur: 100, Max: before.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	got, err := fdlimit.Raise()
	if err != nil {
		t.Fatal(err)
	}
	var after unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &after); err != nil {
		t.Fatal(err)
	}
	if after.Cur != before.Max || got.Soft != after.Cur || got.Hard != after.Max {
		t.Fatalf("after Raise: kernel says soft %d hard %d, Raise returned %+v; want soft = hard = %d", after.Cur, after.Max, got, before.Max)
	}
}
