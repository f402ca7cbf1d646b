// Package emitter is the Schedule Event Emitter of the Druva design: it runs
// ahead of time, scans the children that are due in the next window and
// writes n events per fire into the K event queue shards.
//
// # Passes and windows
//
// Children are divided into P partitions (model.PartitionOf); instances hold
// partitions by lease (lease.Balancer). A pass works on every held partition:
// starting at the partition's watermark (the end of the last finished window)
// it scans the windows [w0, w0+Window) with w0 < now+Lead. For each timezone
// that has children it asks the cron engine which (LaunchExpression, minute)
// keys are eligible in the window (cron.AppendEligible) and reads only the
// children with those keys (store ChildrenFind), so the cost of a window
// follows the number of due children, never the number of schedules
// (docs/design.md invariant 4). After a window the watermark is advanced under the
// partition's fence; a conflict means the lease was lost and the partition is
// left alone.
//
// # Idempotence
//
// Fire and event ids are deterministic (model.FireID, model.EventID) and the
// store writes are insert-if-absent, so a window scanned twice (a crash
// before the watermark moved, two instances briefly holding one partition, a
// save racing a pass) records each fire and each event once (invariant 2).
// A fire that exists already is not decided again: its recorded decision is
// kept, and its events are re-inserted idempotently unless the decision says
// it has none (a crash may have interrupted the first attempt).
//
// # Misfires
//
// A window whose end is not after now when it is scanned was missed (the
// service was down). Its fires follow the schedule's misfire policy:
// fire_once (default) fires only the latest missed fire of each schedule,
// fire_all fires them all, skip fires none; fires older than now-CatchUpLimit
// never fire, and if the watermark is older than that the windows before it
// are skipped in one jump, never scanned one by one. Every skipped or late
// fire is logged at info level and counted.
//
// # Overlap
//
// When a fire comes while the previous fire of the same schedule still has
// unfinished events, the schedule's overlap policy applies: allow (default)
// does nothing, skip records the new fire as skipped_overlap with no events,
// cancel cancels the previous fire's waiting events and records it as
// cancelled_by_next. The decision is recorded on the fire.
//
// # Quotas and the disk guard
//
// A fire that would take its tenant over maxEventsPerMinute, or that comes
// while the disk guard trips, is recorded at once and its events are
// written by the background workers in later minutes, in order; its note
// says why (quota.go).
package emitter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/internal/startstop"
	"github.com/schedulerd/schedulerd/internal/tracing"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Store is what the emitter needs from the storage contract (store.Driver
// satisfies it).
type Store interface {
	// ChildTimezones lists the timezones that have children.
	ChildTimezones(ctx context.Context) ([]string, error)
	// ChildrenFind reads the children of eligible keys of one partition and
	// timezone.
	ChildrenFind(ctx context.Context, p *store.ChildrenFindParams) ([]model.Child, error)
	// ChildrenDeleteOrphans is the periodic clean-up.
	ChildrenDeleteOrphans(ctx context.Context) (int, error)
	// ScheduleGetMany loads the schedules of due children.
	ScheduleGetMany(ctx context.Context, ids []string) ([]*model.Schedule, error)
	// ScheduleIntervalDue and ScheduleIntervalAdvance are the index of
	// interval schedules' next fires.
	ScheduleIntervalDue(ctx context.Context, p *store.ScheduleIntervalDueParams) ([]*model.Schedule, error)
	ScheduleIntervalAdvance(ctx context.Context, p *store.ScheduleIntervalAdvanceParams) error
	// WatermarkGet and WatermarkAdvance keep the per-partition progress.
	WatermarkGet(ctx context.Context, partition int) (model.Watermark, error)
	WatermarkAdvance(ctx context.Context, w model.Watermark) error
	// FireInsert records a fire unless it exists.
	FireInsert(ctx context.Context, f *model.Fire) (inserted bool, err error)
	// FireInsertMany records new fires with their events in one write.
	FireInsertMany(ctx context.Context, fs []store.FireNew) (inserted []bool, events int, err error)
	// FireGet reads back a fire that existed already.
	FireGet(ctx context.Context, tenantID, id string) (*model.Fire, error)
	// FireList pages a schedule's fires (a backfill leaves out the
	// instants that have one).
	FireList(ctx context.Context, p *store.FireListParams) ([]*model.Fire, error)
	// FireLatestBefore finds the previous fire (overlap, other versions).
	FireLatestBefore(ctx context.Context, scheduleID string, t time.Time) (*model.Fire, error)
	// FireSetDecision marks a previous fire cancelled_by_next.
	FireSetDecision(ctx context.Context, id string, d model.FireDecision, note string) error
	// FireSetRemaining and FireListEmitting keep and find the progress of
	// background emissions.
	FireSetRemaining(ctx context.Context, id string, remaining int) error
	FireListEmitting(ctx context.Context, limit int) ([]*model.Fire, error)
	// EventInsertMany writes events idempotently.
	EventInsertMany(ctx context.Context, events []*model.Event) (inserted int, err error)
	// CalendarGet reads a calendar that a due fire's schedule names.
	CalendarGet(ctx context.Context, tenantID, id string) (*model.Calendar, error)
	// EventCountByFire tells whether a previous fire has drained.
	EventCountByFire(ctx context.Context, fireID string) (store.EventCounts, error)
	// EventCancelPending cancels what is left of a previous fire.
	EventCancelPending(ctx context.Context, scheduleID, fireID string, at time.Time) (int, error)
	// ScheduleComplete and ScheduleDeleteCompleted complete the schedules
	// that fire no more and delete them after CompletedRetention.
	ScheduleComplete(ctx context.Context, p *store.ScheduleCompleteParams) (store.ScheduleCompleteResult, error)
	ScheduleDeleteCompleted(ctx context.Context, p *store.ScheduleDeleteCompletedParams) (int, error)
}

var _ Store = store.Driver(nil)

// Partitions tells which emitter partitions this instance holds and under
// which fence. *lease.Balancer satisfies it.
type Partitions interface {
	Held() map[int]int64
	// Changed is signalled whenever the held set changes, so that a started
	// emitter runs a pass at once and catches up a partition taken over from
	// a dead instance. Nil: the set never changes.
	Changed() <-chan struct{}
}

// AllPartitions holds every partition 0..P-1 with fence 0: the single-process
// setup with no lease group (and tests and benchmarks).
type AllPartitions int

// Held returns every partition with fence 0.
func (p AllPartitions) Held() map[int]int64 {
	out := make(map[int]int64, int(p))
	for i := range int(p) {
		out[i] = 0
	}
	return out
}

// Changed returns nil: the set never changes.
func (AllPartitions) Changed() <-chan struct{} { return nil }

// Config configures an Emitter. Zero fields take their defaults.
type Config struct {
	// Partitions is P, the number of child partitions. It must equal the
	// number the master uses for model.PartitionOf. Default 16.
	Partitions int
	// Shards is K, the number of event queue shards. Default 16.
	Shards int
	// Window is the length of one scan window. Default 1m.
	Window time.Duration
	// Lead is how far ahead of now windows are scanned: a pass scans every
	// window that starts before now+Lead. Default 2m.
	Lead time.Duration
	// CatchUpLimit is how old a missed fire may be and still fire after
	// downtime. Default 1h.
	CatchUpLimit time.Duration
	// BatchSize is the number of events per store write and of schedules
	// per ScheduleGetMany. Default 1000.
	BatchSize int
	// Workers is the number of fires emitted concurrently within a window
	// of one partition (partitions run concurrently too). Store writes are
	// mostly waiting: concurrency lets the embedded store share commits and
	// MongoDB round trips overlap. Default 32.
	Workers int
	// BackgroundThreshold: a fire with more events than this is recorded at
	// once and its events are written in the background (resumably, see
	// background.go), so that no request and no pass waits for it. Default
	// 10000.
	BackgroundThreshold int
	// BackgroundChunk is the number of events of a background emission per
	// store write; its progress is recorded after each. Default 5000.
	BackgroundChunk int
	// BackgroundWorkers is the number of fires emitted in the background at
	// once by this instance. Default 2.
	BackgroundWorkers int
	// CleanupInterval is how often orphan children are deleted and
	// schedules completed (Complete). Default 5m.
	CleanupInterval time.Duration
	// CompletedRetention is how long a completed schedule is kept before
	// Complete deletes it. Default 24h.
	CompletedRetention time.Duration
	// DrainTimeout bounds Stop: a pass in progress may finish until then and
	// is cancelled after it (passes are idempotent). Default 5s.
	DrainTimeout time.Duration
	// Owner names this instance. Required; it is not added to log lines:
	// the Logger in Deps carries it (logkey.Instance), once for every
	// component.
	Owner string
}

func (c *Config) setDefaults() {
	c.Partitions = cmp.Or(c.Partitions, 16)
	c.Shards = cmp.Or(c.Shards, 16)
	c.Window = cmp.Or(c.Window, time.Minute)
	c.Lead = cmp.Or(c.Lead, 2*time.Minute)
	c.CatchUpLimit = cmp.Or(c.CatchUpLimit, time.Hour)
	c.BatchSize = cmp.Or(c.BatchSize, 1000)
	c.Workers = cmp.Or(c.Workers, 32)
	c.BackgroundThreshold = cmp.Or(c.BackgroundThreshold, 10000)
	c.BackgroundChunk = cmp.Or(c.BackgroundChunk, 5000)
	c.BackgroundWorkers = cmp.Or(c.BackgroundWorkers, 2)
	c.CleanupInterval = cmp.Or(c.CleanupInterval, 5*time.Minute)
	c.CompletedRetention = cmp.Or(c.CompletedRetention, 24*time.Hour)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, 5*time.Second)
}

