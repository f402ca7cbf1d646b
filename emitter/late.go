package emitter

import (
	"cmp"
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

// setDeadline gives the new fire f of s, which has events, its deadline:
// its launch plus the schedule's DeadlineAfter (none without one).
func setDeadline(s *model.Schedule, f *model.Fire) {
	if d := s.DeadlineAfter(); d > 0 && hasEvents(f.Decision) {
		t := launchBase(s, f).Add(d)
		f.Deadline, f.OnDeadline = &t, cmp.Or(s.OnDeadline, model.DeadlineRecord)
	}
}

// expireAt is when the events of fire f of s stop being attempted: the
// fire's deadline under expire, or their launch plus maxEventAge,
// whichever is first; nil for neither.
func expireAt(s *model.Schedule, f *model.Fire, base time.Time) *time.Time {
	var at *time.Time
	if f.Deadline != nil && f.OnDeadline == model.DeadlineExpire {
		t := *f.Deadline
		at = &t
	}
	if s.MaxEventAge > 0 {
		if t := base.Add(s.MaxEventAge); at == nil || t.Before(*at) {
			at = &t
		}
	}
	return at
}
