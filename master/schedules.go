package master

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/calendar"
	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/internal/logkey"
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
	return sp
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

// applyPatch merges a PATCH body into sp. Setting one of cron, fields and
// runAt replaces the others.
func applyPatch(sp *schedule.Spec, in *api.ScheduleUpdate) error {
	n := 0
	for _, set := range []bool{in.Cron != nil, in.Fields != nil, in.RunAt != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return invalid("cron", schedule.MutuallyExclusive)
	}
	if n == 1 {
		sp.Cron, sp.Fields, sp.RunAt = in.Cron, cronFields(in.Fields), in.RunAt
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
	if err := fe.err(); err != nil {
		return nil, err
	}
	return comp, nil
}

// CreateSchedule implements POST /v1/schedules.
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
	return s.idempotent(c, prefixSchedule, func(id string) (int, any, error) {
		// Here rather than before: a retry replays the first answer.
		if err := s.checkDisk(); err != nil {
			return 0, nil, err
		}
		if err := s.checkSchedulesQuota(ctx, who.tenantID, rules, comp.Schedule.EventCount); err != nil {
			return 0, nil, err
		}
		m := comp.Schedule
		now := s.now().UTC()
		m.ID, m.TenantID = id, who.tenantID
		m.Partition = model.PartitionOf(id, s.cfg.Partitions)
		m.Version, m.State = 1, model.ScheduleActive
		m.CreatedAt, m.UpdatedAt = now, now
		if err := s.createAndEmit(ctx, &m, comp); err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, s.scheduleOutCompiled(&m, comp), nil
	}, func(id string) (int, any, error) {
		// A retry of a create that stored the schedule and then failed or
		// died: finish its emission before answering.
		m, err := s.store.ScheduleGet(ctx, who.tenantID, id)
		if err != nil {
			return 0, nil, err
		}
		comp, err := schedule.FromSchedule(m, s.cfg.MaxChildren)
		if err != nil {
			return 0, nil, err
		}
		if err := s.saved(ctx, m, comp.Keys); err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, s.scheduleOutCompiled(m, comp), nil
	})
}

// createAndEmit stores the new schedule m and has its fires emitted: with
// the schedule in one store commit when the emitter plans them
// (CreatePlanner), else by saved after the write.
func (s *Server) createAndEmit(ctx context.Context, m *model.Schedule, comp *schedule.Compiled) error {
	if s.planner != nil && m.State == model.ScheduleActive {
		fs, done, err := s.planner.PlanCreated(context.WithoutCancel(ctx), m, comp.Keys)
		if err != nil {
			return fmt.Errorf("plan the fires of schedule %s: %w", m.ID, err)
		}
		if done != nil {
			inserted, n, err := s.store.ScheduleCreateWithFires(ctx, m, comp.Children(m), fs)
			done(context.WithoutCancel(ctx), inserted, n, err)
			return err
		}
	}
	if err := s.store.ScheduleCreate(ctx, m, comp.Children(m)); err != nil {
		return err
	}
	return s.saved(ctx, m, comp.Keys)
}

// saved has the emitter emit the fires of a saved schedule that the
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
	m := comp.Schedule
	now := s.now().UTC()
	m.ID, m.TenantID, m.Partition = old.ID, old.TenantID, old.Partition
	m.State, m.CreatedAt, m.UpdatedAt = old.State, old.CreatedAt, now
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
	if err := s.cancelFutureFires(ctx, tenant, id); err != nil {
		return err
	}
	if err := s.saved(ctx, &m, comp.Keys); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.scheduleOutCompiled(&m, comp))
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
	tenant := callerOf(c).tenantID
	if _, err := s.store.ScheduleGet(ctx, tenant, id); err != nil {
		return err
	}
	// Cancel before deleting so that a failed delete leaves nothing waiting,
	// and again after it for events the emitter wrote meanwhile.
	if _, err := s.store.EventCancelPending(ctx, id, "", s.now()); err != nil {
		return err
	}
	if err := s.store.ScheduleDelete(ctx, tenant, id); err != nil {
		return err
	}
	if _, err := s.store.EventCancelPending(ctx, id, "", s.now()); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// setState moves the schedule to state with a new version (children are
