package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// nextFireTimesShown is how many next fire times a schedule's representation
// carries.
const nextFireTimesShown = 5

// scheduleSpec is a schedule's definition as the client states it; create
// builds it from the request, update from the stored schedule plus the patch.
type scheduleSpec struct {
	name        string
	cron        *string
	fields      *api.CronFields
	runAt       *time.Time
	timezone    string
	eventCount  int
	policyID    string
	window      string
	spread      bool
	priority    int
	overlap     api.Overlap
	target      api.Target
	payload     json.RawMessage
	maxAttempts int
	startAt     *time.Time
	endAt       *time.Time
	misfire     api.Misfire
}

// compiled is a validated scheduleSpec.
type compiled struct {
	s    model.Schedule // definition fields only
	expr *cron.Expr     // nil for a one-off
	loc  *time.Location
	keys []cron.Key
}

func (s *Server) specFromCreate(in *api.ScheduleCreate) *scheduleSpec {
	sp := &scheduleSpec{
		name:        in.Name,
		cron:        in.Cron,
		fields:      in.Fields,
		runAt:       in.RunAt,
		timezone:    deref(in.Timezone, "UTC"),
		eventCount:  deref(in.EventCount, 1),
		policyID:    deref(in.PolicyId, ""),
		window:      deref(in.Window, ""),
		spread:      deref(in.Spread, false),
		priority:    deref(in.Priority, 0),
		overlap:     deref(in.Overlap, api.OverlapAllow),
		target:      in.Target,
		maxAttempts: deref(in.MaxAttempts, s.cfg.DefaultMaxAttempts),
		startAt:     in.StartAt,
		endAt:       in.EndAt,
		misfire:     deref(in.Misfire, api.MisfireFireOnce),
	}
	if in.Payload != nil {
		sp.payload = *in.Payload
	}
	return sp
}

func specFromSchedule(m *model.Schedule) *scheduleSpec {
	sp := &scheduleSpec{
		name:        m.Name,
		runAt:       m.RunAt,
		timezone:    m.Timezone,
		eventCount:  m.EventCount,
		policyID:    m.PolicyID,
		spread:      m.Spread,
		priority:    m.Priority,
		overlap:     api.Overlap(m.Overlap),
		target:      targetOut(m.Target),
		payload:     m.Payload,
		maxAttempts: m.MaxAttempts,
		startAt:     m.StartAt,
		endAt:       m.EndAt,
		misfire:     api.Misfire(m.Misfire),
	}
	if m.Cron != "" {
		c := m.Cron
		sp.cron = &c
	}
	if m.Window > 0 {
		sp.window = m.Window.String()
	}
	return sp
}

// applyPatch merges a PATCH body into sp. Setting one of cron, fields and
// runAt replaces the others.
func applyPatch(sp *scheduleSpec, in *api.ScheduleUpdate) error {
	n := 0
	for _, set := range []bool{in.Cron != nil, in.Fields != nil, in.RunAt != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return invalid("cron", "cron, fields and runAt are mutually exclusive")
	}
	if n == 1 {
		sp.cron, sp.fields, sp.runAt = in.Cron, in.Fields, in.RunAt
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&sp.name, in.Name)
	set(&sp.timezone, in.Timezone)
	set(&sp.policyID, in.PolicyId)
	set(&sp.window, in.Window)
	if in.EventCount != nil {
		sp.eventCount = *in.EventCount
	}
	if in.Spread != nil {
		sp.spread = *in.Spread
	}
	if in.Priority != nil {
		sp.priority = *in.Priority
	}
	if in.Overlap != nil {
		sp.overlap = *in.Overlap
	}
	if in.Target != nil {
		sp.target = *in.Target
	}
	if in.Payload != nil {
		sp.payload = *in.Payload
	}
	if in.MaxAttempts != nil {
		sp.maxAttempts = *in.MaxAttempts
	}
	if in.StartAt != nil {
		sp.startAt = in.StartAt
	}
	if in.EndAt != nil {
		sp.endAt = in.EndAt
	}
	if in.Misfire != nil {
		sp.misfire = *in.Misfire
	}
	return nil
}

