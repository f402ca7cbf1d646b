// Package handler fires events at their launch time and delivers them.
//
// A handler instance owns event queue shards by lease (Deps.Shards, a
// *lease.Balancer). For each owned shard it prefetches the events due within
// Horizon (EventClaimDue moves them to scheduled under the shard's lease
// fence) and keeps them in memory in a min-heap ordered by LaunchAt; one
// timer goroutine sleeps until the earliest launch, so events fire within
// milliseconds of their launch time without polling each one.
//
// At launch an unthrottled event goes straight to the delivery queues; an
// event of a throttling policy goes into the policy's bucket (Deps.Throttle,
// shared with the master), which hands it back on its Dispatched channel
// once it holds a token. The delivery queues are per tenant and, within a
// tenant, per schedule, served by weighted deficit round robin (tenant
// Weight), so that one tenant's backlog takes only its share of delivery
// while others have due events. Each delivery (up to MaxBatch events to one
// host) runs in its own goroutine, within MaxInFlight events in all and
// MaxPerHost per consumer host; a host that times out, refuses or answers
// 5xx has its limit halved and regains it by one per success, so a slow or
// broken consumer holds only its own slots. The outcomes are written in
// batched EventTransitions: released (or delivered, when the consumer keeps
// its token until it calls release), retrying with backoff, or dead.
//
// Delivery is at least once: a crash after a delivery and before its write
// leaves the event scheduled (or delivering) and it is delivered again by the
// shard's next owner (or after its token times out).
package handler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/gopool"
	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/internal/startstop"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/throttle"
)

// Store is what the handler needs from the store.
type Store interface {
	throttle.Store
	EventClaimDue(ctx context.Context, p *store.EventClaimParams) ([]*model.Event, error)
	EventDeleteFinishedBefore(ctx context.Context, t time.Time, limit int) (int, error)
	EventGetMany(ctx context.Context, ids []string) (map[string]*model.Event, error)
}

// Shards is this instance's share of the event queue shards.
// *lease.Balancer satisfies it.
type Shards interface {
	throttle.Shards
	Changed() <-chan struct{}
	// Refence takes shard again under a new fence, so that the events a
	// lost claim left under the old one are claimable again.
	Refence(shard int)
}

// Deliverer sends events to their consumers (delivery/httpdelivery,
// delivery/sqsdelivery). It returns one Result per event, in order.
type Deliverer interface {
	Deliver(ctx context.Context, events []*model.Event) []delivery.Result
}

// Metrics receives the handler's counters; NopMetrics discards them.
type Metrics interface {
	throttle.Metrics
	// Delivered counts successful delivery attempts.
	Delivered(n int)
	// Lateness observes the delay the scheduler added to a delivery: its
	// start minus the moment the event may go (its launch time or, if
	// throttled, the later moment it was granted its token), at least 0.
	Lateness(d time.Duration)
	// TokenWait observes, per throttled delivery, how long the event
	// waited for its token after its launch time (the policy's delay).
	TokenWait(d time.Duration)
	// TokensRenewed counts tokens renewed before a late send.
	TokensRenewed(n int)
	// OldestWaiting reports, every WaitingAgeInterval, the age (now minus
	// LaunchAt) of the oldest due event this instance holds and has not
	// sent yet, per policy and priority class; keys missing from ages have
	// nothing waiting.
	OldestWaiting(ages map[WaitingKey]time.Duration)
	// DeliveryFailed counts failed delivery attempts (retried, dead, or
	// whose outcome write lost) by reason.
	DeliveryFailed(reason delivery.Reason, n int)
}

// NopMetrics discards everything.
type NopMetrics struct{ throttle.NopMetrics }

func (NopMetrics) Delivered(int)                              {}
func (NopMetrics) Lateness(time.Duration)                     {}
func (NopMetrics) TokenWait(time.Duration)                    {}
func (NopMetrics) TokensRenewed(int)                          {}
func (NopMetrics) OldestWaiting(map[WaitingKey]time.Duration) {}
func (NopMetrics) DeliveryFailed(delivery.Reason, int)        {}

