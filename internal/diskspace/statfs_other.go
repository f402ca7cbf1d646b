//go:build !unix

package diskspace

import "errors"

// Usage is not implemented on this platform: the disk guard then lets
// writes through and /readyz says the free space is unknown.
func (d Dir) Usage() (free, total uint64, err error) {
	return 0, 0, errors.New("free space is not measured on this platform")
}
