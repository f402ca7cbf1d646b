package emitter

import (
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// launchBase is the time the events of fire f of s launch from (their
// window and deadline too): the fire time plus the fire's jitter offset
// (jitterOf). A late one-off, whose runAt was already past when the fire
// was recorded, launches from the moment the fire was recorded instead of
// its fire time, so that the delivery lateness of a one-off accepted with a
// runAt years ago is measured from its acceptance and its window does not
// end before it began. Late cron fires (downtime, at most CatchUpLimit)
// keep their fire time: their lateness is real. A backfill fire, asked for
// a past instant, launches from the moment it was recorded as well.
func launchBase(s *model.Schedule, f *model.Fire) time.Time {
	if s.IsOneOff() && f.Decision == model.FireLate && f.CreatedAt.After(f.FireTime) || f.Decision == model.FireBackfill {
		return f.CreatedAt.Add(f.Jitter)
	}
	return f.FireTime.Add(f.Jitter)
}

// jitterOf is the launch offset of a new fire of s at t with decision d:
// the schedule's model.JitterOffset, or 0 for a triggered fire, which was
// asked for now. It is kept on the fire (Fire.Jitter), so that its events,
// however late they are written, launch as the first ones did.
func jitterOf(s *model.Schedule, t time.Time, d model.FireDecision) time.Duration {
	if d == model.FireTriggered {
		return 0
	}
	return model.JitterOffset(s.ID, t, s.Jitter)
}