// Hooks are optional callbacks for tests and instrumentation. They must not
// block for long.
type Hooks struct {
	// Claimed, if set, is called after each claim with the number of
	// events it took and Held right after they were added.
	Claimed func(n, held int)
	// Attempted is called after the outcome of a delivery attempt was
	// written: e is the event as delivered, status the status it moved to
	// (released also for a delivery recorded on an event that its consumer
	// released, or a cancel finished, before the outcome's write), or "" if
	// the write lost to a concurrent change (a token timeout, a newer owner
	// of the shard).
	Attempted func(e *model.Event, r delivery.Result, status model.EventStatus)
}

// Config configures a Handler. Zero values take the defaults.
type Config struct {
	// Shards is the number of event queue shards K; it must equal the
	// emitter's and the lease group's. Default 16.
	Shards int
	// Horizon is how far ahead events are claimed and kept in memory.
	// Default 30s.
	Horizon time.Duration
	// PrefetchInterval is how often owned shards are scanned for events due
	// within Horizon (and lease changes picked up). Default 1s.
	PrefetchInterval time.Duration
	// MaxBatch is the most events per delivery batch and per batched
	// write. Default 500.
	MaxBatch int
	// ClaimBatch is the most events one claim takes from one shard; the
	// owned shards are claimed concurrently. Default 4*MaxBatch.
	ClaimBatch int
	// Workers is the number of outcome writers. Default 4.
	Workers int
	// OutcomeLinger is how long the outcome of an unthrottled delivery may
	// wait to share its store write with later ones (when fewer than
	// MaxBatch are queued): events launched one at a time then cost a
	// fraction of a commit each. While due events wait for a delivery
	// slot (a burst), these outcomes wait for them to go, full writes
	// too, up to ten lingers: their commits would take the cores the
	// sending needs. Outcomes of throttled events are written at once
	// (their tokens wait for them). Negative: no wait. Default 100ms:
	// about ten commits a second however fast events launch one by one.
	// The price is at crash time: the unthrottled events delivered in the
	// last linger (ten during a burst) plus one write before a crash have
	// no outcome written and are delivered again by the shard's next
	// owner.
	OutcomeLinger time.Duration
	// LaunchGap is the least time between two wakes of the timer for
	// events that are not due yet: an event due within LaunchGap of the
	// previous wake waits for the end of the gap and goes with the others
	// due by then. Events launched at distinct instants close together (a
	// fire spread over its window) then go a few at a time, one wake-up
	// and delivery goroutine for several, at most LaunchGap
	// late; an event due after the gap (a lone one-off) goes at its
	// launch instant. Never early. Negative: a wake per launch instant.
	// Default 4ms.
	LaunchGap time.Duration
	// QueueSize is unused: due events wait in the per-tenant delivery
	// queues, bounded with the timer heap by MaxScheduled.
	QueueSize int
	// MaxInFlight caps the events being delivered at once, over all hosts.
	// Default MaxBatch*Workers.
	MaxInFlight int
	// MaxPerHost caps the events being delivered at once to one consumer
	// host (target type and URL host); it is the most the AIMD limit of a
	// host recovers to. Keep it at most the HTTP deliverer's
	// MaxConnsPerHost. Default 64 (httpdelivery's default). An http_batch
	// host counts deliveries instead (up to MaxBatch events each, sent in
	// few requests), so up to MaxPerHost×MaxBatch of its events may be out.
	MaxPerHost int
	// TenantWeight is the weight of a tenant that sets none, or that
	// Deps.Tenants cannot read; it should equal the master's. Default 1.
	TenantWeight int
	// WeightTTL is how long a tenant's weight and targets are cached.
	// Default 30s.
	WeightTTL time.Duration
	// MaxScheduled caps the claimed events held in memory: the timer heap,
	// the throttle's waiting queues and the events on their way from it,
	// the delivery queues, the deliveries in flight and the outcomes not
	// yet written (Held). A claim pass takes at most the room left, and at
	// most a quarter of MaxScheduled (the next pass follows), split over
	// the owned shards and shared by the store over the due events'
	// tenants, policies and priorities; the rest stays in the store until
	// delivery makes room (the claim runs again as soon as it does). A
	// policy whose waiting events reach its window (window) has its due
	// events left in the store meanwhile. Default DefaultMaxScheduled.
	MaxScheduled int
	// Retention is how long released and cancelled events are kept.
	// Default 24h.
	Retention time.Duration
	// RetentionInterval is how often the retention job runs. Default 1m.
	RetentionInterval time.Duration
	// IdempotencyRetention is how long the master's idempotency records
	// (Deps.Idempotency) are kept: a retry with the same Idempotency-Key
	// within it replays the first answer. Default 24h.
	IdempotencyRetention time.Duration
	// AuditRetention is how long the audit records (Deps.Audit) are kept.
	// Default 90 days.
	AuditRetention time.Duration
	// ReclaimInterval is how often timed-out tokens are reclaimed.
	// Default 2s.
	ReclaimInterval time.Duration
	// DefaultMaxAttempts applies to events whose MaxAttempts is zero; it
	// should equal the throttle's. Default model.DefaultMaxAttempts.
	DefaultMaxAttempts int
	// Backoff returns the delay before the next attempt after `attempts`
	// failed ones. Default DefaultBackoff (attempts^4 + 5 s, plus up to 10%
	// jitter).
	Backoff func(attempts int) time.Duration
	// MaxRetryAfter caps a consumer's Retry-After. Default 1h.
	MaxRetryAfter time.Duration
	// TakeoverGrace: an unthrottled event taken over from the shard's
	// previous owner after its launch time may have been delivered by that
	// owner just before it died. It waits this long and is sent only if the
	// store still has it scheduled: its consumer's release, which
	// acknowledges receipt, has finished it meanwhile. So does a throttled
	// one when the throttle sends early (Throttle.SendsEarly): its previous
	// owner may have sent it and died before writing its start, and it
	// takes no token while it waits. Default 2s.
	TakeoverGrace time.Duration
	// TokenRenewAfter: a throttled event that waited longer than this
	// between taking its token and its send (a slow store write, a full
	// ready queue) has its token renewed first, in one more write, so that
	// its consumer gets (nearly) the policy's whole tokenTimeout and is
	// never sent an event whose token may have been reclaimed. Zero: a
	// tenth of the policy's tokenTimeout, at least 1s (a renewal is a write
	// more, and a backlog makes many events wait).
	TokenRenewAfter time.Duration
	// WaitingAgeInterval is how often the age of the oldest waiting event
	// is reported (Metrics.OldestWaiting). Default 10s.
	WaitingAgeInterval time.Duration
	// Owner names this instance in logs.
	Owner string
	// DrainTimeout bounds how long Stop lets in-flight deliveries and their
	// outcome writes finish before it cancels them. Default 10s.
	DrainTimeout time.Duration
}

