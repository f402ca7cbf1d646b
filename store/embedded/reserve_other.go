//go:build !linux

package embedded

import (
	"errors"
	"os"
)

// canAllocate is false where the store has no reserve: bbolt grows the
// file on Windows by mapping it, which allocates its blocks; elsewhere
// there is no fallocate.
const canAllocate = false

func allocateFile(*os.File, int64, int64) error {
	return errors.New("blocks are not allocated ahead on this platform")
}
