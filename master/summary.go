package master

import (
	"context"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

const (
	// latenessWindow and latenessSample bound the events the lateness
	// percentiles of GET /v1/summary read: at most latenessSample per
	// status (delivered, released) among those launched in the window.
	latenessWindow = time.Hour
	latenessSample = 1000
)

// GetSummary implements GET /v1/summary: what an operator console shows
// first. Every part is a count query or a bounded read.
func (s *Server) GetSummary(c echo.Context) error {
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	now := s.now().UTC()

	counts, err := s.store.EventCountByStatus(ctx, tenant)
	if err != nil {
		return err
	}
	out := api.Summary{
		Counts:      api.SummaryCounts(countsOut(counts)),
		Policies:    []api.SummaryPolicy{},
		GeneratedAt: now,
	}

	policies, err := s.store.PolicyList(ctx, tenant)
	if err != nil {
		return err
	}
	for _, p := range policies {
		waiting, err := s.store.EventCountWaiting(ctx, p.ID, now)
		if err != nil {
			return err
		}
		sp := api.SummaryPolicy{Id: p.ID, Name: p.Name, MaxInFlight: p.MaxInFlight, InUse: p.InUse, Waiting: waiting}
		if p.TimedOut > 0 {
			n := int(p.TimedOut)
			sp.TokenTimeouts = &n
		}
		out.Policies = append(out.Policies, sp)
	}

	if out.Schedules.Active, err = s.countSchedules(ctx, tenant, model.ScheduleActive); err != nil {
		return err
	}
	if out.Schedules.Paused, err = s.countSchedules(ctx, tenant, model.SchedulePaused); err != nil {
		return err
	}
	if out.Lateness, err = s.lateness(ctx, tenant, now); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// countSchedules pages through the tenant's schedules in state st (bounded
// by the tenant's schedule quota).
func (s *Server) countSchedules(ctx context.Context, tenant string, st model.ScheduleState) (int, error) {
	n := 0
	p := &store.ScheduleListParams{TenantID: tenant, State: st, Limit: 1000}
	for {
		page, err := s.store.ScheduleList(ctx, p)
		if err != nil {
			return 0, err
		}
		n += len(page)
		if len(page) < p.Limit {
			return n, nil
		}
		p.After = page[len(page)-1].ID
	}
}

// lateness returns the percentiles of deliveredAt − launchAt over a bounded
// sample of the tenant's delivered events launched in the last
// latenessWindow. The token wait of a throttled event is part of it: the
// event does not record when it got its token.
func (s *Server) lateness(ctx context.Context, tenant string, now time.Time) (api.Lateness, error) {
	var secs []float64
	for _, st := range []model.EventStatus{model.EventDelivered, model.EventReleased} {
		events, err := s.store.EventList(ctx, &store.EventListParams{
			TenantID: tenant, Status: st, From: now.Add(-latenessWindow), Limit: latenessSample,
		})
		if err != nil {
			return api.Lateness{}, err
		}
		for _, e := range events {
			if e.DeliveredAt != nil {
				secs = append(secs, max(0, e.DeliveredAt.Sub(e.LaunchAt).Seconds()))
			}
		}
	}
	slices.Sort(secs)
	return api.Lateness{
		P50: float32(percentile(secs, 0.50)), P90: float32(percentile(secs, 0.90)), P99: float32(percentile(secs, 0.99)),
		Sampled: len(secs),
	}, nil
}

// percentile returns the nearest-rank q-quantile of sorted; 0 if empty.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