// validate checks c after setDefaults; the error names the field.
func (c *Config) validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > 65536:
		return fmt.Errorf("emitter config: Partitions must be 1..65536, got %d", c.Partitions)
	case c.Shards < 1 || c.Shards > 65536:
		return fmt.Errorf("emitter config: Shards must be 1..65536, got %d", c.Shards)
	case c.Window < time.Second || c.Window > 24*time.Hour || c.Window%time.Second != 0:
		return fmt.Errorf("emitter config: Window must be whole seconds between 1s and 24h, got %s", c.Window)
	case c.Lead < 0:
		return fmt.Errorf("emitter config: Lead must not be negative, got %s", c.Lead)
	case c.CatchUpLimit < c.Window:
		return fmt.Errorf("emitter config: CatchUpLimit must be at least Window (%s), got %s", c.Window, c.CatchUpLimit)
	case c.BatchSize < 1 || c.BatchSize > 100000:
		return fmt.Errorf("emitter config: BatchSize must be 1..100000, got %d", c.BatchSize)
	case c.Workers < 1 || c.Workers > 256:
		return fmt.Errorf("emitter config: Workers must be 1..256, got %d", c.Workers)
	case c.BackgroundThreshold < 1:
		return fmt.Errorf("emitter config: BackgroundThreshold must be at least 1, got %d", c.BackgroundThreshold)
	case c.BackgroundChunk < 1 || c.BackgroundChunk > 100000:
		return fmt.Errorf("emitter config: BackgroundChunk must be 1..100000, got %d", c.BackgroundChunk)
	case c.BackgroundWorkers < 1 || c.BackgroundWorkers > 64:
		return fmt.Errorf("emitter config: BackgroundWorkers must be 1..64, got %d", c.BackgroundWorkers)
	case c.CleanupInterval < time.Second:
		return fmt.Errorf("emitter config: CleanupInterval must be at least 1s, got %s", c.CleanupInterval)
	case c.CompletedRetention < 0:
		return fmt.Errorf("emitter config: CompletedRetention must not be negative, got %s", c.CompletedRetention)
	case c.DrainTimeout < 0:
		return fmt.Errorf("emitter config: DrainTimeout must not be negative, got %s", c.DrainTimeout)
	case c.Owner == "":
		return errors.New("emitter config: Owner must be set")
	}
	return nil
}

