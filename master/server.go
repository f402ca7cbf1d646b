// Package master is the public face of schedulerd: the REST API described by
// openapi.yaml, served with labstack/echo.
//
// The generated api package provides the models, the echo ServerInterface
// (implemented by *Server) and the embedded spec, against which every request
// is validated before a handler sees it. One error handler turns every error
// into RFC 9457 problem+json.
//
// Request pipeline: body size limit (413) → authentication (401/403) → per
// tenant rate limit (429) → wrong release token limit per address (429) →
// body scan and validation against the spec (400) → handler.
package master

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/jonboulle/clockwork"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	schedulerd "github.com/schedulerd/schedulerd"
	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/create"
	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/internal/idempotency"
	"github.com/schedulerd/schedulerd/internal/netguard"
	"github.com/schedulerd/schedulerd/internal/tracing"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Store is the part of the storage contract (store.Driver) that the master
// calls. Every tenant-scoped call passes the authenticated tenant.
type Store interface {
	TenantCreate(ctx context.Context, t *model.Tenant) error
	TenantGet(ctx context.Context, id string) (*model.Tenant, error)
	TenantUpdate(ctx context.Context, t *model.Tenant, expectedVersion int64) error
	TenantList(ctx context.Context, p *store.TenantListParams) ([]*model.Tenant, error)
	APIKeyCreate(ctx context.Context, k *model.APIKey) error
	APIKeyGetByHash(ctx context.Context, hash string) (*model.APIKey, error)
	APIKeyList(ctx context.Context, tenantID string) ([]*model.APIKey, error)
	APIKeyRevoke(ctx context.Context, tenantID, keyID string, at time.Time) error
	IdempotencyPut(ctx context.Context, r *model.IdempotencyRecord) (*model.IdempotencyRecord, error)
	IdempotencyGet(ctx context.Context, tenantID, key string) (*model.IdempotencyRecord, error)
	IdempotencyPutMany(ctx context.Context, rs []*model.IdempotencyRecord) ([]*model.IdempotencyRecord, error)

	create.Store // the creates
	ScheduleGet(ctx context.Context, tenantID, id string) (*model.Schedule, error)
	// ScheduleGetMany is cross-tenant: the bulk actions keep the caller's.
	ScheduleGetMany(ctx context.Context, ids []string) ([]*model.Schedule, error)
	ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*model.Schedule, error)
	ScheduleUpdate(ctx context.Context, s *model.Schedule, expectedVersion int64, children []model.Child) error
	ScheduleDelete(ctx context.Context, tenantID, id string) error
	ScheduleCountByPolicy(ctx context.Context, tenantID, policyID string) (int, error)
	ScheduleCountByTenant(ctx context.Context, tenantID string, max int) (int, error)
	ScheduleResumeDue(ctx context.Context, p *store.ScheduleResumeDueParams) ([]*model.Schedule, error)

	FireInsertMany(ctx context.Context, fs []store.FireNew) (inserted []bool, events int, err error)
	FireGet(ctx context.Context, tenantID, id string) (*model.Fire, error)
	FireList(ctx context.Context, p *store.FireListParams) ([]*model.Fire, error)

	EventGet(ctx context.Context, tenantID, id string) (*model.Event, error)
	EventGetByID(ctx context.Context, id string) (*model.Event, error)
	EventList(ctx context.Context, p *store.EventListParams) ([]*model.Event, error)
	EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error)
	EventCountByFire(ctx context.Context, fireID string) (store.EventCounts, error)
	EventCountByTenant(ctx context.Context, tenantID string, max int) (int, error)
	EventCountByStatus(ctx context.Context, tenantID string) (store.EventCounts, error)
	EventLastFinished(ctx context.Context, fireID string) (*time.Time, error)
	EventCancelPending(ctx context.Context, scheduleID, fireID string, at time.Time) (int, error)
	EventCountWaiting(ctx context.Context, policyID string, t time.Time) (int, error)

	PolicyCreate(ctx context.Context, p *model.Policy) error
	PolicyGet(ctx context.Context, tenantID, id string) (*model.Policy, error)
	PolicyGetByID(ctx context.Context, id string) (*model.Policy, error)
	PolicySetHold(ctx context.Context, tenantID, policyID string, h *model.PolicyHold) error
	PolicyList(ctx context.Context, tenantID string) ([]*model.Policy, error)
	PolicyUpdate(ctx context.Context, p *model.Policy, expectedVersion int64) error
	PolicyDelete(ctx context.Context, tenantID, id string) error
	PolicyReleaseTokens(ctx context.Context, policyID string, n int, timedOut int) error

	CalendarCreate(ctx context.Context, c *model.Calendar) error
	CalendarGet(ctx context.Context, tenantID, id string) (*model.Calendar, error)
	CalendarList(ctx context.Context, p *store.CalendarListParams) ([]*model.Calendar, error)
	CalendarUpdate(ctx context.Context, c *model.Calendar, expectedVersion int64) error
	CalendarDelete(ctx context.Context, tenantID, id string) error
	CalendarCountByTenant(ctx context.Context, tenantID string, max int) (int, error)
	ScheduleCountByCalendar(ctx context.Context, tenantID, calendarID string) (int, error)

	AuditAppend(ctx context.Context, rs []*model.AuditRecord) error
	AuditList(ctx context.Context, p *store.AuditListParams) ([]*model.AuditRecord, error)
}

