package emitter

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// BackfillOptions change what Backfill does.
type BackfillOptions struct {
	// Admit, if set, is asked before anything is written with the number
	// of new fires (instants that have no fire yet); its error stops the
	// backfill (the tenant's quotas, the disk guard).
	Admit func(fires int) error
}

// BackfillStats says what a Backfill did.
type BackfillStats struct {
	// Instants is the number of instants asked for.
	Instants int
	// Fires: fires recorded with decision backfill; Skipped: fires
	// recorded skipped_calendar.
	Fires, Skipped int
	// Existing: instants left out because they had a fire already.
	Existing int
	// Events written during the call; EventsPending: events of the new
	// fires left to the background workers.
	Events, EventsPending int
}

// Backfill records a fire with decision backfill for each instant in times
// (the fire times of s in a past range, computed by the caller with the
// schedule's own enumeration) that has no fire yet, through the same path
// as scanned fires: deterministic ids (a backfill fire and a scheduled
// fire of one instant are one fire), calendars, jitter, the tenant's
// per-minute quota and the disk guard. An instant that has a fire of any
// version and decision is left out, so a repeat creates nothing; only this
// version's backfill fires recorded within CatchUpLimit stay due, for their
// events to be ensured after a crash (idempotently). Overlap and skip
// requests do not apply. Events launch from now (launchBase); at most
// BackgroundThreshold events are written in the call, the rest by the
// background workers.
func (e *Emitter) Backfill(ctx context.Context, s *model.Schedule, times []time.Time, o BackfillOptions) (BackfillStats, error) {
	now := e.deps.Clock.Now()
	out := BackfillStats{Instants: len(times)}
	if len(times) == 0 {
		return out, nil
	}
	instants := make([]time.Time, len(times))
	for i, t := range times {
		instants[i] = model.FireInstant(t)
	}
	slices.SortFunc(instants, time.Time.Compare)
	instants = slices.CompactFunc(instants, time.Time.Equal)
	have, err := e.firesIn(ctx, s, instants[0], instants[len(instants)-1])
	if err != nil {
		return out, fmt.Errorf("emitter: backfill %s: %w", s.ID, err)
	}
	var due []dueFire
	fresh := 0
	for _, t := range instants {
		f, ok := have[t.UnixMilli()]
		if !ok {
			fresh++
			due = append(due, dueFire{s: s, t: t})
			continue
		}
		out.Existing++
		if f.ID == model.FireID(s.ID, s.Version, t) && f.Decision == model.FireBackfill && now.Sub(f.CreatedAt) < e.cfg.CatchUpLimit {
			due = append(due, dueFire{s: s, t: t}) // ensure its events
		}
	}
	if o.Admit != nil {
		if err := o.Admit(fresh); err != nil {
			return out, err
		}
	}
	// The first fires' events are written here, the rest in the background.
	k := min(len(due), e.cfg.BackgroundThreshold/max(s.EventCount, 1))
	cals := newCalendarCache()
	var st PassStats
	for _, part := range []struct {
		due []dueFire
		o   emitOpts
	}{
		{due[:k], emitOpts{decision: model.FireBackfill, note: "backfill", together: true, calendars: cals}},
		{due[k:], emitOpts{decision: model.FireBackfill, note: "backfill", together: true, background: true, calendars: cals}},
	} {
		ps, err := e.emitAll(ctx, part.due, part.o, now)
		st.add(&ps)
		if err != nil {
			return out, fmt.Errorf("emitter: backfill %s: %w", s.ID, err)
		}
	}
	out.Skipped = st.FiresCalendarSkipped
	out.Fires = st.Fires - st.FiresCalendarSkipped
	out.Existing += st.Skipped[SkipOtherVersion]
	out.Events = st.Events
	out.EventsPending = max(0, out.Fires*max(s.EventCount, 1)-st.Events)
	return out, nil
}

// firesIn returns the fires of s (any version) at instants in [from, to],
// by instant in Unix milliseconds.
func (e *Emitter) firesIn(ctx context.Context, s *model.Schedule, from, to time.Time) (map[int64]*model.Fire, error) {
	have := map[int64]*model.Fire{}
	p := &store.FireListParams{TenantID: s.TenantID, ScheduleID: s.ID, Before: to.Add(time.Millisecond), Limit: 1000}
	for {
		fs, err := e.deps.Store.FireList(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("list fires: %w", err)
		}
		for _, f := range fs {
			if f.FireTime.Before(from) {
				return have, nil
			}
			k := f.FireTime.UnixMilli()
			if _, ok := have[k]; !ok || f.ID == model.FireID(s.ID, s.Version, f.FireTime) {
				have[k] = f // this version's fire first
			}
		}
		if len(fs) < p.Limit {
			return have, nil
		}
		p.Before = fs[len(fs)-1].FireTime
	}
}
