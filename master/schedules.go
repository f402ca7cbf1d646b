package master

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/calendar"
	"github.com/schedulerd/schedulerd/create"
	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/internal/guard"
	"github.com/schedulerd/schedulerd/internal/idempotency"
	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/master/internal/batchanswer"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
	"github.com/schedulerd/schedulerd/store"
)

// nextFireTimesShown is how many next fire times a schedule's representation
// carries.
const nextFireTimesShown = 5

func (s *Server) specFromCreate(in *api.ScheduleCreate) schedule.Spec {
	sp := schedule.Spec{
		Name:        in.Name,
		Cron:        in.Cron,
		Fields:      cronFields(in.Fields),
		RunAt:       in.RunAt,
		Timezone:    deref(in.Timezone, "UTC"),
		EventCount:  deref(in.EventCount, 1),
		PolicyID:    deref(in.PolicyId, ""),
		Window:      deref(in.Window, ""),
		Spread:      deref(in.Spread, false),
		Priority:    deref(in.Priority, 0),
		Overlap:     model.OverlapPolicy(deref(in.Overlap, api.OverlapAllow)),
		Target:      targetIn(in.Target),
		MaxAttempts: deref(in.MaxAttempts, s.cfg.DefaultMaxAttempts),
		StartAt:     in.StartAt,
		EndAt:       in.EndAt,
		Misfire:     model.MisfirePolicy(deref(in.Misfire, api.MisfireFireOnce)),
		Jitter:      deref(in.Jitter, ""),
		Labels:      deref(in.Labels, nil),
	}
	if in.Payload != nil {
		sp.Payload = *in.Payload
	}
	if in.ExcludeCalendars != nil {
		sp.ExcludeCalendars = *in.ExcludeCalendars
	}
	if in.OnExcluded != nil {
		sp.OnExcluded = model.OnExcludedPolicy(*in.OnExcluded)
	}
	sp.Deadline, sp.MaxEventAge = deref(in.Deadline, ""), deref(in.MaxEventAge, "")
	if in.OnDeadline != nil {
		sp.OnDeadline = model.DeadlinePolicy(*in.OnDeadline)
	}
	sp.Interval = in.Interval
	if in.Crons != nil {
		sp.Crons = *in.Crons
		if sp.Crons == nil {
			sp.Crons = []string{} // "crons": [] is set, and empty
		}
	}
	sp.Notify = notifyIn(in.Notify)
	sp.After = afterIn(in.After)
	return sp
}

func notifyIn(in *api.Notify) []model.Notify {
	if in == nil {
		return nil
	}
	out := make([]model.Notify, len(*in))
	for i, n := range *in {
		out[i] = model.Notify{URL: deref(n.Url, ""), QueueURL: deref(n.QueueUrl, ""), On: make([]model.NotifyKind, len(n.On))}
		for j, k := range n.On {
			out[i].On[j] = model.NotifyKind(k)
		}
	}
	return out
}

func afterIn(in *api.After) *model.After {
	if in == nil {
		return nil
	}
	return &model.After{ScheduleID: in.ScheduleId, When: model.AfterWhen(deref(in.When, ""))}
}

func notifyOut(ns []model.Notify) *api.Notify {
	if len(ns) == 0 {
		return nil
	}
	out := make(api.Notify, len(ns))
	for i, n := range ns {
		e := api.NotifyEntry{On: make([]api.NotifyKind, len(n.On))}
		if n.URL != "" {
			e.Url = new(n.URL)
		}
		if n.QueueURL != "" {
			e.QueueUrl = new(n.QueueURL)
		}
		for j, k := range n.On {
			e.On[j] = api.NotifyKind(k)
		}
		out[i] = e
	}
	return &out
}

func afterOut(a *model.After) *api.After {
	if a == nil {
		return nil
	}
	return &api.After{ScheduleId: a.ScheduleID, When: new(api.AfterWhen(a.When))}
}

func cronFields(f *api.CronFields) *cron.Fields {
	if f == nil {
		return nil
	}
	return &cron.Fields{
		Minute: deref(f.Minute, ""), Hour: deref(f.Hour, ""), DayOfMonth: deref(f.DayOfMonth, ""),
		Month: deref(f.Month, ""), DayOfWeek: deref(f.DayOfWeek, ""),
	}
}

func targetIn(t api.Target) schedule.Target {
	return schedule.Target{Type: model.TargetType(t.Type), URL: t.Url, QueueURL: t.QueueUrl}
}

