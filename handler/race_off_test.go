//go:build !race

package handler_test

import "time"

// latenessBound is the acceptance bound on the p99 lateness of a
// tenant's events behind another tenant's backlog.
const latenessBound = 100 * time.Millisecond
