//go:build unix

package diskspace

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Usage returns the bytes available to an unprivileged writer (not the
// blocks reserved for root) and the size of the file system.
func (d Dir) Usage() (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(d.Path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", d.Path, err)
	}
	bs := uint64(st.Bsize) // int64 on linux, uint32 on the BSDs
	return st.Bavail * bs, st.Blocks * bs, nil
}