// Deps are the emitter's collaborators.
type Deps struct {
	// Store is required.
	Store Store
	// Partitions says which partitions this instance works on. Nil means all
	// of them (AllPartitions(cfg.Partitions)).
	Partitions Partitions
	// Clock defaults to the real clock; tests pass a clockwork.FakeClock.
	Clock clockwork.Clock
	// Logger receives per-window debug lines and info lines for skipped and
	// late fires. The zero Logger discards.
	Logger zerolog.Logger
	// Metrics receives counters. Default NopMetrics.
	Metrics Metrics
	// Quotas gives each tenant's maxEventsPerMinute (see quota.go). Nil:
	// emission is not limited per tenant.
	Quotas Quotas
	// Disk, if set, holds back emissions while it says the disk is nearly
	// full (see quota.go). Nil: no disk guard.
	Disk DiskGuard
	// Deferred, if set, receives every fire whose background emission
	// stopped to wait for a later minute (disk guard or quota). Sends
	// block like Emitted's: a test hook, leave nil in production.
	Deferred chan<- *model.Fire
	// Emitted, if set, receives every fire this emitter recorded (inserted
	// for the first time), after its events were written, and every fire
	// whose background emission it finished (Remaining 0). Sends block
	// until received or the context ends: a test hook, leave nil in
	// production.
	Emitted chan<- *model.Fire
	// ReleaseToken, if set, makes the release token of a new event from
	// its id: a store that can make the token again keeps no copy of it
	// (embedded.Store.ReleaseToken). Nil: 16 random bytes in hex.
	ReleaseToken func(eventID string) string
	// TracerProvider, if set, gives every pass and every new fire a span,
	// and new events the fire span's trace context. Nil: no tracing.
	TracerProvider trace.TracerProvider
	// Watch, if set, marks the new fires of the schedules it names
	// watched, besides those of schedules with notifications.
	Watch Watcher
}

