//go:build race

package handler_test

import "time"

// latenessBound: the race detector slows every delivery several times over
// on a shared machine; the bound stays well below a backlog's delay
// (seconds).
const latenessBound = 500 * time.Millisecond