// applyPatch merges a PATCH body into sp. Setting one of cron, fields,
// crons, interval, runAt and after replaces the others.
func applyPatch(sp *schedule.Spec, in *api.ScheduleUpdate) error {
	n := 0
	for _, set := range []bool{in.Cron != nil, in.Fields != nil, in.RunAt != nil, in.Crons != nil, in.Interval != nil, in.After != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		field := "cron"
		switch {
		case in.Crons != nil:
			field = "crons"
		case in.Interval != nil:
			field = "interval"
		case in.After != nil:
			field = "after"
		}
		return invalid(field, schedule.MutuallyExclusive)
	}
	if n == 1 {
		sp.Cron, sp.Fields, sp.RunAt = in.Cron, cronFields(in.Fields), in.RunAt
		sp.Interval, sp.Crons = in.Interval, nil
		if in.Crons != nil {
			sp.Crons = append([]string{}, *in.Crons...)
		}
		sp.After = afterIn(in.After)
	}
	if in.Notify != nil {
		sp.Notify = notifyIn(in.Notify) // whole: [] removes every receiver
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&sp.Name, in.Name)
	set(&sp.Timezone, in.Timezone)
	set(&sp.PolicyID, in.PolicyId)
	set(&sp.Window, in.Window)
	set(&sp.Jitter, in.Jitter)
	set(&sp.Deadline, in.Deadline)
	set(&sp.MaxEventAge, in.MaxEventAge)
	if in.OnDeadline != nil {
		sp.OnDeadline = model.DeadlinePolicy(*in.OnDeadline)
	}
	if in.EventCount != nil {
		sp.EventCount = *in.EventCount
	}
	if in.Spread != nil {
		sp.Spread = *in.Spread
	}
	if in.Priority != nil {
		sp.Priority = *in.Priority
	}
	if in.Overlap != nil {
		sp.Overlap = model.OverlapPolicy(*in.Overlap)
	}
	if in.Target != nil {
		sp.Target = targetIn(*in.Target)
	}
	if in.Payload != nil {
		sp.Payload = *in.Payload
	}
	if in.MaxAttempts != nil {
		sp.MaxAttempts = *in.MaxAttempts
	}
	if in.StartAt != nil {
		sp.StartAt = in.StartAt
	}
	if in.EndAt != nil {
		sp.EndAt = in.EndAt
	}
	if in.Misfire != nil {
		sp.Misfire = model.MisfirePolicy(*in.Misfire)
	}
	if in.Labels != nil {
		sp.Labels = *in.Labels // whole: {} removes every label
	}
	if in.ExcludeCalendars != nil {
		// The empty list removes the calendars, and with them onExcluded.
		sp.ExcludeCalendars = *in.ExcludeCalendars
		if len(sp.ExcludeCalendars) == 0 && in.OnExcluded == nil {
			sp.OnExcluded = ""
		}
	}
	if in.OnExcluded != nil {
		sp.OnExcluded = model.OnExcludedPolicy(*in.OnExcluded)
	}
	return nil
}

// limits are the bounds of a schedule's definition from the configuration.
func (s *Server) limits() schedule.Limits {
	return schedule.Limits{
		MaxNameLen:      s.cfg.MaxNameLen,
		MaxEventCount:   s.cfg.MaxEventCount,
		MaxPayloadBytes: s.cfg.MaxPayloadBytes,
		MaxChildren:     s.cfg.MaxChildren,
		MaxWindow:       s.cfg.MaxWindow,
		MinPriority:     MinPriority,
		MaxPriority:     MaxPriority,
		MaxAttempts:     MaxAttemptsLimit,
		CheckTargetHost: s.guard.CheckHost,
	}
}

// compile validates sp against lim completely (nothing is written before it
// passed), including that its policy exists, and compiles it.
func (s *Server) compile(ctx context.Context, tenantID string, sp schedule.Spec, lim schedule.Limits) (*schedule.Compiled, error) {
	return s.compileKnowing(ctx, tenantID, sp, lim, s.now(), nil)
}

