package emitter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// PlanCreates plans the first fires of ss, schedules about to be created
// (their ids are new, so no fire of them exists; keys[i] are the children
// keys of ss[i]), so that the caller writes them with the schedules in
// one store commit (fires[i] with ss[i]) and then calls done with that
// write's outcome (see create.Planner).
//
// Only a one-off whose fire is small and not deferred is planned: its fire
// and events are fixed by the schedule and the clock (deterministic ids),
// so a later pass or Saved finds them recorded and emits nothing twice.
// The plan reads nothing from the store beyond the tenant's quotas
// (Deps.Quotas). done emits the fires of the others as Saved does (a cron
// schedule's depend on the partition's watermark; large or deferred fires
// are recorded for the background), and those of recovered schedules;
// it records what was written (metrics, logs, the Emitted hook) and gives
// back the room the planned fires of failed items took in the tenant's
// per-minute quota.
func (e *Emitter) PlanCreates(ctx context.Context, ss []*model.Schedule, keys [][]cron.Key) (fires [][]store.FireNew, done func(ctx context.Context, errs []error, recovered []*model.Schedule) error, err error) {
	if len(keys) != len(ss) {
		return nil, nil, fmt.Errorf("emitter: plan creates: %d schedules but %d key lists", len(ss), len(keys))
	}
	fires = make([][]store.FireNew, len(ss))
	plans := make([]*createdFire, len(ss))
	finish := func(ctx context.Context, errs []error, recovered []*model.Schedule) error {
		var (
			rest     []*model.Schedule
			restKeys [][]cron.Key
		)
		for i, s := range ss {
			if p := plans[i]; p != nil {
				p.done(ctx, e, errs[i])
			}
			switch {
			case recovered != nil && recovered[i] != nil:
				rest, restKeys = append(rest, recovered[i]), append(restKeys, keys[i])
			case errs[i] == nil && plans[i] == nil:
				rest, restKeys = append(rest, s), append(restKeys, keys[i])
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return e.savedMany(ctx, rest, restKeys)
	}
	for i, s := range ss {
		p, err := e.planCreated(ctx, s)
		if err != nil {
			all := make([]error, len(ss))
			for j := range all {
				all[j] = err
			}
			_ = finish(ctx, all, nil)
			return nil, nil, err
		}
		if p != nil {
			fires[i], plans[i] = p.fires, p
		}
	}
	return fires, finish, nil
}

// createdFire is the planned first fire of a new one-off (planCreated).
type createdFire struct {
	s     *model.Schedule
	f     *model.Fire // nil: the schedule emits nothing
	fires []store.FireNew
	now   time.Time
}

// planCreated plans the fire of the new schedule s (PlanCreates): nil
// when it is not planned (not a one-off; a large or deferred fire).
func (e *Emitter) planCreated(ctx context.Context, s *model.Schedule) (*createdFire, error) {
	if !s.IsOneOff() || s.State != model.ScheduleActive || len(s.ExcludeCalendars) > 0 {
		return nil, nil
	}
	now := e.deps.Clock.Now()
	// The fire and its events are written in the schedule's commit: they
	// are made when it is.
	made := now
	if !s.CreatedAt.IsZero() && !s.CreatedAt.After(now) {
		made = s.CreatedAt
	}
	p, ok := e.planOneOff(s, made)
	if !ok {
		return &createdFire{s: s, now: now}, nil // emits nothing
	}
	f := &p.fire
	if e.large(f) {
		return nil, nil
	}
	note, err := e.admitFire(ctx, f, now)
	if err != nil {
		return nil, fmt.Errorf("plan the fire of schedule %s: %w", s.ID, err)
	}
	if note != "" {
		// Deferred: Saved records it for the background (no room taken).
		return nil, nil
	}
	if fctx, span := e.startFire(ctx, s, f); span != nil {
		traceEvents(fctx, p.fires[0].Events)
		endFire(span, f)
	}
	return &createdFire{s: s, f: f, fires: p.fires[:], now: now}, nil
}

// done records the outcome of the write of p's fire: err nil when it was
// written with its schedule.
func (p *createdFire) done(ctx context.Context, e *Emitter, err error) {
	if p.f == nil {
		return
	}
	if err != nil {
		e.unadmit(p.f, false, p.now)
		return
	}
	events := 0
	for _, fn := range p.fires {
		events += len(fn.Events)
	}
	e.m.EventsEmitted(events)
	var ws PassStats
	e.count(&ws, dueFire{s: p.s, t: p.f.FireTime}, p.f, outInserted)
	e.signal(ctx, []*model.Fire{p.f})
}

// oneOffPlan holds what planOneOff plans for a one-off, in one allocation
// for the usual fire of one event.
type oneOffPlan struct {
	fire   model.Fire
	fires  [1]store.FireNew // fire and its events
	event  [1]model.Event   // the event of a fire of one
	events [1]*model.Event
}

// planOneOff returns the fire of the new active one-off s and its events as
// Saved would record them at now, without reading the store; ok is false
// when s emits nothing (not active, or runAt outside StartAt/EndAt).
func (e *Emitter) planOneOff(s *model.Schedule, now time.Time) (p *oneOffPlan, ok bool) {
	if s.State != model.ScheduleActive && s.State != "" || s.RunAt == nil {
		return nil, false
	}
	t := model.FireInstant(*s.RunAt)
	if !inRange(s, t) {
		return nil, false
	}
	p = &oneOffPlan{fire: model.Fire{
		ID:         model.FireID(s.ID, s.Version, t),
		ScheduleID: s.ID,
		TenantID:   s.TenantID,
		FireTime:   t,
		LocalTime:  e.planned.localTime(e, s, t),
		Count:      max(s.EventCount, 1),
		Decision:   model.FireEmitted,
		CreatedAt:  now.UTC(),
		Watched:    e.watched(s),
	}}
	f := &p.fire
	if t.Before(now.Truncate(time.Second)) {
		// As savedMany: accepted with its runAt already past, late.
		f.Decision = model.FireLate
		f.Note = "late by " + now.Sub(t).Truncate(time.Second).String()
	}
	f.Jitter = jitterOf(s, t, f.Decision)
	setDeadline(s, f)
	var evs []*model.Event
	switch {
	case e.large(f):
	case f.Count == 1:
		e.fillEvents(p.event[:], p.events[:], s, f, 0, now)
		evs = p.events[:]
	default:
		evs = e.makeEvents(s, f, 0, f.Count, now)
	}
	p.fires[0] = store.FireNew{Fire: f, Events: evs}
	return p, true
}

// plannedLocal remembers the last local time planOneOff formatted: the
// one-offs of a batch often share their runAt and timezone.
type plannedLocal struct {
	mu sync.Mutex
	tz string
	t  time.Time
	s  string
}

// localTime is e.localTime(s, t), formatted again only when s's timezone
// or t is not the last one's.
func (m *plannedLocal) localTime(e *Emitter, s *model.Schedule, t time.Time) string {
	m.mu.Lock()
	if m.s != "" && m.tz == s.Timezone && m.t.Equal(t) {
		lt := m.s
		m.mu.Unlock()
		return lt
	}
	m.mu.Unlock()
	lt := e.localTime(s, t)
	m.mu.Lock()
	m.tz, m.t, m.s = s.Timezone, t, lt
	m.mu.Unlock()
	return lt
}
