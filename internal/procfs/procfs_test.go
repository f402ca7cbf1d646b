package procfs_test

import (
	"errors"
	"testing"

	"github.com/schedulerd/schedulerd/internal/procfs"
)

func TestBytes(t *testing.T) {
	status := "Name:\tschedulerd\nVmPeak:\t  912340 kB\nVmHWM:\t   51200 kB\nMemTotal:        4194304 kB\n"
	for key, want := range map[string]int64{"VmHWM": 50 << 20, "VmPeak": 912340 << 10, "MemTotal": 4 << 30} {
		got, err := procfs.Bytes(status, key)
		if err != nil || got != want {
			t.Errorf("Bytes(%s) = %d, %v; want %d", key, got, err, want)
		}
	}
	if _, err := procfs.Bytes(status, "VmRSS"); !errors.Is(err, procfs.ErrNoKey) {
		t.Errorf("a missing key: %v, want ErrNoKey", err)
	}
	// "Vm" alone must not match "VmPeak:".
	if _, err := procfs.Bytes(status, "Vm"); !errors.Is(err, procfs.ErrNoKey) {
		t.Errorf("a key that is a prefix of another: %v, want ErrNoKey", err)
	}
	for _, bad := range []string{"VmHWM:\t 12 MB\n", "VmHWM:\t x kB\n", "VmHWM:\n", "VmHWM: -5 kB\n", "VmHWM: 99999999999999999 kB\n"} {
		if _, err := procfs.Bytes(bad, "VmHWM"); err == nil || errors.Is(err, procfs.ErrNoKey) {
			t.Errorf("Bytes(%q) = %v, want a parse error", bad, err)
		}
	}
}
