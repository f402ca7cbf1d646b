//go:build !unix

package fdlimit

import "errors"

var errUnsupported = errors.New("open-file limit: not supported on this system")

// Get reports that the limit is unknown here.
func Get() (Limit, error) { return Limit{}, errUnsupported }

// Raise reports that the limit is unknown here.
func Raise() (Limit, error) { return Limit{}, errUnsupported }
