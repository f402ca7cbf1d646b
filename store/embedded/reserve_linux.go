package embedded

import (
	"os"

	"golang.org/x/sys/unix"
)

const canAllocate = true

// allocateFile allocates the blocks of n bytes of f from off on (holes
// inside the file, and past its end, which it moves), without changing
// what is written, and syncs the file's new size and blocks as bbolt does
// when it grows the file.
func allocateFile(f *os.File, off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, off, n)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		return f.Sync()
	}
}
