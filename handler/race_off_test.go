//go:build !race

package handler_test

import "time"

// claimTimePerEvent is the lead a noisy-neighbour test gives each event
// so that inserting and claiming them all ends before their instant on a
// slow shared machine, without the race detector.
const claimTimePerEvent = 100 * time.Microsecond
