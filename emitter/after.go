package emitter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// Watcher says which new fires are followed until they finish
// (model.Fire.Watched): those whose finish someone waits for.
type Watcher interface {
	Watched(s *model.Schedule) bool
}

// watched is whether the new fires of s are watched: s has notifications,
// or the Watcher (dependents, the tenant's notifications) says so.
func (e *Emitter) watched(s *model.Schedule) bool {
	if len(s.Notify) > 0 {
		return true
	}
	return e.deps.Watch != nil && e.deps.Watch.Watched(s)
}

// ownFire reports whether f is a fire of s's current definition: of its
// version, or, for a dependent schedule, one of its fires after another
// schedule's (which have no version: one per upstream fire).
func ownFire(s *model.Schedule, f *model.Fire) bool {
	if s.After != nil && strings.HasPrefix(f.ID, s.ID+".after.") {
		return true
	}
	return model.FireID(s.ID, s.Version, f.FireTime) == f.ID
}

// After records the fire of the dependent schedule s for the finished
// upstream fire up, at the instant at, and writes its events: id
// model.AfterFireID(s.ID, up.ID), so that every instance and every retry
// after a crash finds the same fire and writes nothing twice. The first
// call's fire stands (a later call with another at changes nothing).
// deadline, if set, is the upstream's deadline, which the fire's events
// inherit (their window ends there); it applies to the events written in
// this call, not to those of a fire emitted in the background. It reports
// whether this call recorded the fire.
func (e *Emitter) After(ctx context.Context, s *model.Schedule, up *model.Fire, at time.Time, deadline *time.Time) (*model.Fire, bool, error) {
	st := e.deps.Store
	now := e.deps.Clock.Now()
	t := model.FireInstant(at)
	id := model.AfterFireID(s.ID, up.ID)
	f := &model.Fire{
		ID:         id,
		ScheduleID: s.ID,
		TenantID:   s.TenantID,
		FireTime:   t,
		LocalTime:  e.localTime(s, t),
		Count:      max(s.EventCount, 1),
		Decision:   model.FireAfter,
		Note:       "after " + up.ID,
		CreatedAt:  now.UTC(),
		Watched:    e.watched(s),
	}
	inheritDeadline(s, f, deadline)
	deferred, err := e.admit(ctx, f, now)
	if err != nil {
		return nil, false, fmt.Errorf("emitter: after %s: %w", id, err)
	}
	if e.large(f) || deferred {
		f.Remaining = f.Count
	}
	inserted, err := st.FireInsert(ctx, f)
	if err != nil || !inserted {
		e.unadmit(f, deferred, now)
	}
	if err != nil {
		return nil, false, fmt.Errorf("emitter: after %s: insert fire: %w", f.ID, err)
	}
	if inserted && deferred {
		e.rate.enqueue(f.TenantID, f.ID, f.FireTime, now)
		e.m.FiresDeferred(deferReason(f.Note), 1)
	}
	if !inserted {
		if f, err = st.FireGet(ctx, s.TenantID, id); err != nil {
			if errors.Is(err, model.ErrNotFound) {
				return nil, false, fmt.Errorf("emitter: after %s: fire of another tenant: %w", id, model.ErrConflict)
			}
			return nil, false, fmt.Errorf("emitter: after %s: read fire: %w", id, err)
		}
	}
	es := s
	if deadline != nil {
		// The events' window ends at the upstream's deadline (at least
		// a millisecond: a deadline already past stays on the events).
		c := *s
		c.Window = max(deadline.Sub(f.FireTime.Add(f.Jitter)), time.Millisecond)
		es = &c
	}
	b := e.newBatch()
	complete, err := e.fireEvents(ctx, es, f, now, b)
	if err == nil {
		err = b.flush(ctx)
	}
	if err != nil {
		return nil, false, fmt.Errorf("emitter: after %s: %w", f.ID, err)
	}
	var ws PassStats
	out := outExisting
	if inserted {
		out = outInserted
	}
	e.count(&ws, dueFire{s: s, t: t}, f, out)
	e.m.EventsEmitted(b.inserted)
	if inserted && complete {
		e.signal(ctx, []*model.Fire{f})
	}
	return f, inserted, nil
}

// inheritDeadline gives the dependent's fire f its own deadline (from s)
// or the upstream's, whichever comes first.
func inheritDeadline(s *model.Schedule, f *model.Fire, upstream *time.Time) {
	setDeadline(s, f)
	if upstream != nil && (f.Deadline == nil || upstream.Before(*f.Deadline)) {
		d := upstream.UTC()
		f.Deadline, f.OnDeadline = &d, cmp.Or(s.OnDeadline, model.DeadlineRecord)
	}
}