// compileKnowing is compile at now that looks each policy up once per
// policies, which holds whether the policies looked up so far exist (nil:
// none kept): a batch's items mostly name the same few policies.
func (s *Server) compileKnowing(ctx context.Context, tenantID string, sp schedule.Spec, lim schedule.Limits, now time.Time, policies map[string]bool) (*schedule.Compiled, error) {
	comp, err := schedule.Compile(sp, lim, now)
	var fe fieldErrors
	if err != nil {
		var se schedule.Errors
		if !errors.As(err, &se) {
			return nil, err
		}
		fe = fieldErrors(se)
		for _, e := range fe {
			if e.Field == "eventCount" && e.Reason == schedule.OverPerFireQuota(lim.MaxEventsPerFire) {
				e.Reason = overPerFireQuota(tenantID, lim.MaxEventsPerFire)
			}
		}
	}
	if sp.PolicyID != "" {
		known, looked := policies[sp.PolicyID]
		if !looked {
			_, err := s.store.PolicyGet(ctx, tenantID, sp.PolicyID)
			if err != nil && !errors.Is(err, model.ErrNotFound) {
				return nil, err
			}
			known = err == nil
			if policies != nil {
				policies[sp.PolicyID] = known
			}
		}
		if !known {
			fe.add("policyId", "unknown policy")
		}
	}
	if err := s.checkCalendarsKnown(ctx, &fe, tenantID, sp.ExcludeCalendars); err != nil {
		return nil, err
	}
	if err := s.checkAfterKnown(ctx, &fe, tenantID, "", sp.After); err != nil {
		return nil, err
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	return comp, nil
}

// CreateSchedule implements POST /v1/schedules: a create of one item
// (createSchedules).
func (s *Server) CreateSchedule(c echo.Context, _ api.CreateScheduleParams) error {
	var in api.ScheduleCreate
	if d, ok := c.Get(ctxScheduleCreate).(*api.ScheduleCreate); ok {
		in = *d
	} else if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	who := callerOf(c)
	rules, err := s.rulesOf(ctx, who.tenantID)
	if err != nil {
		return err
	}
	comp, err := s.compile(ctx, who.tenantID, s.specFromCreate(&in), s.limitsFor(rules))
	if err != nil {
		return err
	}
	raw, _ := c.Get(ctxRawBody).([]byte)
	item := create.Item{Compiled: comp, Size: len(raw)}
	if key := c.Request().Header.Get("Idempotency-Key"); key != "" {
		item.Key, item.Hash = key, requestHash(c)
	}
	res, err := s.createSchedules(c, rules, []create.Item{item})
	if err != nil {
		return keyProblem(err, "Idempotency-Key", "request")
	}
	switch r := res[0]; {
	case r.Err != nil:
		return keyProblem(r.Err, "Idempotency-Key", "request")
	case r.Replay != nil:
		return s.answerRecorded(c, r.Replay, nil)
	default:
		noteChange(ctx, auditChange{objectID: r.Schedule.ID, version: r.Schedule.Version, after: r.Schedule})
		// Encoded as the answer recorded for a retry, which replays it
		// (without the warnings, which are of this moment).
		out := s.scheduleOutCompiled(r.Schedule, r.Compiled)
		if w := s.capacityWarnings(ctx, r.Schedule); w != nil {
			out.Warnings = &w
		}
		b, err := batchanswer.AppendSchedule(nil, out)
		if err != nil {
			return err
		}
		return c.JSONBlob(http.StatusCreated, b)
	}
}

// createSchedules has the create use case create items for the caller,
// whose quotas are rules.
func (s *Server) createSchedules(c echo.Context, rules *tenantRules, items []create.Item) ([]create.Result, error) {
	who := callerOf(c)
	ctx := c.Request().Context()
	if tp := s.traceParentOf(c); tp != "" {
		for _, it := range items {
			if it.Compiled != nil {
				it.Compiled.Schedule.CreatedTrace = tp
			}
		}
	}
	return s.creates.Create(ctx, &create.Request{
		TenantID: who.tenantID,
		Scope:    who.scope(),
		Items:    items,
		Reserve: func(ctx context.Context, events int) error {
			return s.checkSchedulesQuota(ctx, who.tenantID, rules, events)
		},
		Answer: func(m *model.Schedule, comp *schedule.Compiled) (idempotency.Answer, error) {
			b, err := batchanswer.AppendSchedule(nil, s.scheduleOutCompiled(m, comp))
			return idempotency.Answer{Status: http.StatusCreated, Body: b}, err
		},
	})
}

// saved has the emitter emit the fires of a changed schedule that the
// emitter's passes may have scanned past already (a one-off due soon, a
// cron schedule's fires within the lead). Nothing else would emit them, so
// the call is not cut short when the client gives up, and its failure is
// the request's: the client retries (with its Idempotency-Key, the retry
// finishes the emission; emission is idempotent). A fire too large to write
// within a request is only recorded here and written in the background.
// keys are m's compiled children keys.
func (s *Server) saved(ctx context.Context, m *model.Schedule, keys []cron.Key) error {
	if s.emitter == nil || m.State != model.ScheduleActive {
		return nil
	}
	if err := s.emitter.Saved(context.WithoutCancel(ctx), m, keys); err != nil {
		s.log.Warn().Err(err).Str(logkey.Schedule, m.ID).Msg("emitting the fires of a saved schedule failed")
		return fmt.Errorf("schedule %s saved, its fires not emitted yet: %w", m.ID, err)
	}
	return nil
}

// ListSchedules implements GET /v1/schedules.
func (s *Server) ListSchedules(c echo.Context, params api.ListSchedulesParams) error {
	after, err := decodeCursor(params.Cursor)
	if err != nil {
		return err
	}
	limit := s.pageSize(params.Limit)
	p := &store.ScheduleListParams{
		TenantID:   callerOf(c).tenantID,
		After:      after,
		Limit:      min(limit+1, 1000),
		PolicyID:   deref(params.PolicyId, ""),
		NamePrefix: deref(params.NamePrefix, ""),
	}
	if params.State != nil {
		p.State = model.ScheduleState(*params.State)
	}
	for _, l := range deref(params.Label, nil) {
		r, err := model.ParseLabelRequirement(l)
		if err != nil {
			return invalid("label", err.Error())
		}
		p.Labels = append(p.Labels, r)
	}
	items, err := s.store.ScheduleList(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := api.ScheduleList{Items: make([]api.Schedule, 0, min(len(items), limit))}
	for i, m := range items {
		if i == limit {
			break
		}
		o, err := s.scheduleOut(m)
		if err != nil {
			return err
		}
		out.Items = append(out.Items, *o)
	}
	if len(items) > limit || (len(items) == limit && p.Limit == limit) {
		out.NextCursor = encodeCursor(items[limit-1].ID)
	}
	return c.JSON(http.StatusOK, out)
}

// GetSchedule implements GET /v1/schedules/{id}.
func (s *Server) GetSchedule(c echo.Context, id api.ID) error {
	m, err := s.store.ScheduleGet(c.Request().Context(), callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	return s.respondSchedule(c, http.StatusOK, m)
}

// UpdateSchedule implements PATCH /v1/schedules/{id}.
func (s *Server) UpdateSchedule(c echo.Context, id api.ID) error {
	var in api.ScheduleUpdate
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	if err := s.checkDisk(); err != nil {
		return err
	}
	old, err := s.store.ScheduleGet(ctx, tenant, id)
	if err != nil {
		return err
	}
	sp := schedule.SpecFromSchedule(old)
	if err := applyPatch(&sp, &in); err != nil {
		return err
	}
	rules, err := s.rulesOf(ctx, tenant)
	if err != nil {
		return err
	}
	lim := s.limitsFor(rules)
	if sp.RunAt != nil && old.RunAt != nil && sp.RunAt.Equal(*old.RunAt) {
		// The catch-up rule is for a runAt the client sets: a one-off that
		// fired long ago can still be renamed.
		lim.CatchUpLimit = 0
	}
	comp, err := s.compile(ctx, tenant, sp, lim)
	if err != nil {
		return err
	}
	var fe fieldErrors
	if err := s.checkAfterKnown(ctx, &fe, tenant, id, comp.Schedule.After); err != nil {
		return err
	}
	if err := fe.err(); err != nil {
		return err
	}
	m := comp.Schedule
	now := s.now().UTC()
	m.ID, m.TenantID, m.Partition, m.CreatedTrace = old.ID, old.TenantID, old.Partition, old.CreatedTrace
	m.State, m.CreatedAt, m.UpdatedAt = old.State, old.CreatedAt, now
	m.PausedNote, m.PausedAt, m.PausedBy, m.ResumeAt, m.SkipUntil = old.PausedNote, old.PausedAt, old.PausedBy, old.ResumeAt, old.SkipUntil
	m.Version = old.Version + 1
	if m.State == model.ScheduleCompleted && (m.RunAt == nil || m.RunAt.After(now) || !old.RunAt.Equal(*m.RunAt)) {
		m.State = model.ScheduleActive // a new definition can fire again
	}
	if m.State == model.ScheduleActive {
		if err := s.checkStoredQuota(ctx, tenant, rules, m.EventCount); err != nil {
			return err
		}
	}
	if err := s.store.ScheduleUpdate(ctx, &m, old.Version, comp.Children(&m)); err != nil {
		return err
	}
	noteChange(ctx, auditChange{objectID: m.ID, version: m.Version, before: old, after: &m, previous: old})
	if err := s.cancelFutureFires(ctx, tenant, id); err != nil {
		return err
	}
	if err := s.saved(ctx, &m, comp.Keys); err != nil {
		return err
	}
	out := s.scheduleOutCompiled(&m, comp)
	if w := s.capacityWarnings(ctx, &m); w != nil {
		out.Warnings = &w
	}
	return c.JSON(http.StatusOK, out)
}

// cancelFutureFires cancels the waiting events of the schedule's fires whose
// fire time is still ahead (emitted early for a definition that changed).
func (s *Server) cancelFutureFires(ctx context.Context, tenantID, scheduleID string) error {
	now := s.now()
	p := &store.FireListParams{TenantID: tenantID, ScheduleID: scheduleID, Limit: 100}
	for {
		fires, err := s.store.FireList(ctx, p)
		if err != nil {
			return err
		}
		for _, f := range fires {
			if !f.FireTime.After(now) {
				return nil
			}
			if _, err := s.store.EventCancelPending(ctx, scheduleID, f.ID, now); err != nil {
				return err
			}
		}
		if len(fires) < p.Limit {
			return nil
		}
		p.Before = fires[len(fires)-1].FireTime
	}
}

// DeleteSchedule implements DELETE /v1/schedules/{id}; for a one-off job it is
// the cancellation.
func (s *Server) DeleteSchedule(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	m, err := s.store.ScheduleGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	if err := s.deleteSchedule(ctx, m); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// deleteSchedule deletes m with its waiting events (DELETE and the bulk
// delete).
func (s *Server) deleteSchedule(ctx context.Context, m *model.Schedule) error {
	// Cancel before deleting so that a failed delete leaves nothing waiting,
	// and again after it for events the emitter wrote meanwhile.
	if _, err := s.store.EventCancelPending(ctx, m.ID, "", s.now()); err != nil {
		return err
	}
	if err := s.store.ScheduleDelete(ctx, m.TenantID, m.ID); err != nil {
		return err
	}
	noteChange(ctx, auditChange{objectID: m.ID, version: m.Version, before: m, previous: m})
	_, err := s.store.EventCancelPending(ctx, m.ID, "", s.now())
	return err
}

// setState moves the schedule to state with a new version (children are
// rewritten for it, because children of another version are stale), with
// the changes of change (nil: none) made to it too. It returns the
// schedule compiled, for the caller to answer with. ErrConflict when old's
// version moved.
func (s *Server) setState(ctx context.Context, old *model.Schedule, state model.ScheduleState, change func(m *model.Schedule)) (*model.Schedule, *schedule.Compiled, error) {
	m := *old
	m.State = state
	if change != nil {
		change(&m)
	}
	m.Version = old.Version + 1
	m.UpdatedAt = s.now().UTC()
	comp, err := schedule.FromSchedule(&m, s.cfg.MaxChildren)
	if err != nil {
		return nil, nil, err
	}
	if err := s.store.ScheduleUpdate(ctx, &m, old.Version, comp.Children(&m)); err != nil {
		return nil, nil, err
	}
	noteChange(ctx, auditChange{objectID: m.ID, version: m.Version, before: old, after: &m, previous: old})
	return &m, comp, nil
}

// TriggerSchedule implements POST /v1/schedules/{id}/trigger.
func (s *Server) TriggerSchedule(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	m, err := s.store.ScheduleGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	opts, err := s.triggerOptions(c)
	if err != nil {
		return err
	}
	f, err := s.trigger(ctx, m, opts)
	if err != nil {
		return err
	}
	noteChange(ctx, auditChange{objectID: m.ID, version: m.Version, note: strings.TrimSpace("fire " + f.ID + " " + f.Note)})
	out, err := s.fireOut(ctx, f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, out)
}

// maxTriggerNote is the longest note of a trigger, in characters.
const maxTriggerNote = 500

// triggerOptions reads the optional body of a trigger: an eventCount and a
// payload checked as a schedule's own (the per-fire quota is checkFire's),
// and a note.
func (s *Server) triggerOptions(c echo.Context) (emitter.TriggerOptions, error) {
	var o emitter.TriggerOptions
	if raw, _ := c.Get(ctxRawBody).([]byte); len(bytes.TrimSpace(raw)) == 0 {
		return o, nil
	}
	var in api.TriggerRequest
	if err := decodeBody(c, &in); err != nil {
		return o, err
	}
	var fe fieldErrors
	if in.EventCount != nil {
		if n := *in.EventCount; n < 1 || n > s.cfg.MaxEventCount {
			fe.add("eventCount", "must be between 1 and "+itoa(s.cfg.MaxEventCount))
		}
		o.EventCount = *in.EventCount
	}
	if in.Payload != nil {
		switch p := *in.Payload; {
		case string(bytes.TrimSpace(p)) == "null":
			fe.add("payload", "must not be null: leave it out for the schedule's payload")
		case len(p) > s.cfg.MaxPayloadBytes:
			fe.add("payload", "larger than "+itoa(s.cfg.MaxPayloadBytes)+" bytes")
		}
		o.Payload = append(json.RawMessage(nil), *in.Payload...)
	}
	if in.Note != nil {
		if utf8.RuneCountInString(*in.Note) > maxTriggerNote {
			fe.add("note", "longer than "+itoa(maxTriggerNote)+" characters")
		}
		o.Note = *in.Note
	}
	return o, fe.err()
}

// trigger fires m's events now, with opts (single and bulk trigger).
func (s *Server) trigger(ctx context.Context, m *model.Schedule, opts emitter.TriggerOptions) (*model.Fire, error) {
	if s.emitter == nil {
		return nil, unavailable("no emitter is running")
	}
	fired := m
	if opts.EventCount > 0 || opts.Payload != nil {
		// The quotas and the disk guard judge the fire's own count and
		// payload.
		cp := *m
		cp.EventCount = cmp.Or(opts.EventCount, m.EventCount)
		if opts.Payload != nil {
			cp.Payload = opts.Payload
		}
		fired = &cp
	}
	if err := s.checkFire(ctx, fired); err != nil {
		return nil, err
	}
	return s.emitter.TriggerWith(ctx, m, s.now(), opts)
}

// checkFire runs the checks of a write that fires m (trigger, resume): the
// disk guard, with the room the fire's events need, and the tenant's maxEventsPerFire and maxEventsStored.
func (s *Server) checkFire(ctx context.Context, m *model.Schedule) error {
	return s.checkEvents(ctx, m, m.EventCount)
}

// checkEvents is checkFire for writes of events events of m (several
// fires: a backfill).
func (s *Server) checkEvents(ctx context.Context, m *model.Schedule, events int) error {
	// The events carry the payload; the schedule's share of the estimate
	// is the margin.
	if err := s.checkDiskFor(guard.WriteNeed(len(m.Payload), events)); err != nil {
		return err
	}
	rules, err := s.rulesOf(ctx, m.TenantID)
	if err != nil {
		return err
	}
	if err := checkPerFire(m, rules); err != nil {
		return err
	}
	return s.checkStoredQuota(ctx, m.TenantID, rules, events)
}

// PreviewSchedule implements GET /v1/schedules/{id}/preview.
func (s *Server) PreviewSchedule(c echo.Context, id api.ID, params api.PreviewScheduleParams) error {
	m, err := s.store.ScheduleGet(c.Request().Context(), callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	count := deref(params.Count, s.cfg.PreviewDefault)
	if count > s.cfg.PreviewMax {
		return invalid("count", "at most "+itoa(s.cfg.PreviewMax))
	}
	comp, err := schedule.FromSchedule(m, s.cfg.MaxChildren)
	if err != nil {
		return err
	}
	times, excluded, err := s.previewTimes(c.Request().Context(), m, comp, count)
	if err != nil {
		return err
	}
	out := previewOut(comp, m.ID, times, excluded)
	if deref(params.Explain, false) {
		out.Excluded = &excluded
	}
	return c.JSON(http.StatusOK, out)
}

// PreviewScheduleSpec implements POST /v1/schedules/preview: a create body
// validated as CreateSchedule does, previewed and not stored.
func (s *Server) PreviewScheduleSpec(c echo.Context, params api.PreviewScheduleSpecParams) error {
	count := deref(params.Count, s.cfg.PreviewDefault)
	if count > s.cfg.PreviewMax {
		return invalid("count", "at most "+itoa(s.cfg.PreviewMax))
	}
	var in api.ScheduleCreate
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	rules, err := s.rulesOf(ctx, tenant)
	if err != nil {
		return err
	}
	comp, err := s.compile(ctx, tenant, s.specFromCreate(&in), s.limitsFor(rules))
	if err != nil {
		return err
	}
	m := comp.Schedule
	m.TenantID = tenant
	times, excluded, err := s.previewTimes(ctx, &m, comp, count)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, previewOut(comp, "", times, excluded))
}

// previewOut is the preview of the fires at times of comp, saved as id
// ("" for a definition not saved yet, whose jitter offsets are not known);
// excluded are the fires its calendars excluded, and moved where they
// moved to (no DST mark: not a wall time of the cron).
func previewOut(comp *schedule.Compiled, id string, times []time.Time, excluded []api.ExcludedFire) api.Preview {
	m := &comp.Schedule
	fires := comp.PreviewAt(id, times)
	moved := make(map[time.Time]bool)
	for _, e := range excluded {
		if e.MovedTo != nil {
			moved[e.MovedTo.UTC()] = true
		}
	}
	out := api.Preview{ScheduleId: id, Timezone: m.Timezone, FireTimes: make([]api.FireTime, len(fires))}
	if d := comp.Describe(); d != "" {
		out.Description = &d
	}
	if m.Jitter > 0 {
		j := m.Jitter.String()
		out.Jitter = &j
	}
	for i, p := range fires {
		ft := api.FireTime{Utc: p.At, Local: p.Local.Format(localLayout)}
		if m.Jitter > 0 && p.JitterKnown {
			at, j := p.LaunchAt(), p.Jitter.String()
			ft.LaunchAt, ft.Jitter = &at, &j
		}
		if p.DST != "" && !moved[p.At.UTC()] {
			d := api.FireTimeDst(p.DST)
			ft.Dst = &d
		}
		if m.Skipped(p.At) {
			ft.Skipped = new(true)
		}
		out.FireTimes[i] = ft
	}
	return out
}

// localLayout is how a preview writes a local time: RFC 3339 with the
// milliseconds of a one-off that has them.
const localLayout = "2006-01-02T15:04:05.999Z07:00"

// previewLookMax bounds the fire times a preview looks at per fire time
// asked for, so that calendars excluding nearly everything cost a bounded
// walk.
const previewLookMax = 50

// previewTimes returns the next count fire times of m (compiled as comp)
// after now with its calendars applied as the emitter applies them
// (calendar.ForSchedule): excluded ones left out, moved ones at the
// instant they move to, one fire per instant. excluded lists the excluded
// fire times looked at.
func (s *Server) previewTimes(ctx context.Context, m *model.Schedule, comp *schedule.Compiled, count int) ([]time.Time, []api.ExcludedFire, error) {
	excluded := []api.ExcludedFire{}
	if len(m.ExcludeCalendars) == 0 {
		return comp.NextFireTimes(s.now(), count), excluded, nil
	}
	set, err := s.scheduleCalendars(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	var out []time.Time
	from := s.now()
	for looked := 0; looked < count*previewLookMax; {
		batch := comp.NextFireTimes(from, count)
		if len(batch) == 0 {
			break
		}
		for _, t := range batch {
			looked++
			from = t
			d := calendar.ForSchedule(set, m, t)
			if d.Excluded() {
				e := api.ExcludedFire{Utc: t.UTC(), Local: t.In(comp.Loc).Format(localLayout), CalendarId: d.By.ID, Reason: d.Reason}
				if d.By.Name != "" {
					e.CalendarName = &d.By.Name
				}
				if !d.To.IsZero() {
					to := d.To.UTC()
					e.MovedTo = &to
				}
				excluded = append(excluded, e)
				t = d.To
			}
			if !t.IsZero() {
				if i, found := slices.BinarySearchFunc(out, t, time.Time.Compare); !found {
					out = slices.Insert(out, i, t)
				}
			}
			// Moved fires land at or after the fire they move: once count
			// times are not after this one, no later fire comes before them.
			if len(out) >= count && !out[count-1].After(from) {
				return out[:count], excluded, nil
			}
		}
		if m.IsOneOff() {
			break
		}
	}
	return out[:min(count, len(out))], excluded, nil
}

func (s *Server) respondSchedule(c echo.Context, status int, m *model.Schedule) error {
	out, err := s.scheduleOut(m)
	if err != nil {
		return err
	}
	return c.JSON(status, out)
}

// scheduleOut renders a stored schedule, recomputing its children count and
// next fire times.
func (s *Server) scheduleOut(m *model.Schedule) (*api.Schedule, error) {
	comp, err := schedule.FromSchedule(m, s.cfg.MaxChildren)
	if err != nil {
		return nil, err
	}
	return s.scheduleOutCompiled(m, comp), nil
}

// scheduleOutCompiled renders m, compiled as comp (whose definition m's is).
func (s *Server) scheduleOutCompiled(m *model.Schedule, comp *schedule.Compiled) *api.Schedule {
	return scheduleOutAt(m, comp, s.now())
}

// scheduleOutAt is scheduleOutCompiled with the next fire times after now.
func scheduleOutAt(m *model.Schedule, comp *schedule.Compiled, now time.Time) *api.Schedule {
	out := &api.Schedule{
		Id:            m.ID,
		Name:          m.Name,
		RunAt:         m.RunAt,
		Timezone:      m.Timezone,
		EventCount:    m.EventCount,
		Spread:        m.Spread,
		Priority:      m.Priority,
		Overlap:       api.Overlap(m.Overlap),
		Target:        targetOut(m.Target),
		MaxAttempts:   m.MaxAttempts,
		StartAt:       m.StartAt,
		EndAt:         m.EndAt,
		Misfire:       api.Misfire(m.Misfire),
		State:         api.ScheduleState(m.State),
		Version:       m.Version,
		Children:      len(comp.Keys),
		NextFireTimes: []time.Time{},
		CreatedAt:     m.CreatedAt,
		UpdatedAt:     m.UpdatedAt,
		PausedAt:      m.PausedAt,
		ResumeAt:      m.ResumeAt,
		SkipUntil:     m.SkipUntil,
	}
	if m.PausedNote != "" {
		out.PausedNote = &m.PausedNote
	}
	if m.PausedBy != "" {
		out.PausedBy = &m.PausedBy
	}
	if m.Cron != "" {
		out.Cron = &m.Cron
	}
	if m.Interval > 0 {
		iv := m.Interval.String()
		out.Interval = &iv
	}
	if len(m.Crons) > 0 {
		crons := append([]string(nil), m.Crons...)
		out.Crons = &crons
	}
	out.Notify, out.After = notifyOut(m.Notify), afterOut(m.After)
	if m.PolicyID != "" {
		out.PolicyId = &m.PolicyID
	}
	if m.Window > 0 {
		w := m.Window.String()
		out.Window = &w
	}
	if len(m.Payload) > 0 {
		p := api.Payload(m.Payload)
		out.Payload = &p
	}
	if m.Jitter > 0 {
		j := m.Jitter.String()
		out.Jitter = &j
	}
	if m.Deadline > 0 {
		d := m.Deadline.String()
		out.Deadline = &d
	}
	if m.OnDeadline != "" {
		on := api.OnDeadline(m.OnDeadline)
		out.OnDeadline = &on
	}
	if m.MaxEventAge > 0 {
		a := m.MaxEventAge.String()
		out.MaxEventAge = &a
	}
	if len(m.Labels) > 0 {
		l := api.Labels(m.Labels)
		out.Labels = &l
	}
	if len(m.ExcludeCalendars) > 0 {
		cals := append([]string(nil), m.ExcludeCalendars...)
		on := api.OnExcluded(cmp.Or(m.OnExcluded, model.OnExcludedSkip))
		out.ExcludeCalendars, out.OnExcluded = &cals, &on
	}
	if m.State == model.ScheduleActive {
		// m, not the definition comp was compiled from: an interval counts
		// from m's creation.
		withM := *comp
		withM.Schedule = *m
		if t := withM.NextFireTimes(now, nextFireTimesShown); t != nil {
			out.NextFireTimes = t
		}
	}
	return out
}

func targetOut(t model.Target) api.Target {
	d := schedule.TargetOf(t)
	return api.Target{Type: api.TargetType(d.Type), Url: d.URL, QueueUrl: d.QueueURL}
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func itoa(n int) string { return strconv.Itoa(n) }
