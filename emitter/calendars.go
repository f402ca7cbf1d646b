package emitter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/calendar"
	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
)

// calendarCache holds the calendars read in one pass (or one Saved call):
// each is read from the store once, whatever the number of fires that
// look at it, and an edit applies from the next pass.
type calendarCache struct {
	mu   sync.Mutex
	cals map[string]*calendar.Calendar // tenant\x00id -> compiled; nil: none
}

func newCalendarCache() *calendarCache {
	return &calendarCache{cals: map[string]*calendar.Calendar{}}
}

// set returns the calendars that s names, compiled; a calendar that does
// not exist (deleted meanwhile) or no longer compiles excludes nothing.
func (e *Emitter) calendarSet(ctx context.Context, c *calendarCache, s *model.Schedule, st *PassStats) (calendar.Set, error) {
	set := make(calendar.Set, 0, len(s.ExcludeCalendars))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range s.ExcludeCalendars {
		key := s.TenantID + "\x00" + id
		cc, ok := c.cals[key]
		if !ok {
			m, err := e.deps.Store.CalendarGet(ctx, s.TenantID, id)
			st.CalendarsRead++
			switch {
			case errors.Is(err, model.ErrNotFound):
				e.log.Warn().Str(logkey.Schedule, s.ID).Str("calendar", id).Msg("schedule names a calendar that does not exist: it excludes nothing")
			case err != nil:
				return nil, fmt.Errorf("calendar %s: %w", id, err)
			default:
				if cc, err = calendar.Compile(m); err != nil {
					e.log.Warn().Err(err).Str("calendar", id).Msg("stored calendar does not compile: it excludes nothing")
				}
			}
			c.cals[key] = cc
		}
		if cc != nil {
			set = append(set, cc)
		}
	}
	return set, nil
}

// applyCalendars is the calendar rule of due fires (calendar.ForSchedule):
// a fire of a schedule that names calendars and that they exclude is
// recorded as skipped_calendar, without events, and, with onExcluded
// next_included, replaced by a fire at the next included instant (the
// same fire id as the schedule's own fire at that instant, if it has one:
// they are one fire). A fire already recorded keeps its decision: it stays
// due, for its events to be ensured. The result is in (time, id) order.
func (e *Emitter) applyCalendars(ctx context.Context, due []dueFire, c *calendarCache, now time.Time, st *PassStats) ([]dueFire, error) {
	if !slices.ContainsFunc(due, func(d dueFire) bool { return len(d.s.ExcludeCalendars) > 0 }) {
		return due, nil
	}
	out := make([]dueFire, 0, len(due))
	moved := false
	for _, d := range due {
		if len(d.s.ExcludeCalendars) == 0 {
			out = append(out, d)
			continue
		}
		set, err := e.calendarSet(ctx, c, d.s, st)
		if err != nil {
			return nil, err
		}
		t := model.FireInstant(d.t)
		dec := calendar.ForSchedule(set, d.s, t)
		if !dec.Excluded() {
			out = append(out, d)
			continue
		}
		f := &model.Fire{
			ID: model.FireID(d.s.ID, d.s.Version, t), ScheduleID: d.s.ID, TenantID: d.s.TenantID,
			FireTime: t, LocalTime: e.localTime(d.s, t), Count: max(d.s.EventCount, 1),
			Decision: model.FireSkippedCalendar, Note: dec.Note(), CreatedAt: now.UTC(),
			Watched: e.watched(d.s),
		}
		inserted, err := e.deps.Store.FireInsert(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("record fire %s skipped by calendar: %w", f.ID, err)
		}
		if !inserted {
			// Recorded before (a rescan): its decision stands.
			out = append(out, d)
			continue
		}
		st.Fires++
		st.FiresCalendarSkipped++
		e.m.FiresRecorded(f.Decision, 1)
		e.log.Info().Str(logkey.Schedule, d.s.ID).Time("fireTime", t).Str(logkey.Fire, f.ID).
			Str("note", f.Note).Msg("fire skipped: excluded by a calendar")
		if !dec.To.IsZero() {
			st.FiresMoved++
			out = append(out, dueFire{s: d.s, t: dec.To})
			moved = true
		}
	}
	if moved {
		slices.SortStableFunc(out, compareDue)
		out = slices.CompactFunc(out, func(a, b dueFire) bool { return a.s.ID == b.s.ID && a.t.Equal(b.t) })
	}
	return out, nil
}
