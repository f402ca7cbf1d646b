package schedule

import (
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
)

// FromSchedule compiles a stored schedule's expression again (to show or
// re-split it); m itself is copied, not validated. The error wraps the cron
// engine's when what was stored no longer parses or splits within
// maxChildren.
func FromSchedule(m *model.Schedule, maxChildren int) (*Compiled, error) {
	out := &Compiled{Schedule: *m}
	var err error
	if out.Loc, err = cron.LoadLocation(m.Timezone); err != nil {
		return nil, fmt.Errorf("schedule %s: %w", m.ID, err)
	}
	if len(m.Crons) > 0 {
		var fe Errors
		compileCrons(&fe, out, m.Crons, maxChildren)
		if err := fe.Err(); err != nil {
			return nil, fmt.Errorf("schedule %s: %w", m.ID, err)
		}
		return out, nil
	}
	if m.Cron == "" {
		return out, nil
	}
	if out.Expr, err = cron.Parse(m.Cron); err != nil {
		return nil, fmt.Errorf("schedule %s: %w", m.ID, err)
	}
	if out.Keys, err = out.Expr.Children(maxChildren); err != nil {
		return nil, fmt.Errorf("schedule %s: %w", m.ID, err)
	}
	return out, nil
}

// Children builds the children of m, a stored schedule compiled as c (its
// id, tenant, version and partition are m's).
//
// A one-off gets one UTC child for the minute of RunAt, so that the pass
// over that window emits it even if the emit on save failed. The emitter
// fires a one-off only in the window containing RunAt, so the yearly
// recurrence of the key never fires again.
func (c *Compiled) Children(m *model.Schedule) []model.Child {
	if m.RunAt != nil {
		return []model.Child{model.OneOffChild(m)}
	}
	out := make([]model.Child, len(c.Keys))
	for i, k := range c.Keys {
		out[i] = model.Child{
			ScheduleID:       m.ID,
			TenantID:         m.TenantID,
			ScheduleVersion:  m.Version,
			Partition:        m.Partition,
			Timezone:         m.Timezone,
			LaunchExpression: k.LaunchExpression(),
			Minute:           int(k.Minute),
		}
	}
	return out
}

// NextFireTimes lists up to k fire times (UTC) of a cron, crons or interval
// schedule after now, honouring StartAt and EndAt; a one-off's is its
// RunAt (as the emitter fires it: rounded up to the millisecond), whenever
// that is. A definition not saved yet (no CreatedAt) is taken as created
// at now.
func (c *Compiled) NextFireTimes(now time.Time, k int) []time.Time {
	m := &c.Schedule
	if m.RunAt != nil {
		return []time.Time{model.FireInstant(*m.RunAt)}
	}
	if k <= 0 {
		return nil
	}
	var times []time.Time
	switch {
	case m.Interval > 0:
		times = intervalNext(m, now, k)
	case c.Expr != nil || len(c.Exprs) > 0:
		after := now
		if m.StartAt != nil && m.StartAt.After(after) {
			after = m.StartAt.Add(-time.Nanosecond)
		}
		if c.Expr != nil {
			times = cron.NextFireTimes(c.Expr, c.Loc, after, k)
			break
		}
		it := newUnionIter(c.Exprs, c.Loc, after)
		for t, ok := it.next(); ok && len(times) < k; t, ok = it.next() {
			times = append(times, t)
		}
	default:
		return nil
	}
	out := make([]time.Time, 0, len(times))
	for _, t := range times {
		if m.EndAt != nil && t.After(*m.EndAt) {
			break
		}
		out = append(out, t.UTC())
	}
	return out
}

// intervalNext lists the first k fires of the interval schedule m after
// now.
func intervalNext(m *model.Schedule, now time.Time, k int) []time.Time {
	s := *m
	if s.CreatedAt.IsZero() {
		s.CreatedAt = now
	}
	out := make([]time.Time, 0, k)
	for t := s.IntervalFirstAtOrAfter(now.Add(time.Nanosecond)); len(out) < k; t = t.Add(s.Interval) {
		out = append(out, t)
	}
	return out
}