func (c *Config) validate() error {
	c.Horizon = cmp.Or(c.Horizon, 30*time.Second)
	c.PrefetchInterval = cmp.Or(c.PrefetchInterval, time.Second)
	c.Retention = cmp.Or(c.Retention, 24*time.Hour)
	c.RetentionInterval = cmp.Or(c.RetentionInterval, time.Minute)
	c.IdempotencyRetention = cmp.Or(c.IdempotencyRetention, 24*time.Hour)
	c.AuditRetention = cmp.Or(c.AuditRetention, 90*24*time.Hour)
	c.ReclaimInterval = cmp.Or(c.ReclaimInterval, 2*time.Second)
	c.MaxRetryAfter = cmp.Or(c.MaxRetryAfter, time.Hour)
	c.TakeoverGrace = cmp.Or(c.TakeoverGrace, 2*time.Second)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, 10*time.Second)
	c.WaitingAgeInterval = cmp.Or(c.WaitingAgeInterval, 10*time.Second)
	c.OutcomeLinger = cmp.Or(c.OutcomeLinger, 100*time.Millisecond)
	c.LaunchGap = cmp.Or(c.LaunchGap, 4*time.Millisecond)
	c.Shards = cmp.Or(c.Shards, 16)
	c.MaxBatch = cmp.Or(c.MaxBatch, 500)
	c.Workers = cmp.Or(c.Workers, 4)
	c.MaxScheduled = cmp.Or(c.MaxScheduled, DefaultMaxScheduled)
	c.DefaultMaxAttempts = cmp.Or(c.DefaultMaxAttempts, model.DefaultMaxAttempts)
	if c.MaxBatch > 0 {
		c.ClaimBatch = cmp.Or(c.ClaimBatch, 4*c.MaxBatch)
	}
	c.QueueSize = cmp.Or(c.QueueSize, 2*c.MaxBatch*c.Workers)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, c.MaxBatch*c.Workers)
	c.MaxPerHost = cmp.Or(c.MaxPerHost, 64)
	c.TenantWeight = cmp.Or(c.TenantWeight, 1)
	c.WeightTTL = cmp.Or(c.WeightTTL, 30*time.Second)
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	var errs []error
	for _, d := range []struct {
		v    time.Duration
		name string
	}{
		{c.Horizon, "Horizon"}, {c.PrefetchInterval, "PrefetchInterval"}, {c.Retention, "Retention"},
		{c.RetentionInterval, "RetentionInterval"}, {c.IdempotencyRetention, "IdempotencyRetention"}, {c.AuditRetention, "AuditRetention"}, {c.ReclaimInterval, "ReclaimInterval"},
		{c.MaxRetryAfter, "MaxRetryAfter"}, {c.TakeoverGrace, "TakeoverGrace"}, {c.DrainTimeout, "DrainTimeout"},
		{c.WaitingAgeInterval, "WaitingAgeInterval"}, {c.WeightTTL, "WeightTTL"},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("handler config: %s must be positive, got %s", d.name, d.v))
		}
	}
	for _, n := range []struct {
		v    int
		name string
	}{
		{c.Shards, "Shards"}, {c.MaxBatch, "MaxBatch"}, {c.Workers, "Workers"},
		{c.MaxScheduled, "MaxScheduled"}, {c.DefaultMaxAttempts, "DefaultMaxAttempts"},
		{c.ClaimBatch, "ClaimBatch"}, {c.QueueSize, "QueueSize"},
		{c.MaxInFlight, "MaxInFlight"}, {c.MaxPerHost, "MaxPerHost"}, {c.TenantWeight, "TenantWeight"},
	} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("handler config: %s must be positive, got %d", n.name, n.v))
		}
	}
	if c.PrefetchInterval > c.Horizon {
		errs = append(errs, fmt.Errorf("handler config: PrefetchInterval (%s) must not exceed Horizon (%s)", c.PrefetchInterval, c.Horizon))
	}
	if c.TokenRenewAfter < 0 {
		errs = append(errs, fmt.Errorf("handler config: TokenRenewAfter must not be negative, got %s", c.TokenRenewAfter))
	}
	return errors.Join(errs...)
}