var _ Store = store.Driver(nil)

// Emitter is the part of the emitter that the master calls.
type Emitter interface {
	// Trigger emits one fire of s at once (decision "triggered") and returns it.
	Trigger(ctx context.Context, s *model.Schedule, at time.Time) (*model.Fire, error)
	// TriggerWith is Trigger with a count, payload and note for this fire
	// (checked by the caller).
	TriggerWith(ctx context.Context, s *model.Schedule, at time.Time, o emitter.TriggerOptions) (*model.Fire, error)
	// Saved is called after a schedule was updated or resumed, so that
	// the emitter emits the fires that fall inside the horizon it already
	// scanned, and the fire of a one-off (runAt) schedule. keys are the
	// children keys the master compiled for s (schedule.Compiled.Keys), so
	// that the expression is parsed once per request; nil for a one-off.
	Saved(ctx context.Context, s *model.Schedule, keys []cron.Key) error
	// Resumed is Saved for a schedule resumed after a pause that was due
	// to end at since (zero: resumed by hand before its resume time): the
	// fires missed since then follow its misfire policy.
	Resumed(ctx context.Context, s *model.Schedule, keys []cron.Key, since time.Time) error
	// Backfill records backfill fires of s at times (past instants that
	// have no fire yet).
	Backfill(ctx context.Context, s *model.Schedule, times []time.Time, o emitter.BackfillOptions) (emitter.BackfillStats, error)
	// The first fires of new schedules are planned with their write.
	create.Planner
}

// Tokens releases and extends the tokens of events on behalf of their
// consumers (the throttle).
type Tokens interface {
	// Release is the consumer's release of e: released is true only for the
	// one caller whose release took e's token (or finished it).
	Release(ctx context.Context, e *model.Event, now time.Time) (released bool, err error)
	// Extend keeps e's token until until and sets e.Status to the holding
	// status it found. model.ErrConflict when e no longer holds a token.
	Extend(ctx context.Context, e *model.Event, until, now time.Time) error
}

// Deps are the master's collaborators.
type Deps struct {
	// Store is required.
	Store Store
	// Emitter may be nil: then nothing is emitted on save and trigger
	// answers 503.
	Emitter Emitter
	// Tokens serves POST /v1/events/{id}/release and /extend. Required.
	Tokens Tokens
	// TokenOwners, if set, names the instance that owns an event's
	// tokens; releases and extends of events owned elsewhere are
	// forwarded there. Nil: every instance serves them itself (one
	// process, the embedded store).
	TokenOwners TokenOwners
	// Disk, if set, is asked before writes that add schedules or events
	// (the disk guard, shared with the emitter). Nil: no guard.
	Disk DiskGuard
	// Clock defaults to the real clock; tests pass a clockwork.FakeClock.
	Clock clockwork.Clock
	// Logger receives unexpected errors (5xx) and warnings.
	Logger zerolog.Logger
	// TracerProvider, if set, gives every request a span and new schedules
	// the trace context of the request that created them. Nil: no tracing.
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context of requests (traceparent);
	// defaults to W3C trace context and baggage.
	Propagator propagation.TextMapPropagator
}

// Server serves the REST API. It implements api.ServerInterface.
type Server struct {
	cfg     Config
	store   Store
	emitter Emitter
	creates *create.Service
	tokens  Tokens
	clock   clockwork.Clock
	log     zerolog.Logger
	guard   *netguard.Guard // the SSRF rule of target URLs
	records *idempotency.Records
	ids     *model.IDSource // ids of new objects
	usage   usageCache      // tenants' counts for the quotas
	disk    DiskGuard       // nil: no disk guard
	answers sync.Pool       // *[]byte: buffers of batch answers (writeBatchResult)

	echo    *echo.Echo
	routes  map[string]*route // "METHOD /echo/path"
	limiter *rateLimiter
	batches *semaphore.Weighted // bytes of batch bodies being handled (BatchBodyBudget)

	wrongTokens *failureLimiter // nil: off

	tracer     trace.Tracer // nil: tracing off
	propagator propagation.TextMapPropagator

	owners    TokenOwners  // nil: no forwarding
	forwarder *http.Client // forwards to owners
	forwards  atomic.Int64 // forwarded calls answered
}

