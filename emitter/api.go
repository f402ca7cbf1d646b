package emitter

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
)

// Trigger emits a fire of s at at (truncated to the second) with decision
// triggered, through the same path as scanned fires: deterministic ids, the
// overlap policy, events in batches. It does not look at s.State (the master
// decides whether a trigger is allowed). If the fire exists already (a
// trigger in the same second, or a scheduled fire of the same version at
// that very second) the existing fire is returned and nothing is emitted
// twice. If another version of the schedule fired at that second and its
// events were not cancelled, that fire is returned. A fire of more than
// BackgroundThreshold events is returned once recorded, with Remaining > 0,
// and its events are written in the background.
func (e *Emitter) Trigger(ctx context.Context, s *model.Schedule, at time.Time) (*model.Fire, error) {
	t := at.UTC().Truncate(time.Second)
	now := e.deps.Clock.Now()
	b := e.newBatch()
	f, out, err := e.emitFire(ctx, s, t, now, emitOpts{decision: model.FireTriggered, note: "triggered"}, b)
	if err == nil {
		err = b.flush(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("emitter: trigger %s: %w", s.ID, err)
	}
	var ws PassStats
	e.count(&ws, dueFire{s: s, t: t}, f, out)
	e.m.EventsEmitted(b.inserted)
	e.signal(ctx, b.recorded)
	return f, nil
}

// Saved is called by the master after a schedule was created or changed
// (after it cancelled the pending events of the old version). Passes may
// have scanned the schedule's partition ahead already, so Saved emits at
// once:
//
//   - for a one-off schedule, its single fire at RunAt (truncated to the
//     second), whenever that is; a RunAt already past makes it a late fire
//     whose events launch at once (see launchBase);
//   - for a cron schedule, every fire t with now <= t < horizon, where
//     horizon is the later of the partition's watermark and
//     now+Lead+2*Window (the furthest a pass running at this moment, on a
//     clock up to a window ahead, may have scanned). Fires beyond the
//     watermark are emitted again by the pass, idempotently.
//
// The fire times come from the same cron.AppendEligible enumeration as the
// passes, matched against keys, so a save and a pass always agree on ids.
// keys are the children keys of s.Cron that the caller compiled (and stored
// as s's children); the emitter does not parse the expression again. They
// are ignored for a one-off. A schedule that is not active, or fires outside
// StartAt/EndAt, emits nothing. Fires of more than BackgroundThreshold events
// are only recorded here; their events are written in the background.
func (e *Emitter) Saved(ctx context.Context, s *model.Schedule, keys []cron.Key) error {
	if s.State != model.ScheduleActive && s.State != "" {
		return nil
	}
	now := e.deps.Clock.Now()
	var times []time.Time
	if s.IsOneOff() {
		times = append(times, s.RunAt.UTC().Truncate(time.Second))
	} else {
		if len(keys) == 0 {
			// Every cron expression has children: none means the caller
			// passed the wrong thing, and emitting nothing would be silent.
			return fmt.Errorf("emitter: saved %s: no children keys for %q", s.ID, s.Cron)
		}
		own := make(map[cron.Key]struct{}, len(keys))
		for _, k := range keys {
			own[k] = struct{}{}
		}
		loc, err := e.location(s.Timezone)
		if err != nil {
			return fmt.Errorf("emitter: saved %s: %w", s.ID, err)
		}
		wm, err := e.deps.Store.WatermarkGet(ctx, s.Partition)
		if err != nil {
			return fmt.Errorf("emitter: saved %s: watermark: %w", s.ID, err)
		}
		horizon := now.Add(e.cfg.Lead + 2*e.cfg.Window)
		if wm.Until.After(horizon) {
			horizon = wm.Until
		}
		for _, sl := range cron.AppendEligible(nil, loc, now, horizon) {
			if _, ok := own[sl.Key]; ok {
				times = append(times, sl.At)
			}
		}
		slices.SortFunc(times, time.Time.Compare)
		times = slices.CompactFunc(times, time.Time.Equal)
	}
	due := make([]dueFire, 0, len(times))
	for _, t := range times {
		if !inRange(s, t) {
			continue
		}
		due = append(due, dueFire{s: s, t: t})
	}
	o := emitOpts{decision: model.FireEmitted}
	if s.IsOneOff() && len(due) == 1 && due[0].t.Before(now.Truncate(time.Second)) {
		// Accepted with its runAt already past (misfire=fire_all): late,
		// and its events launch from now (launchBase).
		o = emitOpts{decision: model.FireLate, late: true}
	}
	if _, err := e.emitAll(ctx, due, o, now); err != nil {
		return fmt.Errorf("emitter: saved %s: %w", s.ID, err)
	}
	return nil
}
