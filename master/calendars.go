package master

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/calendar"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
	"github.com/schedulerd/schedulerd/store"
)

// CreateCalendar implements POST /v1/calendars.
func (s *Server) CreateCalendar(c echo.Context, _ api.CreateCalendarParams) error {
	var in api.CalendarCreate
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	who := callerOf(c)
	cal := &model.Calendar{TenantID: who.tenantID, Name: in.Name, Timezone: in.Timezone}
	setCalendar(cal, in.Dates, in.Ranges, in.Weekly)
	if err := s.checkCalendar(cal); err != nil {
		return err
	}
	ctx := c.Request().Context()
	return s.idempotent(c, model.PrefixCalendar, func(id string) (int, any, error) {
		if err := s.checkCalendarsQuota(ctx, who.tenantID); err != nil {
			return 0, nil, err
		}
		cal := *cal
		cal.ID = id
		now := s.now().UTC()
		cal.CreatedAt, cal.UpdatedAt, cal.Version = now, now, 1
		if err := s.store.CalendarCreate(ctx, &cal); err != nil {
			return 0, nil, err
		}
		noteChange(ctx, auditChange{objectID: cal.ID, version: cal.Version, after: &cal})
		return http.StatusCreated, calendarOut(&cal), nil
	}, func(id string) (int, any, error) {
		cal, err := s.store.CalendarGet(ctx, who.tenantID, id)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, calendarOut(cal), nil
	})
}

// checkCalendarsQuota refuses one more calendar to a tenant that has
// maxCalendars of them.
func (s *Server) checkCalendarsQuota(ctx context.Context, tenantID string) error {
	r, err := s.rulesOf(ctx, tenantID)
	if err != nil {
		return err
	}
	q := r.quotas.MaxCalendars
	n, err := s.store.CalendarCountByTenant(ctx, tenantID, q)
	if err != nil {
		return err
	}
	if n >= q {
		return quotaProblem(http.StatusUnprocessableEntity, tenantID, "maxCalendars",
			"the tenant has "+strconv.Itoa(n)+" calendars, its maxCalendars quota ("+strconv.Itoa(q)+")")
	}
	return nil
}

// setCalendar sets the lists the body gives (nil: keep).
func setCalendar(cal *model.Calendar, dates *[]string, ranges *[]api.CalendarRange, weekly *[]api.WeeklyRule) {
	if dates != nil {
		cal.Dates = append([]string(nil), *dates...)
	}
	if ranges != nil {
		cal.Ranges = nil
		for _, r := range *ranges {
			cal.Ranges = append(cal.Ranges, model.CalendarRange{From: r.From, To: r.To})
		}
	}
	if weekly != nil {
		cal.Weekly = nil
		for _, w := range *weekly {
			r := model.WeeklyRule{From: deref(w.From, ""), To: deref(w.To, "")}
			for _, d := range w.Days {
				r.Days = append(r.Days, string(d))
			}
			cal.Weekly = append(cal.Weekly, r)
		}
	}
}

// checkCalendar validates cal: its name here, its rules in package
// calendar.
func (s *Server) checkCalendar(cal *model.Calendar) error {
	var fe fieldErrors
	s.checkName(&fe, "name", cal.Name)
	if _, err := calendar.Compile(cal); err != nil {
		var ce schedule.Errors
		if !errors.As(err, &ce) {
			return err
		}
		fe = append(fe, ce...)
	}
	return fe.err()
}

