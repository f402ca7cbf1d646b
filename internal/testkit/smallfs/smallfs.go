// Package smallfs gives tests a real file system of a few megabytes that
// they can fill to the last byte: a tmpfs mounted with a size limit (Mount).
// Mounting needs Linux and root (CAP_SYS_ADMIN); elsewhere the test skips
// and says why.
package smallfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Fill writes a file into dir until the file system has no byte left and
// returns its path; removing the file gives the space back.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int{1 << 20, 4 << 10, 512, 1} {
		buf := make([]byte, size)
		for {
			if _, err := f.Write(buf); errors.Is(err, syscall.ENOSPC) {
				break
			} else if err != nil {
				t.Fatalf("fill %s: %v", path, err)
			}
		}
	}
	return path
}
