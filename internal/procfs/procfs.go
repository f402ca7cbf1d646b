// Package procfs reads the "Key: value kB" lines of Linux's /proc files
// (status, meminfo).
package procfs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoKey is returned by Bytes when text has no line for the key.
var ErrNoKey = errors.New("procfs: no such line")

// Bytes returns the value of text's line "key: N kB" in bytes.
func Bytes(text, key string) (int64, error) {
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(line, key+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("procfs: %s %q is not a number of kB", key, strings.TrimSpace(rest))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 || n >= 1<<53 { // n<<10 must fit an int64
			return 0, fmt.Errorf("procfs: %s %q is not a number of kB", key, f[0])
		}
		return n << 10, nil
	}
	return 0, fmt.Errorf("%w: %s", ErrNoKey, key)
}
