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

// NextFireTimes lists up to k fire times (UTC) of a cron schedule after now,
// honouring StartAt and EndAt; a one-off's is its RunAt (as the emitter
// fires it: rounded up to the millisecond), whenever that is.
func (c *Compiled) NextFireTimes(now time.Time, k int) []time.Time {
	m := &c.Schedule
	if m.RunAt != nil {
		return []time.Time{model.FireInstant(*m.RunAt)}
	}
	if c.Expr == nil || k <= 0 {
		return nil
	}
	after := now
	if m.StartAt != nil && m.StartAt.After(after) {
		after = m.StartAt.Add(-time.Nanosecond)
	}
	times := cron.NextFireTimes(c.Expr, c.Loc, after, k)
	out := make([]time.Time, 0, len(times))
	for _, t := range times {
		if m.EndAt != nil && t.After(*m.EndAt) {
			break
		}
		out = append(out, t.UTC())
	}
	return out
}