// Emitter is the schedule event emitter. Its methods are safe for concurrent
// use; its lifecycle is startstop's: Start, Ready, Stop.
type Emitter struct {
	startstop.Base

	cfg  Config
	deps Deps
	log  zerolog.Logger
	m    Metrics

	locMu sync.Mutex
	locs  map[string]*time.Location

	planned plannedLocal // see planOneOff

	passMu sync.Mutex // one pass at a time

	lifeMu sync.Mutex
	sched  gocron.Scheduler

	// Background emissions (background.go).
	bgMu      sync.Mutex
	bgOn      bool                 // started: large fires go to the workers
	bgRunning map[string]bool      // fire ids a worker emits now
	bgLocal   map[string]bool      // recorded here: emitted whatever the partition
	bgRetry   map[string]time.Time // failed: not before then
	bgWake    chan struct{}
	bgWakeAt  time.Time // the clock time a wake is armed for (quota.go)

	rate *rate // per-tenant emission count and deferred fires (quota.go)

	tracer trace.Tracer // nil: tracing off
}

// New validates cfg and returns an Emitter that does nothing until Start
// or RunPass.
func New(cfg Config, deps Deps) (*Emitter, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil {
		return nil, errors.New("emitter deps: Store must be set")
	}
	if deps.Partitions == nil {
		deps.Partitions = AllPartitions(cfg.Partitions)
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	if deps.Metrics == nil {
		deps.Metrics = NopMetrics{}
	}
	return &Emitter{
		cfg:  cfg,
		deps: deps,
		log:  deps.Logger.With().Str(logkey.Component, "emitter").Logger(),
		m:    deps.Metrics,
		locs: map[string]*time.Location{},

		bgRunning: map[string]bool{},
		bgLocal:   map[string]bool{},
		bgRetry:   map[string]time.Time{},
		bgWake:    make(chan struct{}, 1),
		// A head retries every minute, or a window after a failure.
		rate:   newRate(2 * max(time.Minute, cfg.Window)),
		tracer: tracing.Tracer(deps.TracerProvider),
	}, nil
}

// Config returns the validated configuration (defaults filled in).
func (e *Emitter) Config() Config { return e.cfg }

// Start runs a pass at once and then every Window on a gocron scheduler
// driven by the clock (singleton mode: a slow pass delays the next one
// instead of overlapping it), plus the orphan-children clean-up every
// CleanupInterval, and the background emission workers, which first resume
// the fires a previous run left unfinished. Ready is closed once the passes
// are scheduled. Calling it again while started does nothing.
func (e *Emitter) Start(ctx context.Context) error {
	e.lifeMu.Lock()
	defer e.lifeMu.Unlock()
	run, ok := e.StartInit(ctx, e.cfg.DrainTimeout)
	if !ok {
		return nil
	}
	s, err := gocron.NewScheduler(gocron.WithClock(e.deps.Clock))
	if err != nil {
		e.Base.Stop(nil)
		return fmt.Errorf("emitter scheduler: %w", err)
	}
	_, err = s.NewJob(gocron.DurationJob(e.cfg.Window),
		gocron.NewTask(func() { e.Do(func() { e.runPassLogged(run) }) }),
		gocron.WithName("emitter-pass"),
		gocron.WithStartAt(gocron.WithStartImmediately()),
		gocron.WithSingletonMode(gocron.LimitModeReschedule))
	if err == nil {
		_, err = s.NewJob(gocron.DurationJob(e.cfg.CleanupInterval),
			gocron.NewTask(func() { e.Do(func() { e.cleanup(run) }) }),
			gocron.WithName("emitter-cleanup"),
			gocron.WithSingletonMode(gocron.LimitModeReschedule))
	}
	if err != nil {
		_ = s.Shutdown()
		e.Base.Stop(nil)
		return fmt.Errorf("emitter job: %w", err)
	}
	if changed := e.deps.Partitions.Changed(); changed != nil {
		stopping := e.Stopping()
		e.Go(func() {
			for {
				select {
				case <-stopping:
					return
				case <-changed:
					e.runPassLogged(run)
				}
			}
		})
	}
	e.bgMu.Lock()
	e.bgOn = true
	e.bgMu.Unlock()
	e.Go(func() { e.dispatch(run) })
	e.wake() // fires left unfinished before a restart
	s.Start()
	e.sched = s
	e.Started()
	return nil
}

// Stop schedules no more passes, lets a pass in progress finish until
// DrainTimeout, then cancels it and waits. Background emissions stop after
// the chunk in hand; their progress is kept and the next Start (here or on
// the instance holding the partition) continues them. Large fires recorded
// after Stop wait for that too. It releases nothing: leases
// belong to the Partitions provider. Safe to call twice or before Start.
func (e *Emitter) Stop() {
	e.lifeMu.Lock()
	s := e.sched
	e.sched = nil
	e.lifeMu.Unlock()
	e.Base.Stop(func() {
		if s != nil {
			// Shutdown waits for a running pass: in a goroutine, so that
			// the drain deadline still applies.
			e.Go(func() { _ = s.Shutdown() })
		}
	})
}

func (e *Emitter) runPassLogged(ctx context.Context) {
	st, err := e.RunPass(ctx)
	e.wake() // partitions taken over, failed emissions due for a retry
	if err != nil && ctx.Err() == nil {
		e.log.Warn().Err(err).Msg("emitter pass failed")
		return
	}
	if st.Windows > 0 || st.WindowsSkipped > 0 {
		e.log.Debug().Int("partitions", st.Partitions).Int("windows", st.Windows).
			Int("childrenRead", st.ChildrenRead).Int("fires", st.Fires).Int("events", st.Events).
			Dur("took", st.Duration).Msg("emitter pass")
	}
}

func (e *Emitter) cleanup(ctx context.Context) {
	n, err := e.deps.Store.ChildrenDeleteOrphans(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn().Err(err).Msg("deleting orphan children failed")
		}
	} else if n > 0 {
		e.log.Info().Int("children", n).Msg("deleted orphan children")
	}
	if _, _, err := e.Complete(ctx); err != nil && ctx.Err() == nil {
		e.log.Warn().Err(err).Msg("completing schedules failed")
	}
}

