package master

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// Backfill limits: the default and largest maxFires, and how far the
// instants of a refused range are counted for its error.
const (
	backfillDefaultFires = 1000
	backfillMaxFires     = 10000
	backfillCountMax     = 1000000
)

// BackfillSchedule implements POST /v1/schedules/{id}/backfill.
func (s *Server) BackfillSchedule(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	var in api.BackfillRequest
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	m, err := s.store.ScheduleGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	if s.emitter == nil {
		return unavailable("no emitter is running")
	}
	times, err := s.backfillTimes(m, &in)
	if err != nil {
		return err
	}
	st, err := s.emitter.Backfill(ctx, m, times, emitter.BackfillOptions{
		Admit: func(fires int) error { return s.checkBackfill(ctx, m, fires) },
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, api.BackfillResult{
		ScheduleId: m.ID, From: in.From.UTC(), To: in.To.UTC(), Instants: st.Instants,
		Fires: st.Fires, Skipped: st.Skipped, Existing: st.Existing,
		Events: st.Events, EventsPending: st.EventsPending,
	})
}

// backfillTimes checks a backfill of m and returns the instants of m in
// [from, to): those of the schedule's own enumeration (Compiled), within
// its startAt and endAt.
func (s *Server) backfillTimes(m *model.Schedule, in *api.BackfillRequest) ([]time.Time, error) {
	now := s.now()
	limit := deref(in.MaxFires, backfillDefaultFires)
	var fe fieldErrors
	if limit < 1 || limit > backfillMaxFires {
		fe.add("maxFires", "must be between 1 and "+itoa(backfillMaxFires))
	}
	if in.To.After(now) {
		fe.add("to", "must not be after now ("+now.UTC().Format(time.RFC3339)+"): a backfill fires past instants")
	}
	if !in.From.Before(in.To) {
		fe.add("from", "must be before to")
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	switch {
	case m.IsOneOff():
		return nil, invalid("runAt", "a one-off schedule has one fire: trigger it instead of a backfill")
	case m.State == model.SchedulePaused:
		return nil, conflict("the schedule is paused: resume it before a backfill")
	case m.State == model.ScheduleCompleted:
		return nil, conflict("the schedule is completed")
	}
	comp, err := schedule.FromSchedule(m, s.cfg.MaxChildren)
	if err != nil {
		return nil, err
	}
	times := instantsIn(comp, in.From, in.To, limit+1)
	if len(times) > limit {
		n := len(instantsIn(comp, in.From, in.To, backfillCountMax+1))
		holds := itoa(n)
		if n > backfillCountMax {
			holds = "more than " + itoa(backfillCountMax)
		}
		return nil, invalid("to", "the range holds "+holds+" fires, more than maxFires ("+itoa(limit)+"): shorten it or raise maxFires (at most "+itoa(backfillMaxFires)+")")
	}
	return times, nil
}

// instantsIn lists up to k fire times of comp in [from, to), in pages of
// the schedule's own enumeration.
func instantsIn(comp *schedule.Compiled, from, to time.Time, k int) []time.Time {
	var out []time.Time
	after := from.Add(-time.Nanosecond)
	for len(out) < k {
		page := comp.NextFireTimes(after, min(k-len(out), backfillMaxFires))
		for _, t := range page {
			if !t.Before(to) {
				return out
			}
			out = append(out, t)
		}
		if len(page) == 0 {
			return out
		}
		after = page[len(page)-1]
	}
	return out
}

// checkBackfill runs the checks of a backfill that records fires new
// fires of m: the disk guard with the room their events need, and the
// tenant's maxEventsPerFire and maxEventsStored.
func (s *Server) checkBackfill(ctx context.Context, m *model.Schedule, fires int) error {
	if fires == 0 {
		return nil
	}
	return s.checkEvents(ctx, m, fires*max(m.EventCount, 1))
}
