package master

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// maxBulkPage bounds the schedules one POST /v1/schedules/actions call acts
// on (Config.BulkPage), so that one request's work stays bounded; the
// answer says when more may match.
const maxBulkPage = 1000

// ScheduleActions implements POST /v1/schedules/actions: the action is
// applied to each schedule of the page the selector matches by the
// functions the single-schedule operations use, each schedule its own
// compare-and-set. A schedule the action fails on with a client error
// (completed, changed meanwhile, over a quota) is reported and left as it
// was; a server error ends the call, the schedules before it acted on.
func (s *Server) ScheduleActions(c echo.Context) error {
	var in api.ScheduleActionRequest
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	after, err := decodeCursor(in.Cursor)
	if err != nil {
		return err
	}
	p, ids, err := s.selection(ctx, tenant, &in)
	if err != nil {
		return err
	}
	p.After = after
	var page []*model.Schedule
	next := "" // where the next page starts; "": no next page
	if ids != nil {
		page, next, err = s.selectByIDs(ctx, p, ids)
	} else {
		p.Limit = s.cfg.BulkPage
		page, err = s.store.ScheduleList(ctx, p)
		if len(page) == p.Limit {
			next = page[len(page)-1].ID
		}
	}
	if err != nil {
		return err
	}

	out := api.ScheduleActionResult{Matched: len(page)}
	var failed []api.ScheduleActionFailure
	for _, m := range page {
		changed, err := s.act(ctx, in, m, callerOf(c).keyPrefix)
		switch {
		case err == nil:
			if changed {
				out.Changed++
			}
		case isClientError(err) || errors.Is(err, model.ErrNotFound):
			pr := s.toProblem(err, c)
			failed = append(failed, api.ScheduleActionFailure{Id: m.ID, Status: pr.status, Detail: pr.detail})
		default:
			return err
		}
	}
	if failed != nil {
		out.Failed = &failed
	}
	if next != "" {
		more := true
		out.More, out.NextCursor = &more, encodeCursor(next)
	}
	return c.JSON(http.StatusOK, out)
}

// act applies the action of in to m, asked by the key of prefix by, and
// reports whether it changed m's state (pause, resume), deleted it or
// fired it.
func (s *Server) act(ctx context.Context, in api.ScheduleActionRequest, m *model.Schedule, by string) (bool, error) {
	switch in.Action {
	case api.Pause:
		was := m.State
		_, err := s.Pause(ctx, m, deref(in.Note, ""), untilOf(in.Until), by)
		return err == nil && was == model.ScheduleActive, err
	case api.Resume:
		was := m.State
		_, _, err := s.Resume(ctx, m)
		return err == nil && was == model.SchedulePaused, err
	case api.Delete:
		err := s.deleteSchedule(ctx, m)
		if errors.Is(err, model.ErrNotFound) {
			return false, nil // deleted meanwhile: a repeated page
		}
		return err == nil, err
	case api.Trigger:
		_, err := s.trigger(ctx, m, emitter.TriggerOptions{})
		return err == nil, err
	}
	return false, invalid("action", "must be pause, resume, delete or trigger")
}

// selection checks the request of a bulk action and returns the store's
// list parameters for its selector, and its ids (sorted, distinct) when it
// names some. An empty selector is a 400 naming selector: it would select
// every schedule, which no caller means by leaving it out. Criteria that can
// match nothing because they are malformed (a label no schedule can carry,
// an unknown policy) are 422s naming them; ids of no schedule are not an
// error (a repeated delete names schedules gone already).
func (s *Server) selection(ctx context.Context, tenant string, in *api.ScheduleActionRequest) (*store.ScheduleListParams, []string, error) {
	sel := in.Selector
	p := &store.ScheduleListParams{TenantID: tenant, PolicyID: deref(sel.PolicyId, ""), NamePrefix: deref(sel.NamePrefix, "")}
	labels := deref(sel.Labels, nil)
	ids := deref(sel.Ids, nil)
	if len(labels) == 0 && len(ids) == 0 && p.PolicyID == "" && p.NamePrefix == "" {
		return nil, nil, badRequest("the selector selects every schedule: give labels, ids, policyId or namePrefix",
			api.FieldProblem{Field: "selector", Reason: "at least one of labels, ids, policyId and namePrefix, not empty"})
	}
	var fe fieldErrors
	for _, e := range model.CheckLabels("selector.labels", labels) {
		fe.add(e.Field, e.Reason)
	}
	p.Labels = model.LabelsEqual(labels)
	switch in.Action {
	case api.Pause:
		if in.Until != nil && !in.Until.After(s.now()) {
			fe.add("until", "must be in the future")
		}
	case api.Resume, api.Delete, api.Trigger:
		if in.Note != nil {
			fe.add("note", "only with pause")
		}
		if in.Until != nil {
			fe.add("until", "only with pause")
		}
	default:
		fe.add("action", "must be pause, resume, delete or trigger")
	}
	if p.PolicyID != "" {
		if _, err := s.store.PolicyGet(ctx, tenant, p.PolicyID); errors.Is(err, model.ErrNotFound) {
			fe.add("selector.policyId", "unknown policy")
		} else if err != nil {
			return nil, nil, err
		}
	}
	if err := fe.err(); err != nil {
		return nil, nil, err
	}
	if in.Action == api.Trigger && s.emitter == nil {
		return nil, nil, unavailable("no emitter is running")
	}
	if len(ids) == 0 {
		return p, nil, nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return p, slices.Compact(ids), nil
}

// selectByIDs is the page of the schedules among the next BulkPage ids
// (sorted) after p.After that are the tenant's and meet p's other
// criteria, in id order, and the last id looked at when more ids follow.
func (s *Server) selectByIDs(ctx context.Context, p *store.ScheduleListParams, ids []string) ([]*model.Schedule, string, error) {
	i, found := slices.BinarySearch(ids, p.After)
	if found {
		i++
	}
	ids = ids[i:]
	next := ""
	if len(ids) > s.cfg.BulkPage {
		ids = ids[:s.cfg.BulkPage]
		next = ids[len(ids)-1]
	}
	got, err := s.store.ScheduleGetMany(ctx, ids)
	if err != nil {
		return nil, "", err
	}
	page := got[:0]
	for _, m := range got {
		if m.TenantID == p.TenantID && matches(m, p) {
			page = append(page, m)
		}
	}
	slices.SortFunc(page, func(a, b *model.Schedule) int { return strings.Compare(a.ID, b.ID) })
	return page, next, nil
}

// matches reports whether m meets the criteria of p other than tenant and
// position, as ScheduleList does.
func matches(m *model.Schedule, p *store.ScheduleListParams) bool {
	return (p.State == "" || m.State == p.State) &&
		(p.PolicyID == "" || m.PolicyID == p.PolicyID) &&
		strings.HasPrefix(m.Name, p.NamePrefix) &&
		model.LabelsMatch(m.Labels, p.Labels)
}

// untilOf is until in UTC, or nil.
func untilOf(until *time.Time) *time.Time {
	if until == nil {
		return nil
	}
	t := until.UTC()
	return &t
}
