//go:build unix

package fdlimit

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Get returns the open-file limit in force.
func Get() (Limit, error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return Limit{}, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	return Limit{Soft: uint64(r.Cur), Hard: uint64(r.Max)}, nil
}

// Raise sets the soft open-file limit to the hard one and returns the
// limit now in force.
func Raise() (Limit, error) {
	l, err := Get()
	if err != nil || l.Soft >= l.Hard {
		return l, err
	}
	r := unix.Rlimit{Cur: l.Hard, Max: l.Hard}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return l, fmt.Errorf("setrlimit RLIMIT_NOFILE to %d: %w", l.Hard, err)
	}
	return Get()
}