// ListCalendars implements GET /v1/calendars.
func (s *Server) ListCalendars(c echo.Context, params api.ListCalendarsParams) error {
	after, err := decodeCursor(params.Cursor)
	if err != nil {
		return err
	}
	limit := s.pageSize(params.Limit)
	p := &store.CalendarListParams{TenantID: callerOf(c).tenantID, After: after, Limit: min(limit+1, 1000)}
	items, err := s.store.CalendarList(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := api.CalendarList{Items: make([]api.Calendar, 0, min(len(items), limit))}
	for i, cal := range items {
		if i == limit {
			break
		}
		out.Items = append(out.Items, *calendarOut(cal))
	}
	if len(items) > limit || (len(items) == limit && p.Limit == limit) {
		out.NextCursor = encodeCursor(items[limit-1].ID)
	}
	return c.JSON(http.StatusOK, out)
}

// GetCalendar implements GET /v1/calendars/{id}.
func (s *Server) GetCalendar(c echo.Context, id api.ID) error {
	cal, err := s.store.CalendarGet(c.Request().Context(), callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, calendarOut(cal))
}

// UpdateCalendar implements PATCH /v1/calendars/{id}. The emitter reads
// calendars on each pass, so a change applies from the next window it has
// not emitted.
func (s *Server) UpdateCalendar(c echo.Context, id api.ID) error {
	var in api.CalendarUpdate
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	old, err := s.store.CalendarGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	cal := *old
	cal.Name = deref(in.Name, cal.Name)
	cal.Timezone = deref(in.Timezone, cal.Timezone)
	setCalendar(&cal, in.Dates, in.Ranges, in.Weekly)
	if err := s.checkCalendar(&cal); err != nil {
		return err
	}
	cal.Version = old.Version + 1
	cal.UpdatedAt = s.now().UTC()
	if err := s.store.CalendarUpdate(ctx, &cal, old.Version); err != nil {
		return err
	}
	noteChange(ctx, auditChange{objectID: cal.ID, version: cal.Version, before: old, after: &cal})
	return c.JSON(http.StatusOK, calendarOut(&cal))
}

// DeleteCalendar implements DELETE /v1/calendars/{id}: refused while a
// schedule names the calendar.
func (s *Server) DeleteCalendar(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	old, err := s.store.CalendarGet(ctx, tenant, id)
	if err != nil {
		return err
	}
	n, err := s.store.ScheduleCountByCalendar(ctx, tenant, id)
	if err != nil {
		return err
	}
	if n > 0 {
		return conflict("the calendar is named by " + itoa(n) + " schedule(s) in excludeCalendars; change or delete them first")
	}
	// A policy's limit schedule may name it too (a rule of a calendar
	// deleted meanwhile does not apply).
	ps, err := s.store.PolicyList(ctx, tenant)
	if err != nil {
		return err
	}
	for _, p := range ps {
		for _, r := range p.Limits {
			if r.When.CalendarID == id {
				return conflict("the calendar is named by the limits of policy " + p.ID + "; change them first")
			}
		}
	}
	if err := s.store.CalendarDelete(ctx, tenant, id); err != nil {
		return err
	}
	noteChange(ctx, auditChange{objectID: id, version: old.Version, before: old})
	return c.NoContent(http.StatusNoContent)
}

func calendarOut(cal *model.Calendar) *api.Calendar {
	out := &api.Calendar{
		Id: cal.ID, Name: cal.Name, Timezone: cal.Timezone, Dates: append([]string{}, cal.Dates...),
		Ranges: []api.CalendarRange{}, Weekly: []api.WeeklyRule{},
		Version: cal.Version, CreatedAt: cal.CreatedAt, UpdatedAt: cal.UpdatedAt,
	}
	for _, r := range cal.Ranges {
		out.Ranges = append(out.Ranges, api.CalendarRange{From: r.From, To: r.To})
	}
	for _, w := range cal.Weekly {
		r := api.WeeklyRule{Days: []api.WeeklyRuleDays{}}
		for _, d := range w.Days {
			r.Days = append(r.Days, api.WeeklyRuleDays(d))
		}
		if w.From != "" {
			r.From = &w.From
		}
		if w.To != "" {
			r.To = &w.To
		}
		out.Weekly = append(out.Weekly, r)
	}
	return out
}

// scheduleCalendars loads the calendars that m names, compiled, in m's
// order. A calendar deleted meanwhile is left out.
func (s *Server) scheduleCalendars(ctx context.Context, m *model.Schedule) (calendar.Set, error) {
	var set calendar.Set
	for _, id := range m.ExcludeCalendars {
		cal, err := s.store.CalendarGet(ctx, m.TenantID, id)
		if errors.Is(err, model.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cc, err := calendar.Compile(cal)
		if err != nil {
			return nil, err
		}
		set = append(set, cc)
	}
	return set, nil
}

// checkCalendarsKnown adds a field error for each id of ids that is not a
// calendar of the tenant (a calendar of another tenant is unknown too).
func (s *Server) checkCalendarsKnown(ctx context.Context, fe *fieldErrors, tenantID string, ids []string) error {
	for i, id := range ids {
		if id == "" {
			continue
		}
		_, err := s.store.CalendarGet(ctx, tenantID, id)
		if errors.Is(err, model.ErrNotFound) {
			fe.add("excludeCalendars["+strconv.Itoa(i)+"]", "unknown calendar "+strconv.Quote(id))
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// PolicyCaps evaluates policies' limit schedules with st's calendars: the
// throttle's CapSource, and the answer of the policy endpoints.
func PolicyCaps(st calendar.CalendarGetter) calendar.PolicyCaps {
	return calendar.PolicyCaps{Calendars: st}
}
