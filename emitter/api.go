package emitter

import (
	"cmp"
	"context"
	"encoding/json"
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
	return e.TriggerWith(ctx, s, at, TriggerOptions{})
}

// TriggerOptions change what a triggered fire emits. The caller validates
// them (as the schedule's own eventCount and payload, and the tenant's
// per-fire quota).
type TriggerOptions struct {
	// Note is kept on the fire; "" means "triggered".
	Note string
	// EventCount, if positive, is the fire's number of events instead of
	// the schedule's eventCount.
	EventCount int
	// Payload, if set, is what the fire's events carry instead of the
	// schedule's payload; the fire keeps it (Fire.Payload), so that
	// events written later (a large or deferred fire) carry it too.
	Payload json.RawMessage
}

// TriggerWith is Trigger with the options o. A trigger in the same second
// as an earlier one returns the earlier fire, whatever o says.
func (e *Emitter) TriggerWith(ctx context.Context, s *model.Schedule, at time.Time, o TriggerOptions) (*model.Fire, error) {
	t := at.UTC().Truncate(time.Second)
	now := e.deps.Clock.Now()
	b := e.newBatch()
	opts := emitOpts{decision: model.FireTriggered, note: cmp.Or(o.Note, "triggered"), count: o.EventCount, payload: o.Payload}
	f, out, err := e.emitFire(ctx, s, t, now, opts, b)
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
//   - for a one-off schedule, its single fire at RunAt (rounded up to the
//     millisecond: model.FireInstant), whenever that is; a RunAt already
//     past makes it a late fire whose events launch at once (see launchBase);
//   - for a cron, crons or interval schedule, every fire t with
//     now <= t < horizon, where
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
	return e.savedMany(ctx, []*model.Schedule{s}, [][]cron.Key{keys})
}

// savedMany is Saved for many schedules saved together (a batch create):
// keys[i] are the children keys of ss[i]. The fires of all of them are
// emitted as one batch, and each partition's watermark is read once. New
// fires are written with their events, up to BatchSize events a write
// (one commit for a batch of one-offs), rather than a write per fire.
func (e *Emitter) savedMany(ctx context.Context, ss []*model.Schedule, keys [][]cron.Key) error {
	if len(keys) != len(ss) {
		return fmt.Errorf("emitter: saved: %d schedules but %d key lists", len(ss), len(keys))
	}
	now := e.deps.Clock.Now()
	watermarks := map[int]model.Watermark{}
	var due, late []dueFire
	for i, s := range ss {
		if s.State != model.ScheduleActive && s.State != "" {
			continue
		}
		n := len(due)
		var err error
		if due, err = e.appendSavedDue(ctx, due, s, keys[i], now, now, watermarks); err != nil {
			return fmt.Errorf("emitter: saved %s: %w", s.ID, err)
		}
		if s.IsOneOff() && len(due) == n+1 && due[n].t.Before(now.Truncate(time.Second)) {
			// Accepted with its runAt already past (misfire=fire_all): late,
			// and its events launch from now (launchBase).
			late = append(late, due[n])
			due = due[:n]
		}
	}
	for _, batch := range []struct {
		due []dueFire
		o   emitOpts
	}{{due, emitOpts{decision: model.FireEmitted, together: true}}, {late, emitOpts{decision: model.FireLate, late: true}}} {
		if len(batch.due) == 0 {
			continue
		}
		if _, err := e.emitAll(ctx, batch.due, batch.o, now); err != nil {
			if len(ss) == 1 {
				return fmt.Errorf("emitter: saved %s: %w", ss[0].ID, err)
			}
			return fmt.Errorf("emitter: saved %d schedules: %w", len(ss), err)
		}
	}
	return nil
}