// DefaultMaxScheduled is the default bound on claimed events in memory
// (Config.MaxScheduled): enough to keep the deliveries of a burst busy
// while the next claims are written (docs/benchmarks.md, memory), a few
// tens of megabytes of events.
const DefaultMaxScheduled = 20_000

// DefaultBackoff is Delayed::Job's: attempts^4 + 5 seconds, plus up to 10%
// random jitter so that events that failed together do not retry together.
func DefaultBackoff(attempts int) time.Duration {
	a := int64(min(max(attempts, 0), 200))
	base := time.Duration(a*a*a*a+5) * time.Second
	return base + time.Duration(rand.Int64N(int64(base/10)+1))
}

// Throttle is the policy buckets (*throttle.Throttle): the handler enqueues
// due throttled events and delivers those that come out of Dispatched.
type Throttle interface {
	Enqueue(items ...throttle.Item)
	Dispatched() <-chan throttle.Item
	HandBack(ctx context.Context, items []throttle.Item)
	ReturnTokens(ctx context.Context, policyID string, n int) error
	TokenTimeout(p *model.Policy) time.Duration
	Delivered(ids ...string)
	OutcomeWritten(ids ...string)
	// SendsEarly reports whether an event may be sent before the write
	// that starts it (throttle.Config.EarlyDispatch): a throttled event
	// taken over from a previous owner may then have been sent by it.
	SendsEarly() bool
	Reclaim(ctx context.Context) error
	SyncShards(held map[int]int64)
	MarkSettled(shard int, fence int64)
	// Holding counts the events waiting in the buckets and those that
	// took a token and are not Forwarded yet.
	Holding() int
	// Forwarded tells the throttle that items taken from Dispatched are
	// in the delivery queues.
	Forwarded(items []throttle.Item)
	WaitingByPolicy() map[string]throttle.PolicyWaiting
	OldestWaiting() map[string]map[int]time.Time
	// Observe is the adaptive limit's input: the outcome of a delivery of
	// a throttled event of policyID (see throttle/adaptive.go).
	Observe(policyID string, o throttle.Outcome, latency time.Duration)
	// ObserveHold reports how long a token was held, delivery to release.
	ObserveHold(policyID string, held time.Duration)
	// ObserveBacklog is its input for the backlog of an adaptive policy's
	// SQS queue; false if it keeps no limit for the policy.
	ObserveBacklog(policyID string, prev, cur int) bool
}

