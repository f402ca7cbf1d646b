//go:build !linux

package smallfs

import "testing"

// Mount skips the test: the small file system is a tmpfs mount.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	t.Skip("a small file system is a tmpfs mount, which needs Linux")
	return ""
}