var _ api.ServerInterface = (*Server)(nil)

func (s *Server) now() time.Time { return s.clock.Now() }

// New validates cfg and builds the server with its echo instance.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil {
		return nil, errors.New("master: Deps.Store is required")
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	if deps.Tokens == nil {
		return nil, errors.New("master: Deps.Tokens is required")
	}
	spec, err := api.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("master: load embedded spec: %w", err)
	}
	records, err := idempotency.New(deps.Store, idempotency.Options{
		Secret: cfg.IdempotencySecret, Previous: cfg.PreviousIdempotencySecrets,
		Wait: cfg.IdempotencyWait, Clock: deps.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	ids := &model.IDSource{}
	cd := create.Deps{
		Store: deps.Store, Records: records, IDs: ids, Clock: deps.Clock, Logger: deps.Logger,
		Partitions: cfg.Partitions, MaxChildren: cfg.MaxChildren,
	}
	if deps.Emitter != nil {
		cd.Planner = deps.Emitter
	}
	if deps.Disk != nil {
		cd.Disk = deps.Disk
	}
	creates, err := create.New(cd)
	if err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	s := &Server{
		cfg:     cfg,
		store:   deps.Store,
		emitter: deps.Emitter,
		creates: creates,
		tokens:  deps.Tokens,
		clock:   deps.Clock,
		log:     deps.Logger,
		guard:   netguard.New(cfg.TargetAllowCIDRs, cfg.TargetDenyCIDRs),
		records: records,
		disk:    deps.Disk,
		ids:     ids,
		owners:  deps.TokenOwners,
		batches: semaphore.NewWeighted(cfg.BatchBodyBudget),

		tracer:     tracing.Tracer(deps.TracerProvider),
		propagator: deps.Propagator,
	}
	if s.propagator == nil {
		s.propagator = tracing.Propagator()
	}
	if s.owners != nil {
		// Instance to instance: no proxy from the environment.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		s.forwarder = &http.Client{Timeout: forwardTimeout, Transport: tr}
	}
	if cfg.AdminKey == "" {
		s.log.Warn().Msg("master: no admin key configured; the /v1/tenants API answers 401")
	}
	if cfg.RateLimit.PerSecond > 0 {
		s.limiter = newRateLimiter(cfg.RateLimit, deps.Clock)
	}
	if cfg.WrongTokens.Max > 0 {
		s.wrongTokens = newFailureLimiter(cfg.WrongTokens, deps.Clock.Now)
	}
	s.routes = buildRoutes(spec)

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	if s.tracer != nil {
		e.Use(s.traceRequests)
	}
	e.Use(s.recoverPanics, s.limitBody, s.authenticate, s.rateLimit, s.limitWrongTokens, s.boundBatchBodies, s.validateRequest, s.recordAudit)
	api.RegisterHandlers(e, s)
	// Not an operation of the spec, so no authentication.
	e.GET("/openapi.yaml", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/yaml", schedulerd.OpenAPI) })
	s.echo = e
	return s, nil
}

// Echo returns the echo instance, so that the runtime can add routes such as
// /healthz or /metrics. Routes that are not in openapi.yaml bypass the API's
// authentication, rate limit and validation (the body limit still applies).
func (s *Server) Echo() *echo.Echo { return s.echo }

// Handler returns the API as an http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// route is one operation of the spec, found by echo's matched path.
type route struct {
	path      string // OpenAPI path template
	method    string
	pathItem  *openapi3.PathItem
	operation *openapi3.Operation
	spec      *openapi3.T
	public    bool            // security: [] (authorised by the release token)
	admin     bool            // tagged admin: admin key only
	anyCaller bool            // adminOrTenantOps: a tenant key or the admin key
	action    string          // the operationId as the spec writes it (audit records)
	query     map[string]bool // declared query parameters: whether one takes several values
	batch     bool            // createSchedulesBatch: own body limit, items validated by the handler
	create    bool            // createSchedule: the body may be decoded by the middleware
	body      bodySchema      // the JSON body's schema, compiled on first use
	pathOnly  bool            // every parameter is a plain path string (plainPathString)
	pathLen   map[string][2]int
}