// appendSavedDue appends the fires of s that Saved emits, those of a cron
// schedule from from on. watermarks caches the partitions' watermarks
// within one call.
func (e *Emitter) appendSavedDue(ctx context.Context, due []dueFire, s *model.Schedule, keys []cron.Key, from, now time.Time, watermarks map[int]model.Watermark) ([]dueFire, error) {
	var times []time.Time
	switch {
	case s.After != nil:
		return due, nil // fires only after its upstream's fires (After)
	case s.IsOneOff():
		times = append(times, model.FireInstant(*s.RunAt))
	default:
		if len(keys) == 0 && s.Interval <= 0 {
			// Every cron expression has children: none means the caller
			// passed the wrong thing, and emitting nothing would be silent.
			return nil, fmt.Errorf("no children keys for %q", s.Cron)
		}
		own := make(map[cron.Key]struct{}, len(keys))
		for _, k := range keys {
			own[k] = struct{}{}
		}
		loc, err := e.location(s.Timezone)
		if err != nil {
			return nil, err
		}
		wm, ok := watermarks[s.Partition]
		if !ok {
			if wm, err = e.deps.Store.WatermarkGet(ctx, s.Partition); err != nil {
				return nil, fmt.Errorf("watermark: %w", err)
			}
			watermarks[s.Partition] = wm
		}
		horizon := now.Add(e.cfg.Lead + 2*e.cfg.Window)
		if wm.Until.After(horizon) {
			horizon = wm.Until
		}
		if s.Interval > 0 {
			times = s.IntervalTimes(times, from, horizon)
		} else {
			times = appendOwnTimes(times, own, loc, from, horizon)
		}
	}
	for _, t := range times {
		if inRange(s, t) {
			due = append(due, dueFire{s: s, t: t})
		}
	}
	return due, nil
}

// appendOwnTimes appends the fire times in [from, to) of the cron schedule
// whose children keys are own, in order, each once: the same
// cron.AppendEligible enumeration as the passes.
func appendOwnTimes(times []time.Time, own map[cron.Key]struct{}, loc *time.Location, from, to time.Time) []time.Time {
	n := len(times)
	for _, sl := range cron.AppendEligible(nil, loc, from, to) {
		if _, ok := own[sl.Key]; ok {
			times = append(times, sl.At)
		}
	}
	slices.SortFunc(times[n:], time.Time.Compare)
	return slices.CompactFunc(times, time.Time.Equal)
}

// Resumed is Saved for a schedule s that the master resumed (a new active
// version) after a pause that was due to end at since (its ResumeAt; zero
// for a resume by hand before it). The fires of a cron schedule between
// since and the start of the current window were missed while no
// instance resumed it (the service was down, the resume job had not run
// yet): they follow s's misfire policy exactly as the fires of windows
// missed during downtime do (misfires), as late fires. The fires from
// there on are emitted as Saved emits them, and a one-off's fire as Saved
// does. Fires before since belong to the pause and never fire.
func (e *Emitter) Resumed(ctx context.Context, s *model.Schedule, keys []cron.Key, since time.Time) error {
	now := e.deps.Clock.Now()
	lateEnd := now.Truncate(e.cfg.Window)
	if s.IsOneOff() || since.IsZero() || !since.Before(now) || (len(keys) == 0 && s.Interval <= 0) {
		return e.Saved(ctx, s, keys)
	}
	from := latest(since, lateEnd)
	var missed []time.Time
	if since.Before(lateEnd) {
		own := make(map[cron.Key]struct{}, len(keys))
		for _, k := range keys {
			own[k] = struct{}{}
		}
		loc, err := e.location(s.Timezone)
		if err != nil {
			return fmt.Errorf("emitter: resumed %s: %w", s.ID, err)
		}
		// Older fires never fire (misfires): not enumerated either.
		if s.Interval > 0 {
			missed = s.IntervalTimes(nil, latest(since, now.Add(-e.cfg.CatchUpLimit)), lateEnd)
		} else {
			missed = appendOwnTimes(nil, own, loc, latest(since, now.Add(-e.cfg.CatchUpLimit)), lateEnd)
		}
	}
	var st PassStats
	m := e.newMisfires(now, &st, -1)
	var late []dueFire
	for _, t := range missed {
		if d := (dueFire{s: s, t: t}); inRange(s, t) && m.add(d) {
			late = append(late, d)
		}
	}
	due, err := e.appendSavedDue(ctx, nil, s, keys, from, now, map[int]model.Watermark{})
	if err == nil {
		_, err = e.emitAll(ctx, late, emitOpts{decision: model.FireLate, late: true}, now)
	}
	if err == nil {
		_, err = e.emitAll(ctx, m.once(), emitOpts{decision: model.FireLate, late: true, onceSince: since}, now)
	}
	if err == nil {
		_, err = e.emitAll(ctx, due, emitOpts{decision: model.FireEmitted, together: true}, now)
	}
	if err != nil {
		return fmt.Errorf("emitter: resumed %s: %w", s.ID, err)
	}
	return nil
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
