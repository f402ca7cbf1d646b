//go:build unix

package diskspace_test

import (
	"path/filepath"
	"testing"

	"github.com/schedulerd/schedulerd/internal/diskspace"
)

func TestUsage(t *testing.T) {
	free, total, err := diskspace.Dir{Path: t.TempDir()}.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 || free > total {
		t.Fatalf("free %d of total %d", free, total)
	}
	if _, _, err := (diskspace.Dir{Path: filepath.Join(t.TempDir(), "missing")}).Usage(); err == nil {
		t.Fatal("no error for a missing directory")
	}
}
