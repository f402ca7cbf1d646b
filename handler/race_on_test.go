//go:build race

package handler_test

import "time"

// claimTimePerEvent is the lead a noisy-neighbour test gives each event
// so that inserting and claiming them all ends before their instant on a
// slow shared machine, the race detector slows the
// store several times over.
const claimTimePerEvent = 400 * time.Microsecond