var _ Throttle = (*throttle.Throttle)(nil)

// Tenants reads a tenant for its delivery weight; the store satisfies it.
type Tenants interface {
	TenantGet(ctx context.Context, id string) (*model.Tenant, error)
}

// Deps are the handler's collaborators.
type Deps struct {
	Store  Store
	Shards Shards
	// Throttle holds the buckets of throttled events. Required; its
	// lifecycle is its owner's (Start it before and Stop it after the
	// handler).
	Throttle Throttle
	// Tenants, if set, gives the tenants' weights and delivery targets
	// (cached for WeightTTL): each delivery carries its tenant's target rule
	// (netguard.WithTargetRule) for the deliverers to check. Without it
	// every tenant has Config.TenantWeight and no rule.
	Tenants Tenants
	// Deliverers route events by Target.Type.
	Deliverers map[model.TargetType]Deliverer
	// Backlogs, if set (the SQS deliverer), reads the queues of adaptive
	// SQS policies for their limits. Nil: the limits learn from delivery
	// outcomes only.
	Backlogs BacklogReader
	// Idempotency, if set, has its old records deleted by the retention
	// job (PurgeIdempotency).
	Idempotency IdempotencyStore
	// Audit, if set, has its old records deleted by the retention job
	// (PurgeAudit).
	Audit AuditStore
	// Clock defaults to the real clock; tests pass a clockwork.FakeClock.
	Clock   clockwork.Clock
	Logger  zerolog.Logger
	Metrics Metrics
	Hooks   Hooks
	// TracerProvider, if set, gives each delivery attempt a span, whose
	// trace context the deliverers send on. Nil: no tracing.
	TracerProvider trace.TracerProvider
}

// Handler fires and delivers the events of the shards this instance owns.
type Handler struct {
	startstop.Base
	cfg  Config
	deps Deps
	log  zerolog.Logger
	thr  Throttle

	mu    sync.Mutex
	heap  itemHeap
	wakeT chan struct{} // the heap's head changed
	// launching counts the events the timer took from the heap and is
	// handing on (Held counts them until they are in a queue).
	launching int
	// sent counts the events taken from the delivery queues whose
	// outcomes are not written yet.
	sent  int
	wakeP chan struct{} // room for claims was made while claims waited for it
	full  atomic.Bool   // the last claim pass stopped at MaxScheduled
	peak  atomic.Int64  // the most events Held after a claim
	// skipped are the policies the last claim pass left in the store
	// because their waiting events reached skipWindow.
	skippedMu  sync.Mutex
	skipped    []string
	skipWindow int

	owned atomic.Pointer[map[int]int64]
	queue *fairQueue    // due events waiting for a delivery slot
	wakeD chan struct{} // a delivery ended with events waiting
	// dispatchMu lets one goroutine at a time take batches and count
	// their slots (startDeliveries).
	dispatchMu sync.Mutex
	deliveries sync.WaitGroup
	workers    *gopool.Pool // runs the deliveries
	hosts      *hostLimits
	inFlight   atomic.Int64 // events being delivered
	tenants    *tenantCache
	outcomes   *outbox         // delivered batches waiting to be written
	stopCh     <-chan struct{} // Stopping, read once at Start
	workCtx    context.Context // deliveries; cancelled once Stop's drain ends

	lifeMu sync.Mutex
	ran    bool // a handler's queues are not reused: Start once
	sched  gocron.Scheduler

	failures failureLog
	backlogs backlogs // SQS queues of adaptive policies (adaptive.go)
}