// compile validates sp completely (nothing is written before it passed) and
// returns the schedule definition and its child keys.
func (s *Server) compile(ctx context.Context, tenantID string, sp *scheduleSpec) (*compiled, error) {
	var fe fieldErrors
	out := &compiled{}
	m := &out.s
	s.checkName(&fe, "name", sp.name)
	m.Name = sp.name

	n := 0
	for _, set := range []bool{sp.cron != nil, sp.fields != nil, sp.runAt != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		fe.add("cron", "one of cron, fields or runAt is required")
	case n > 1:
		fe.add("cron", "cron, fields and runAt are mutually exclusive")
	}

	if sp.timezone == "" {
		sp.timezone = "UTC"
	}
	loc, err := cron.LoadLocation(sp.timezone)
	if err != nil {
		fe.add("timezone", strings.TrimPrefix(err.Error(), "timezone: "))
	}
	out.loc = loc
	m.Timezone = sp.timezone

	exprField := "cron"
	if n == 1 {
		switch {
		case sp.cron != nil:
			out.expr, err = cron.Parse(*sp.cron)
			if err != nil {
				fe.add("cron", err.Error())
			}
		case sp.fields != nil:
			exprField = "fields"
			f := sp.fields
			out.expr, err = cron.ParseFields(cron.Fields{
				Minute: deref(f.Minute, ""), Hour: deref(f.Hour, ""), DayOfMonth: deref(f.DayOfMonth, ""),
				Month: deref(f.Month, ""), DayOfWeek: deref(f.DayOfWeek, ""),
			})
			if err != nil {
				fe.add(cronFieldName(err), err.Error())
			}
		case sp.runAt != nil:
			t := sp.runAt.UTC()
			m.RunAt = &t
		}
	}
	if out.expr != nil {
		m.Cron = out.expr.String()
		out.keys, err = out.expr.Children(s.cfg.MaxChildren)
		if err != nil {
			fe.add(exprField, err.Error())
		}
	}

	m.EventCount = sp.eventCount
	if sp.eventCount < 1 || sp.eventCount > s.cfg.MaxEventCount {
		fe.add("eventCount", "must be between 1 and "+itoa(s.cfg.MaxEventCount))
	}
	if sp.window != "" {
		d, err := time.ParseDuration(sp.window)
		switch {
		case err != nil:
			fe.add("window", "not a duration such as \"30m\" or \"2h\"")
		case d < 0:
			fe.add("window", "must not be negative")
		case d > s.cfg.MaxWindow:
			fe.add("window", "longer than "+s.cfg.MaxWindow.String())
		}
		m.Window = d
	}
	m.Spread = sp.spread
	if sp.spread && m.Window <= 0 {
		fe.add("spread", "spreading needs a window")
	}
	m.Priority = sp.priority
	if sp.priority < MinPriority || sp.priority > MaxPriority {
		fe.add("priority", "must be between "+itoa(MinPriority)+" and "+itoa(MaxPriority))
	}
	m.Overlap = model.OverlapPolicy(sp.overlap)
	if !sp.overlap.Valid() {
		fe.add("overlap", "must be allow, skip or cancel")
	}
	m.Misfire = model.MisfirePolicy(sp.misfire)
	if !sp.misfire.Valid() {
		fe.add("misfire", "must be fire_once, fire_all or skip")
	}
	m.Target = checkTarget(&fe, sp.target)
	if len(sp.payload) > 0 && string(sp.payload) != "null" {
		m.Payload = append(json.RawMessage(nil), sp.payload...)
		if len(m.Payload) > s.cfg.MaxPayloadBytes {
			fe.add("payload", "larger than "+itoa(s.cfg.MaxPayloadBytes)+" bytes")
		}
	}
	m.MaxAttempts = sp.maxAttempts
	if sp.maxAttempts < 1 || sp.maxAttempts > MaxAttemptsLimit {
		fe.add("maxAttempts", "must be between 1 and "+itoa(MaxAttemptsLimit))
	}
	if sp.startAt != nil {
		t := sp.startAt.UTC()
		m.StartAt = &t
	}
	if sp.endAt != nil {
		t := sp.endAt.UTC()
		m.EndAt = &t
	}
	if m.RunAt != nil && m.StartAt != nil {
		fe.add("startAt", "applies to cron schedules only")
	}
	if m.RunAt != nil && m.EndAt != nil {
		fe.add("endAt", "applies to cron schedules only")
	}
	if m.StartAt != nil && m.EndAt != nil && !m.EndAt.After(*m.StartAt) {
		fe.add("endAt", "must be after startAt")
	} else if m.EndAt != nil && !m.EndAt.After(s.now()) {
		fe.add("endAt", "is in the past")
	}
	m.PolicyID = sp.policyID
	if sp.policyID != "" {
		if _, err := s.store.PolicyGet(ctx, tenantID, sp.policyID); errors.Is(err, model.ErrNotFound) {
			fe.add("policyId", "unknown policy")
		} else if err != nil {
			return nil, err
		}
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// cronFieldName names the field of a field-form expression that the cron
// engine rejected.
func cronFieldName(err error) string {
	var ce *cron.Error
	if !errors.As(err, &ce) {
		return "fields"
	}
	name := strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "").Replace(ce.Field))
	switch name {
	case "minute", "hour", "month":
		return "fields." + name
	case "dayofmonth", "dom":
		return "fields.dayOfMonth"
	case "dayofweek", "dow":
		return "fields.dayOfWeek"
	}
	return "fields"
}