// rewritten for it, because children of another version are stale). It
// returns the schedule compiled, for the caller to answer with.
func (s *Server) setState(ctx context.Context, old *model.Schedule, state model.ScheduleState) (*model.Schedule, *schedule.Compiled, error) {
	m := *old
	m.State = state
	m.Version = old.Version + 1
	m.UpdatedAt = s.now().UTC()
	comp, err := schedule.FromSchedule(&m, s.cfg.MaxChildren)
	if err != nil {
		return nil, nil, err
	}
	if err := s.store.ScheduleUpdate(ctx, &m, old.Version, comp.Children(&m)); err != nil {
		return nil, nil, err
	}
	return &m, comp, nil
}

// PauseSchedule implements POST /v1/schedules/{id}/pause.
func (s *Server) PauseSchedule(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	m, err := s.store.ScheduleGet(ctx, tenant, id)
	if err != nil {
		return err
	}
	switch m.State {
	case model.ScheduleCompleted:
		return conflict("the schedule is completed")
	case model.ScheduleActive:
		if m, _, err = s.setState(ctx, m, model.SchedulePaused); err != nil {
			return err
		}
	}
	if err := s.cancelFutureFires(ctx, tenant, id); err != nil {
		return err
	}
	return s.respondSchedule(c, http.StatusOK, m)
}

// ResumeSchedule implements POST /v1/schedules/{id}/resume.
func (s *Server) ResumeSchedule(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	m, err := s.store.ScheduleGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	var comp *schedule.Compiled
	switch m.State {
	case model.ScheduleCompleted:
		return conflict("the schedule is completed")
	case model.SchedulePaused:
		if err := s.checkFire(ctx, m); err != nil {
			return err
		}
		if m, comp, err = s.setState(ctx, m, model.ScheduleActive); err != nil {
			return err
		}
		fallthrough
	case model.ScheduleActive:
		// Also when already active: a retried resume whose first attempt
		// failed after the state change still emits (idempotently).
		if comp == nil {
			if comp, err = schedule.FromSchedule(m, s.cfg.MaxChildren); err != nil {
				return err
			}
		}
		if err := s.saved(ctx, m, comp.Keys); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, s.scheduleOutCompiled(m, comp))
	}
	return s.respondSchedule(c, http.StatusOK, m)
}

// TriggerSchedule implements POST /v1/schedules/{id}/trigger.
func (s *Server) TriggerSchedule(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	m, err := s.store.ScheduleGet(ctx, tenant, id)
	if err != nil {
		return err
	}
	if s.emitter == nil {
		return unavailable("no emitter is running")
	}
	if err := s.checkFire(ctx, m); err != nil {
		return err
	}
	f, err := s.emitter.Trigger(ctx, m, s.now())
	if err != nil {
		return err
	}
	out, err := s.fireOut(ctx, f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, out)
}

// checkFire runs the checks of a write that fires m (trigger, resume): the
// disk guard and the tenant's maxEventsPerFire and maxEventsStored.
func (s *Server) checkFire(ctx context.Context, m *model.Schedule) error {
	if err := s.checkDisk(); err != nil {
		return err
	}
	rules, err := s.rulesOf(ctx, m.TenantID)
	if err != nil {
		return err
	}
	if err := checkPerFire(m, rules); err != nil {
		return err
	}
	return s.checkStoredQuota(ctx, m.TenantID, rules, m.EventCount)
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
	loc := comp.Loc
	out := api.Preview{ScheduleId: m.ID, Timezone: m.Timezone, FireTimes: make([]api.FireTime, len(times))}
	for i, t := range times {
		out.FireTimes[i] = api.FireTime{Utc: t.UTC(), Local: t.In(loc).Format(localFormat)}
	}
	if deref(params.Explain, false) {
		out.Excluded = &excluded
	}
	return c.JSON(http.StatusOK, out)
}

const localFormat = "2006-01-02T15:04:05.999Z07:00"

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
				e := api.ExcludedFire{Utc: t.UTC(), Local: t.In(comp.Loc).Format(localFormat), CalendarId: d.By.ID, Reason: d.Reason}
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
	}
	if m.Cron != "" {
		out.Cron = &m.Cron
	}
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
	if len(m.ExcludeCalendars) > 0 {
		cals := append([]string(nil), m.ExcludeCalendars...)
		on := api.OnExcluded(cmp.Or(m.OnExcluded, model.OnExcludedSkip))
		out.ExcludeCalendars, out.OnExcluded = &cals, &on
	}
	if m.State == model.ScheduleActive {
		if t := comp.NextFireTimes(now, nextFireTimesShown); t != nil {
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