// Item is an event on its way to delivery (throttle.Item).
type Item = throttle.Item

// New validates cfg and deps and returns a Handler; Start runs it.
func New(cfg Config, deps Deps) (*Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil {
		return nil, errors.New("handler deps: Store is required")
	}
	if deps.Shards == nil {
		return nil, errors.New("handler deps: Shards is required")
	}
	if deps.Throttle == nil {
		return nil, errors.New("handler deps: Throttle is required")
	}
	if len(deps.Deliverers) == 0 {
		return nil, errors.New("handler deps: Deliverers must name at least one target type")
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	if deps.Metrics == nil {
		deps.Metrics = NopMetrics{}
	}
	h := &Handler{
		cfg: cfg, deps: deps, thr: deps.Throttle,
		log:     deps.Logger.With().Str(logkey.Component, "handler").Logger(),
		wakeT:   make(chan struct{}, 1),
		wakeP:   make(chan struct{}, 1),
		queue:   newFairQueue(),
		wakeD:   make(chan struct{}, 1),
		workers: gopool.New(gopool.DefaultIdle),
		hosts:   newHostLimits(cfg.MaxPerHost, cfg.MaxBatch),
		// Outcomes hold back deliveries once the writers fall this far
		// behind, so memory stays bounded when the store is slow.
	}
	h.outcomes = newOutbox(64*cfg.Workers*cfg.MaxBatch, cfg.OutcomeLinger, func() bool { return h.queue.Len() > 0 })
	h.tenants = &tenantCache{src: deps.Tenants, def: cfg.TenantWeight, ttl: cfg.WeightTTL,
		now: deps.Clock.Now, m: map[string]*tenantEntry{},
		spawn: func(f func(context.Context)) {
			h.Go(func() {
				ctx, cancel := context.WithTimeout(h.workCtx, 5*time.Second)
				defer cancel()
				f(ctx)
			})
		}}
	empty := map[int]int64{}
	h.owned.Store(&empty)
	return h, nil
}

// Config returns the validated configuration.
func (h *Handler) Config() Config { return h.cfg }

// Start starts the timer, the prefetch loop, the delivery dispatcher and the
// periodic jobs (token reclaim, retention). It returns at once. The
// throttle must run (its Start) for throttled events to go out.
func (h *Handler) Start(ctx context.Context) error {
	h.lifeMu.Lock()
	defer h.lifeMu.Unlock()
	if h.ran {
		select {
		case <-h.stopCh:
			return errors.New("handler: Start after Stop")
		default:
			return nil
		}
	}
	run, ok := h.StartInit(ctx, h.cfg.DrainTimeout)
	if !ok {
		return nil
	}
	h.ran = true
	h.workCtx, h.stopCh = run, h.Stopping()
	s, err := gocron.NewScheduler(gocron.WithClock(h.deps.Clock))
	if err != nil {
		h.Base.Stop(nil)
		return fmt.Errorf("handler scheduler: %w", err)
	}
	jobs := []struct {
		every time.Duration
		name  string
		run   func(context.Context) error
	}{
		{h.cfg.ReclaimInterval, "reclaim", h.Reclaim},
		{h.cfg.RetentionInterval, "retention", func(ctx context.Context) error { _, err := h.Purge(ctx); return err }},
		{h.cfg.RetentionInterval, "idempotency retention", func(ctx context.Context) error { _, err := h.PurgeIdempotency(ctx); return err }},
		{h.cfg.RetentionInterval, "audit retention", func(ctx context.Context) error { _, err := h.PurgeAudit(ctx); return err }},
		{h.cfg.WaitingAgeInterval, "waiting-age", func(context.Context) error { h.ReportWaiting(); return nil }},
		{backlogInterval, "sqs backlog", h.pollBacklogs},
	}
	for _, j := range jobs {
		_, err := s.NewJob(gocron.DurationJob(j.every), gocron.NewTask(func() {
			if err := j.run(h.workCtx); err != nil && h.workCtx.Err() == nil {
				h.log.Warn().Err(err).Str("job", j.name).Msg("periodic job failed")
			}
		}), gocron.WithSingletonMode(gocron.LimitModeReschedule), gocron.WithName(j.name))
		if err != nil {
			h.Base.Stop(nil)
			return fmt.Errorf("handler %s job: %w", j.name, err)
		}
	}
	h.Go(h.run)
	s.Start()
	h.sched = s
	h.Started()
	return nil
}

// run runs the loops, workers and writers and, once the handler stops,
// lets them finish in order: no new work, then the deliveries in flight,
// then their outcome writes; events that hold a token and were not sent go
// back (to pending, token returned).
func (h *Handler) run() {
	var loops, writers sync.WaitGroup
	for range h.cfg.Workers {
		writers.Go(h.writer)
	}
	loops.Go(h.timerLoop)
	loops.Go(h.prefetchLoop)
	loops.Go(h.forward)
	loops.Go(h.dispatch)
	<-h.stopCh
	loops.Wait()
	h.deliveries.Wait()
	h.outcomes.close() // writers finish what was delivered, then exit
	writers.Wait()
	var back []Item
	for _, it := range h.queue.drain() {
		if it.Policy != nil {
			back = append(back, it)
		}
	}
	h.thr.HandBack(context.WithoutCancel(h.workCtx), back)
}

// Stop stops taking new work and lets in-flight deliveries finish until
// Config.DrainTimeout (then they are cancelled). Events waiting in memory
// are left as scheduled in the store: the shard's next owner claims them
// again, because its lease fence is newer; events that already hold a token
// but were not sent yet are handed back. Stopping the throttle and
// releasing the shard leases are the runtime's job, after Stop. Safe to
// call twice or before Start.
func (h *Handler) Stop() {
	h.Base.Stop(func() {
		h.lifeMu.Lock()
		s := h.sched
		h.lifeMu.Unlock()
		if s != nil {
			_ = s.Shutdown()
		}
	})
}

// Reclaim takes back timed-out tokens of the owned policies (see
// throttle.Throttle.Reclaim). It runs every ReclaimInterval.
func (h *Handler) Reclaim(ctx context.Context) error { return h.thr.Reclaim(ctx) }

// Purge deletes released and cancelled events that finished more than
// Retention ago. Only the owner of shard 0 does the work, so that instances
// do not repeat each other's deletes. It runs every RetentionInterval.
func (h *Handler) Purge(ctx context.Context) (int, error) {
	return h.purgeBefore(ctx, h.cfg.Retention, "finished events", h.deps.Store.EventDeleteFinishedBefore)
}

// purgeBefore deletes, on the owner of shard 0, what del finds older than
// retention, a thousand at a time.
func (h *Handler) purgeBefore(ctx context.Context, retention time.Duration, what string, del func(ctx context.Context, before time.Time, limit int) (int, error)) (int, error) {
	if _, ok := h.deps.Shards.Held()[0]; !ok {
		return 0, nil
	}
	before := h.deps.Clock.Now().Add(-retention)
	total := 0
	for range 1000 {
		n, err := del(ctx, before, 1000)
		total += n
		if err != nil {
			return total, err
		}
		if n < 1000 {
			break
		}
	}
	if total > 0 {
		h.log.Info().Int("deleted", total).Time("before", before).Msg("deleted " + what + " past retention")
	}
	return total, nil
}
