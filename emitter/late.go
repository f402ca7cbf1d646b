package emitter

import (
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// launchBase is the time the events of fire f of s launch from (their
// window and deadline too): the fire time, except for a late one-off, whose
// runAt was already past when the fire was recorded. Its events launch from
// the moment the fire was recorded, so that the delivery lateness of a
// one-off accepted with a runAt years ago is measured from its acceptance
// and its window does not end before it began. Late cron fires (downtime,
// at most CatchUpLimit) keep their fire time: their lateness is real.
func launchBase(s *model.Schedule, f *model.Fire) time.Time {
	if s.IsOneOff() && f.Decision == model.FireLate && f.CreatedAt.After(f.FireTime) {
		return f.CreatedAt
	}
	return f.FireTime
}
