package emitter

import (
	"context"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// PlanCreated plans what Saved would emit for s, a schedule about to be
// created (its id is new, so no fire of it exists), so that the caller
// writes the fires with the schedule in one store commit
// (ScheduleCreateWithFires) and then calls done with that write's result.
// done records what was written (metrics, logs, the Emitted hook) or, when
// the write failed, gives back the room the fires took in the tenant's
// per-minute quota.
//
// Only a one-off schedule whose fire is small and not deferred is planned:
// its fire and events are fixed by s and the clock (deterministic ids), so
// a later pass or Saved finds them recorded and emits nothing twice. The
// plan reads nothing from the store beyond the tenant's quotas
// (Deps.Quotas). For anything else (a cron schedule, whose fires depend on
// the partition's watermark; a large or deferred fire) done is nil and the
// caller calls Saved after the write as before; so for a one-off that
// names calendars, which Saved applies.
func (e *Emitter) PlanCreated(ctx context.Context, s *model.Schedule, keys []cron.Key) (fs []store.FireNew, done func(ctx context.Context, inserted []bool, events int, err error), err error) {
	if !s.IsOneOff() || len(s.ExcludeCalendars) > 0 {
		return nil, nil, nil
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
		return nil, func(context.Context, []bool, int, error) {}, nil
	}
	f := &p.fire
	if e.large(f) {
		return nil, nil, nil
	}
	note, err := e.admitFire(ctx, f, now)
	if err != nil {
		return nil, nil, err
	}
	if note != "" {
		// Deferred: Saved records it for the background (no room taken).
		return nil, nil, nil
	}
	return p.fires[:], func(ctx context.Context, inserted []bool, events int, err error) {
		if err != nil || len(inserted) == 0 || !inserted[0] {
			e.unadmit(f, false, now)
		}
		if err != nil {
			return
		}
		e.m.EventsEmitted(events)
		var ws PassStats
		out := outExisting
		if len(inserted) > 0 && inserted[0] {
			out = outInserted
		}
		e.count(&ws, dueFire{s: s, t: f.FireTime}, f, out)
		if out == outInserted {
			e.signal(ctx, []*model.Fire{f})
		}
	}, nil
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
	}}
	f := &p.fire
	if t.Before(now.Truncate(time.Second)) {
		// As SavedMany: accepted with its runAt already past, late.
		f.Decision = model.FireLate
		f.Note = "late by " + now.Sub(t).Truncate(time.Second).String()
	}
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