// sqsQueueURL matches https://sqs.<region>.amazonaws.com/<account>/<name> and
// the same shape on a local endpoint (http allowed there).
var sqsQueueURL = regexp.MustCompile(`^/[0-9]{12}/[A-Za-z0-9_-]{1,80}(\.fifo)?$`)

func checkTarget(fe *fieldErrors, t api.Target) model.Target {
	out := model.Target{Type: model.TargetType(t.Type)}
	switch t.Type {
	case api.Http:
		if t.QueueUrl != nil {
			fe.add("target.queueUrl", "only for sqs targets")
		}
		if t.Url == nil || *t.Url == "" {
			fe.add("target.url", "required for http targets")
			return out
		}
		out.URL = *t.Url
		u, err := url.Parse(out.URL)
		switch {
		case err != nil:
			fe.add("target.url", "not a URL")
		case u.Scheme != "http" && u.Scheme != "https":
			fe.add("target.url", "must be an http or https URL")
		case u.Host == "":
			fe.add("target.url", "has no host")
		case u.User != nil:
			fe.add("target.url", "must not contain credentials")
		}
	case api.Sqs:
		if t.Url != nil {
			fe.add("target.url", "only for http targets")
		}
		if t.QueueUrl == nil || *t.QueueUrl == "" {
			fe.add("target.queueUrl", "required for sqs targets")
			return out
		}
		out.QueueURL = *t.QueueUrl
		u, err := url.Parse(out.QueueURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !sqsQueueURL.MatchString(u.Path) || u.RawQuery != "" {
			fe.add("target.queueUrl", "not an SQS queue URL such as https://sqs.eu-west-1.amazonaws.com/123456789012/my-queue")
		}
	default:
		fe.add("target.type", "must be http or sqs")
	}
	return out
}

func (s *Server) childrenOf(m *model.Schedule, keys []cron.Key) []model.Child {
	if m.RunAt != nil {
		// A one-off gets one UTC child for the minute of RunAt, so that the
		// pass over that window emits it even if the emit on save failed.
		// The emitter fires a one-off only in the window containing RunAt,
		// so the yearly recurrence of the key never fires again.
		ra := m.RunAt.UTC()
		k := cron.Key{Class: cron.ClassMM, Month: int8(ra.Month()), Day: int8(ra.Day()), Hour: int8(ra.Hour()), Minute: int8(ra.Minute())}
		return []model.Child{{
			ScheduleID: m.ID, TenantID: m.TenantID, ScheduleVersion: m.Version, Partition: m.Partition,
			Timezone: "UTC", LaunchExpression: k.LaunchExpression(), Minute: ra.Minute(),
		}}
	}
	out := make([]model.Child, len(keys))
	for i, k := range keys {
		out[i] = model.Child{
			ScheduleID:       m.ID,
			TenantID:         m.TenantID,
			ScheduleVersion:  m.Version,
			Partition:        m.Partition,
			Timezone:         m.Timezone,
			LaunchExpression: k.LaunchExpression(),
			Minute:           int(k.Minute),
		}
	}
	return out
}

// CreateSchedule implements POST /v1/schedules.
func (s *Server) CreateSchedule(c echo.Context, _ api.CreateScheduleParams) error {
	var in api.ScheduleCreate
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	who := callerOf(c)
	comp, err := s.compile(ctx, who.tenantID, s.specFromCreate(&in))
	if err != nil {
		return err
	}
	return s.idempotent(c, prefixSchedule, func(id string) (int, any, error) {
		m := comp.s
		now := s.now().UTC()
		m.ID, m.TenantID = id, who.tenantID
		m.Partition = model.PartitionOf(id, s.cfg.Partitions)
		m.Version, m.State = 1, model.ScheduleActive
		m.CreatedAt, m.UpdatedAt = now, now
		if err := s.store.ScheduleCreate(ctx, &m, s.childrenOf(&m, comp.keys)); err != nil {
			return 0, nil, err
		}
		if err := s.saved(ctx, &m); err != nil {
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
		if err := s.saved(ctx, m); err != nil {
			return 0, nil, err
		}
		out, err := s.scheduleOut(m)
		return http.StatusCreated, out, err
	})
}

// saved has the emitter emit the fires of a saved schedule that the
// emitter's passes may have scanned past already (a one-off due soon, a
// cron schedule's fires within the lead). Nothing else would emit them, so
// the call is not cut short when the client gives up, and its failure is
// the request's: the client retries (with its Idempotency-Key, the retry
// finishes the emission; emission is idempotent).
func (s *Server) saved(ctx context.Context, m *model.Schedule) error {
	if s.emitter == nil || m.State != model.ScheduleActive {
		return nil
	}
	if err := s.emitter.Saved(context.WithoutCancel(ctx), m); err != nil {
		s.log.Warn().Err(err).Str("schedule", m.ID).Msg("emitting the fires of a saved schedule failed")
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
	old, err := s.store.ScheduleGet(ctx, tenant, id)
	if err != nil {
		return err
	}
	sp := specFromSchedule(old)
	if err := applyPatch(sp, &in); err != nil {
		return err
	}
	comp, err := s.compile(ctx, tenant, sp)
	if err != nil {
		return err
	}
	m := comp.s
	now := s.now().UTC()
	m.ID, m.TenantID, m.Partition = old.ID, old.TenantID, old.Partition
	m.State, m.CreatedAt, m.UpdatedAt = old.State, old.CreatedAt, now
	m.Version = old.Version + 1
	if m.State == model.ScheduleCompleted && (m.RunAt == nil || m.RunAt.After(now) || !old.RunAt.Equal(*m.RunAt)) {
		m.State = model.ScheduleActive // a new definition can fire again
	}
	if err := s.store.ScheduleUpdate(ctx, &m, old.Version, s.childrenOf(&m, comp.keys)); err != nil {
		return err
	}
	if err := s.cancelFutureFires(ctx, tenant, id); err != nil {
		return err
	}
	if err := s.saved(ctx, &m); err != nil {
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
// rewritten for it, because children of another version are stale).
func (s *Server) setState(ctx context.Context, old *model.Schedule, state model.ScheduleState) (*model.Schedule, error) {
	m := *old
	m.State = state
	m.Version = old.Version + 1
	m.UpdatedAt = s.now().UTC()
	var keys []cron.Key
	if m.Cron != "" {
		expr, err := cron.Parse(m.Cron)
		if err != nil {
			return nil, err
		}
		if keys, err = expr.Children(s.cfg.MaxChildren); err != nil {
			return nil, err
		}
	}
	if err := s.store.ScheduleUpdate(ctx, &m, old.Version, s.childrenOf(&m, keys)); err != nil {
		return nil, err
	}
	return &m, nil
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
		if m, err = s.setState(ctx, m, model.SchedulePaused); err != nil {
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
	switch m.State {
	case model.ScheduleCompleted:
		return conflict("the schedule is completed")
	case model.SchedulePaused:
		if m, err = s.setState(ctx, m, model.ScheduleActive); err != nil {
			return err
		}
		fallthrough
	case model.ScheduleActive:
		// Also when already active: a retried resume whose first attempt
		// failed after the state change still emits (idempotently).
		if err := s.saved(ctx, m); err != nil {
			return err
		}
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
	loc, err := cron.LoadLocation(m.Timezone)
	if err != nil {
		return err
	}
	var times []time.Time
	if m.RunAt != nil {
		times = []time.Time{*m.RunAt}
	} else {
		expr, err := cron.Parse(m.Cron)
		if err != nil {
			return err
		}
		times = s.nextFireTimes(m, expr, loc, count)
	}
	out := api.Preview{ScheduleId: m.ID, Timezone: m.Timezone, FireTimes: make([]api.FireTime, len(times))}
	for i, t := range times {
		out.FireTimes[i] = api.FireTime{Utc: t.UTC(), Local: t.In(loc).Format(time.RFC3339)}
	}
	return c.JSON(http.StatusOK, out)
}

// nextFireTimes lists up to k fire times of a cron schedule from now,
// honouring startAt and endAt.
func (s *Server) nextFireTimes(m *model.Schedule, expr *cron.Expr, loc *time.Location, k int) []time.Time {
	after := s.now()
	if m.StartAt != nil && m.StartAt.After(after) {
		after = m.StartAt.Add(-time.Nanosecond)
	}
	times := cron.NextFireTimes(expr, loc, after, k)
	out := make([]time.Time, 0, len(times))
	for _, t := range times {
		if m.EndAt != nil && t.After(*m.EndAt) {
			break
		}
		out = append(out, t.UTC())
	}
	return out
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
	comp := &compiled{s: *m}
	var err error
	if comp.loc, err = cron.LoadLocation(m.Timezone); err != nil {
		return nil, err
	}
	if m.Cron != "" {
		if comp.expr, err = cron.Parse(m.Cron); err != nil {
			return nil, err
		}
		if comp.keys, err = comp.expr.Children(s.cfg.MaxChildren); err != nil {
			return nil, err
		}
	}
	return s.scheduleOutCompiled(m, comp), nil
}

func (s *Server) scheduleOutCompiled(m *model.Schedule, comp *compiled) *api.Schedule {
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
		Children:      len(comp.keys),
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
	if m.State == model.ScheduleActive {
		switch {
		case m.RunAt != nil:
			out.NextFireTimes = []time.Time{*m.RunAt}
		case comp.expr != nil:
			out.NextFireTimes = s.nextFireTimes(m, comp.expr, comp.loc, nextFireTimesShown)
		}
	}
	return out
}

func targetOut(t model.Target) api.Target {
	out := api.Target{Type: api.TargetType(t.Type)}
	if t.URL != "" {
		u := t.URL
		out.Url = &u
	}
	if t.QueueURL != "" {
		q := t.QueueURL
		out.QueueUrl = &q
	}
	return out
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func itoa(n int) string { return strconv.Itoa(n) }
