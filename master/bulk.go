package master

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// maxRedrive bounds the events one POST /v1/events/redrive redrives, so
// that one request's work stays bounded; the answer says when more match.
const maxRedrive = 10_000

// RedriveEvents implements POST /v1/events/redrive: the tenant's dead
// events that match the filter become pending again, as by RedriveEvent.
// Each event is its own compare-and-set, so a repeated or interrupted call
// redrives each event at most once per death.
func (s *Server) RedriveEvents(c echo.Context) error {
	var in api.RedriveRequest
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	p := &store.EventListParams{
		TenantID:   callerOf(c).tenantID,
		ScheduleID: deref(in.ScheduleId, ""),
		FireID:     deref(in.FireId, ""),
		Status:     model.EventDead,
	}
	var fe fieldErrors
	redrive := store.Redrive
	switch deref(in.Status, string(model.EventDead)) {
	case string(model.EventDead):
	case string(model.EventExpired):
		p.Status, redrive = model.EventExpired, store.RedriveExpired
	default:
		fe.add("status", "only dead or expired events can be redriven")
	}
	if in.From != nil {
		p.From = in.From.UTC()
	}
	if in.To != nil {
		p.To = in.To.UTC()
		if in.From != nil && !p.To.After(p.From) {
			fe.add("to", "must be after from")
		}
	}
	if p.ScheduleID == "" && p.FireID == "" && in.From == nil && in.To == nil && !deref(in.All, false) {
		fe.add("all", "give fireId, scheduleId, from or to, or all: true to redrive every dead event")
	}
	if err := fe.err(); err != nil {
		return err
	}

	ctx := c.Request().Context()
	out := api.RedriveResult{}
	seen := 0
	for {
		p.Limit = min(1000, maxRedrive-seen+1)
		page, err := s.store.EventList(ctx, p)
		if err != nil {
			return err
		}
		if seen+len(page) > maxRedrive {
			page = page[:maxRedrive-seen]
			more := true
			out.More = &more
		}
		if len(page) == 0 {
			break
		}
		now := s.now().UTC()
		ts := make([]store.EventTransition, len(page))
		for i, e := range page {
			ts[i] = redrive(e.ID, now)
		}
		res, err := s.store.EventTransition(ctx, ts)
		if err != nil {
			return err
		}
		for _, r := range res {
			// A conflict is an event that changed meanwhile: not redriven.
			if r == nil {
				out.Count++
			}
		}
		seen += len(page)
		p.After = page[len(page)-1].ID
		if out.More != nil || len(page) < p.Limit {
			break
		}
	}
	return c.JSON(http.StatusOK, out)
}

// CancelFire implements POST /v1/fires/{id}/cancel: the fire's waiting
// events (pending, scheduled, retrying) are cancelled; events being
// delivered or delivered finish as they would. Events that a fire still
// emitting writes after the call are not cancelled.
func (s *Server) CancelFire(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	f, err := s.store.FireGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	if _, err := s.store.EventCancelPending(ctx, f.ScheduleID, f.ID, s.now().UTC()); err != nil {
		return err
	}
	out, err := s.fireOut(ctx, f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
