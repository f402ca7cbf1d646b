package schedule

import (
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// DST marks of a previewed fire.
const (
	// DSTSkipped: the wall time the schedule names did not exist that day
	// (a spring-forward gap); the fire is at the end of the gap.
	DSTSkipped = "skipped"
	// DSTRepeated: the fire's wall time occurred twice that day (a
	// fall-back); an hour-specific schedule fires at the first occurrence
	// only, a wildcard-hour one at both.
	DSTRepeated = "repeated"
)

// PreviewFire is one coming fire as a preview shows it.
type PreviewFire struct {
	At    time.Time // the fire time, UTC; the fire's id is made of it
	Local time.Time // At in the schedule's zone
	// Jitter is the launch offset (model.JitterOffset): the events launch
	// at At+Jitter. Known only for a schedule with an id.
	Jitter time.Duration
	// JitterKnown is false for a definition without an id (not saved
	// yet): its offsets are in [0, Schedule.Jitter) but not fixed.
	JitterKnown bool
	DST         string // DSTSkipped, DSTRepeated or ""
}

// LaunchAt is when the events of the fire launch (before any window).
func (p PreviewFire) LaunchAt() time.Time { return p.At.Add(p.Jitter) }

// Preview lists up to k fires of the schedule after now, as the emitter
// will fire them (NextFireTimes), with the launch offset that id gives
// them (id "" for a definition not saved yet) and their DST marks.
func (c *Compiled) Preview(id string, now time.Time, k int) []PreviewFire {
	return c.PreviewAt(id, c.NextFireTimes(now, k))
}

// PreviewAt is Preview of the fire times given (those NextFireTimes gives,
// or a fire a calendar moved). Every preview (of a stored schedule and of
// a definition) is made here.
func (c *Compiled) PreviewAt(id string, times []time.Time) []PreviewFire {
	m := &c.Schedule
	out := make([]PreviewFire, len(times))
	for i, t := range times {
		p := PreviewFire{At: t, Local: t.In(c.Loc), JitterKnown: id != "" || m.Jitter == 0}
		if id != "" {
			p.Jitter = model.JitterOffset(id, t, m.Jitter)
		}
		if c.Expr != nil || len(c.Exprs) > 0 {
			p.DST = dstMark(c, t)
		}
		out[i] = p
	}
	return out
}

// Describe says when the schedule fires, in English: the cron expression
// in words (cron.Expr.Describe; each of crons, joined), the interval and
// its anchor, or the one-off's instant.
func (c *Compiled) Describe() string {
	m := &c.Schedule
	switch {
	case c.Expr != nil:
		return c.Expr.Describe()
	case len(c.Exprs) > 0:
		return describeCrons(c.Exprs)
	case m.Interval > 0:
		return describeInterval(m, c.Loc)
	case m.RunAt != nil:
		return "once at " + m.RunAt.In(c.Loc).Format(time.RFC3339Nano)
	case m.After != nil:
		return "once after each " + string(m.After.When) + " fire of " + m.After.ScheduleID
	}
	return ""
}

// dstMark is the DST mark of the fire at t of the cron schedule c.
func dstMark(c *Compiled, t time.Time) string {
	lt := t.In(c.Loc)
	if !c.hasWallTime(lt.Hour(), lt.Minute()) {
		return DSTSkipped
	}
	_, off := lt.Zone()
	start, end := lt.ZoneBounds()
	if !start.IsZero() {
		// The wall time also occurred before the offset fell at start.
		if _, prev := start.Add(-time.Second).In(c.Loc).Zone(); prev > off && t.Sub(start) < time.Duration(prev-off)*time.Second {
			return DSTRepeated
		}
	}
	if !end.IsZero() {
		// The wall time occurs again after the offset falls at end.
		if _, next := end.In(c.Loc).Zone(); next < off && end.Sub(t) <= time.Duration(off-next)*time.Second {
			return DSTRepeated
		}
	}
	return ""
}

// hasWallTime reports whether the cron expression, or one of crons, names
// the wall time h:m.
func (c *Compiled) hasWallTime(h, m int) bool {
	if c.Expr != nil {
		return c.Expr.HasWallTime(h, m)
	}
	for _, e := range c.Exprs {
		if e.HasWallTime(h, m) {
			return true
		}
	}
	return false
}
