//go:build race

package handler_test

import "time"

// latenessBound: the race detector slows every delivery several times over
// on a shared machine; the bound stays well below a backlog's delay
// (seconds).
const latenessBound = 500 * time.Millisecond

// claimTimePerEvent is the lead a noisy-neighbour test gives each event
// so that inserting and claiming them all ends before their instant on a
// slow shared machine, the race detector slows the
// store several times over.
const claimTimePerEvent = 400 * time.Microsecond