// completeBatch is the number of schedules of one ScheduleComplete or
// ScheduleDeleteCompleted call.
const completeBatch = 1000

// Complete moves the active schedules that fire no more (a one-off that
// fired, a cron schedule past its endAt, or either past the catch-up limit
// without a fire) and whose events are all finished to completed, and
// deletes the schedules completed more than CompletedRetention ago with
// their fires (store ScheduleComplete, ScheduleDeleteCompleted). Only the
// holder of partition 0 does the work, so that instances do not repeat
// each other's. It runs with the clean-up, every CleanupInterval; each run
// looks at every schedule whose end has come and is not completed yet
// (those whose events are still in flight), through the store's index of
// ends.
func (e *Emitter) Complete(ctx context.Context) (completed, deleted int, err error) {
	if _, ok := e.deps.Partitions.Held()[0]; !ok {
		return 0, 0, nil
	}
	now := e.deps.Clock.Now()
	p := &store.ScheduleCompleteParams{Now: now, MissedBefore: now.Add(-e.cfg.CatchUpLimit), At: now, Limit: completeBatch}
	for {
		res, err := e.deps.Store.ScheduleComplete(ctx, p)
		completed += res.Completed
		if err != nil {
			return completed, deleted, fmt.Errorf("emitter: complete schedules: %w", err)
		}
		if res.Examined < completeBatch {
			break
		}
		p.After = res.Last
	}
	del := &store.ScheduleDeleteCompletedParams{Before: now.Add(-e.cfg.CompletedRetention), Limit: completeBatch}
	for {
		n, err := e.deps.Store.ScheduleDeleteCompleted(ctx, del)
		deleted += n
		if err != nil {
			return completed, deleted, fmt.Errorf("emitter: delete completed schedules: %w", err)
		}
		if n < completeBatch {
			break
		}
	}
	if completed > 0 || deleted > 0 {
		e.log.Info().Int("completed", completed).Int("deleted", deleted).Msg("completed schedules")
	}
	return completed, deleted, nil
}

// location caches *time.Location per IANA name.
func (e *Emitter) location(name string) (*time.Location, error) {
	e.locMu.Lock()
	defer e.locMu.Unlock()
	if loc, ok := e.locs[name]; ok {
		return loc, nil
	}
	loc, err := loadLocation(name)
	if err != nil {
		return nil, err
	}
	e.locs[name] = loc
	return loc, nil
}

func sortedPartitions(held map[int]int64) []int {
	out := make([]int, 0, len(held))
	for p := range held {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}
