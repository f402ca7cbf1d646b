// Package app wires schedulerd together: store → lease groups → emitter,
// handler and master → one HTTP server with /healthz, /readyz, /metrics and
// the console at /ui.
// cmd/schedulerd only parses configuration, builds the App (New) and runs
// it (Start, Wait, Shutdown); end-to-end tests
// and the benchmark command start the same App in process.
package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/delivery/sqsdelivery"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/finish"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/internal/connlimit"
	"github.com/schedulerd/schedulerd/internal/diskspace"
	"github.com/schedulerd/schedulerd/internal/fdlimit"
	"github.com/schedulerd/schedulerd/internal/guard"
	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/internal/startstop"
	"github.com/schedulerd/schedulerd/internal/tracing"
	"github.com/schedulerd/schedulerd/lease"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/throttle"
	"github.com/schedulerd/schedulerd/ui"
)

// App is one schedulerd instance.
type App struct {
	cfg     Config
	log     zerolog.Logger
	store   store.Driver
	metrics *metrics
	// releaseToken makes new events' release tokens (emitter.Deps); nil
	// for a store that keeps random ones.
	releaseToken func(eventID string) string
	// retentionByTTL: the store deletes released events and idempotency
	// records by TTL indexes (MongoDB), see retentionInterval.
	retentionByTTL bool
	// indexes reports the store's background index build; nil for a store
	// that builds none (the embedded one).
	indexes indexStatus

	partitions *lease.Balancer
	shards     *lease.Balancer
	emitter    *emitter.Emitter
	throttle   *throttle.Throttle
	handler    *handler.Handler
	master     *master.Server
	resumer    *master.Resumer // paused schedules due to resume
	finisher   *finish.Finisher
	finishing  *finish.Service // watched fires: notifications, dependents
	deadlines  *master.DeadlineChecker

	adminKeyPath string
	srv          *http.Server
	ln           net.Listener
	serveErr     chan error

	done     chan struct{} // closed by Shutdown
	stopOnce sync.Once
	stopErr  error

	probeMu sync.Mutex
	probe   *probeRun // the store write probe in flight, if any

	disk      guard.Space // nil: not watched
	diskGuard *guard.Disk // nil: no guard
	// storeSpace is the embedded store's view of its disk space (its
	// reserve, and whether its writes fail for lack of space); nil for
	// MongoDB.
	storeSpace func() embedded.SpaceStatus
	// storeCommits counts the embedded store's write transactions; nil for
	// MongoDB.
	storeCommits func() embedded.CommitStats
	diskState    atomic.Int32 // a diskState, as last seen by checkDiskFull

	tracing *tracing.Tracing // from the OTEL_* variables; off unless configured
}

// Hooks are ways for tests to reach into an App; production code passes
// none.
type Hooks struct {
	// WrapStore, if set, wraps the store the App opened (to make its
	// calls hang, say).
	WrapStore func(store.Driver) store.Driver
	// Disk, if set, replaces the free-space probe of the data directory.
	Disk guard.Space
	// StoreSpace, if set, replaces the embedded store's report of its
	// disk space (its writes failing for lack of space, say).
	StoreSpace func() embedded.SpaceStatus
	// SpanExporter, if set, receives the spans instead of an OTLP
	// exporter, and turns tracing on.
	SpanExporter sdktrace.SpanExporter
}

// New opens the store and builds every component. Nothing runs until Start.
func New(ctx context.Context, cfg Config, log zerolog.Logger) (*App, error) {
	return NewWithHooks(ctx, cfg, log, Hooks{})
}

// NewWithHooks is New with test hooks.
func NewWithHooks(ctx context.Context, cfg Config, log zerolog.Logger, hooks Hooks) (*App, error) {
	a := &App{cfg: cfg, log: log, metrics: newMetrics(), serveErr: make(chan error, 1), done: make(chan struct{})}
	if err := a.secrets(); err != nil {
		return nil, err
	}
	if err := a.setupTracing(ctx, hooks); err != nil {
		return nil, err
	}
	log = a.log
	// Listen first: with port 0 the release URLs handed to consumers must
	// name the port actually bound.
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.ListenAddr, err)
	}
	a.ln = ln
	if a.cfg.PublicURL == "" {
		a.cfg.PublicURL = "http://" + ln.Addr().String()
	}
	if a.cfg.AdvertiseURL == "" {
		a.cfg.AdvertiseURL = advertiseURL(ln.Addr())
	}
	cfg = a.cfg
	switch cfg.Store {
	case "embedded":
		var emb *embedded.Store
		var secrets [][]byte
		if secrets, err = SigningSecrets(cfg.SigningSecret); err != nil {
			break
		}
		// The key of its release tokens is kept sealed under the signing secret.
		reserve := cfg.StoreReserveBytes
		if reserve == 0 {
			reserve = -1 // the store's option for none
		}
		if emb, err = embedded.Open(cfg.DataDir, embedded.Options{TokenKeySecrets: secrets, ReserveBytes: reserve}); err == nil {
			// Its tokens are made again from the event ids, not stored.
			a.store, a.releaseToken, a.storeSpace, a.storeCommits = emb, emb.ReleaseToken, emb.Space, emb.Commits
		} else if errors.Is(err, embedded.ErrTokenKeySealed) {
			err = fmt.Errorf("signing-secret: %w (keep the previous secret after the new one while rotating)", err)
		}
	case "mongo":
		// Bounded, so that an unreachable store fails the start with an
		// error instead of hanging before the banner.
		octx, cancel := context.WithTimeout(ctx, 60*time.Second)
		o := mongoOptions(cfg)
		o.Logger = log
		var ms *mongo.Store
		ms, err = mongo.Open(octx, cfg.MongoURI, o)
		cancel()
		if err == nil {
			a.store, a.indexes, a.retentionByTTL = ms, ms, ms.RetentionByTTL()
		}
		if errors.Is(err, mongo.ErrWeakWriteConcern) {
			err = fmt.Errorf("mongo-uri: %w (-mongo-allow-weak-write-concern accepts it)", err)
		}
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("open %s store: %w", cfg.Store, err)
	}
	if hooks.WrapStore != nil {
		a.store = hooks.WrapStore(a.store)
	}
	a.disk = a.diskProbe()
	if hooks.Disk != nil {
		a.disk = hooks.Disk
	}
	if hooks.StoreSpace != nil {
		a.storeSpace = hooks.StoreSpace
	}
	if err := a.build(ctx); err != nil {
		ln.Close()
		a.store.Close()
		return nil, err
	}
	return a, nil
}

// purgeBackstopInterval is how often the handler's purge jobs run where
// the store deletes by TTL indexes: often enough that events and
// idempotency records without the TTL's Date field (written by an older
// version) or left behind by a lagging TTL monitor go within the hour, one
// indexed query per job and hour otherwise.
const purgeBackstopInterval = time.Hour

// retentionInterval is the handler's RetentionInterval: the backstop's
// where the store's retention is by TTL indexes (MongoDB), else 0, the
// handler's default, where the purge jobs are the retention (the embedded
// store, FerretDB).
func retentionInterval(byTTL bool) time.Duration {
	if byTTL {
		return purgeBackstopInterval
	}
	return 0
}

// cleanupInterval is the emitter's CleanupInterval, which also completes
// and deletes completed schedules: its default (5m), or the completed
// retention if shorter (at least 1s), so that a short retention is kept.
func cleanupInterval(completedRetention time.Duration) time.Duration {
	return min(5*time.Minute, max(time.Second, completedRetention))
}

// mongoOptions are the MongoDB driver's options from the flags.
func mongoOptions(cfg Config) mongo.Options {
	return mongo.Options{
		Database:               cfg.MongoDatabase,
		AllowWeakWriteConcern:  cfg.MongoAllowWeakWriteConcern,
		ServerSelectionTimeout: cfg.MongoServerSelectionTimeout,
		OperationTimeout:       cfg.MongoOperationTimeout,
		EventRetention:         cfg.Retention,
		IdempotencyRetention:   cfg.IdempotencyRetention,
		AuditRetention:         cfg.AuditRetention,
		Owner:                  cfg.InstanceID,
	}
}

// secrets fills in the admin key and signing secret. With the embedded store
// they are generated once and kept in the data directory, so that a bare
// `schedulerd` works and keeps working across restarts.
func (a *App) secrets() error {
	if a.cfg.Store != "embedded" {
		return nil
	}
	if err := os.MkdirAll(a.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	if err := a.checkEmptyStore(); err != nil {
		return err
	}
	load := func(name, prefix string, dst *string) error {
		if *dst != "" {
			return nil
		}
		path := filepath.Join(a.cfg.DataDir, name)
		b, err := os.ReadFile(path)
		if err == nil && len(strings.TrimSpace(string(b))) >= 16 {
			*dst = strings.TrimSpace(string(b))
			return nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("read %s: %w", path, err)
		}
		*dst = prefix + rand.Text()
		if err := os.WriteFile(path, []byte(*dst+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	if a.cfg.AdminKey == "" {
		a.adminKeyPath = filepath.Join(a.cfg.DataDir, "admin.key")
	}
	if err := load("admin.key", "sk_admin_", &a.cfg.AdminKey); err != nil {
		return err
	}
	return load("signing.secret", "", &a.cfg.SigningSecret)
}

// checkEmptyStore refuses an empty store file beside secrets kept from an
// earlier start: the store's data was lost (an interrupted copy or restore),
// and starting empty would hide that.
func (a *App) checkEmptyStore() error {
	db := embedded.File(a.cfg.DataDir)
	info, err := os.Stat(db)
	if err != nil || info.Size() != 0 {
		return nil // a missing file is a new store; a damaged one is Open's to report
	}
	for _, name := range []string{"admin.key", "signing.secret"} {
		if _, err := os.Stat(filepath.Join(a.cfg.DataDir, name)); err == nil {
			return fmt.Errorf("%s is empty but %s is from an earlier start, so the store's data is lost: restore %s from a backup, or move it away to start with an empty store", db, name, db)
		}
	}
	return nil
}

func (a *App) build(ctx context.Context) error {
	cfg := a.cfg
	secrets, err := SigningSecrets(cfg.SigningSecret)
	if err != nil {
		return err
	}
	a.partitions, err = lease.New(lease.Config{Group: "emitter", Units: cfg.Partitions, Owner: cfg.InstanceID, TTL: cfg.LeaseTTL}, lease.Deps{Store: a.store, Logger: a.log})
	if err != nil {
		return err
	}
	// With instances sharing the store, each advertises where releases
	// of its shards' policies are forwarded to (see tokenOwners).
	shardsCfg := lease.Config{Group: "handler", Units: cfg.Shards, Owner: cfg.InstanceID, TTL: cfg.LeaseTTL}
	if cfg.Store == "mongo" {
		shardsCfg.Addr = cfg.AdvertiseURL
	}
	a.shards, err = lease.New(shardsCfg, lease.Deps{Store: a.store, Logger: a.log})
	if err != nil {
		return err
	}
	// The disk guard and the tenants' default quotas, the same for the
	// master's requests and the emitter's emissions.
	a.diskGuard, err = guard.NewDisk(a.disk, cfg.DiskMinFreeBytes, cfg.DiskMinFreePercent)
	if err != nil {
		return err
	}
	tenantQuotas := guard.TenantQuotaDefaults(model.TenantQuotas{
		MaxSchedules: cfg.TenantMaxSchedules, MaxEventsPerFire: cfg.TenantMaxEventsPerFire,
		MaxEventsPerMinute: cfg.TenantMaxEventsPerMinute, MaxEventsStored: cfg.TenantMaxEventsStored,
	}, master.DefaultMaxEventCount)
	a.finisher, err = finish.New(finish.Config{Shards: cfg.Shards, Partitions: cfg.Partitions, Interval: cfg.FinishInterval}, finish.Deps{
		Store: a.store, Logger: a.log, ReleaseToken: a.releaseToken, Partitions: a.partitions,
	})
	if err != nil {
		return err
	}
	a.finishing = finish.NewService(a.finisher)
	a.emitter, err = emitter.New(emitter.Config{
		Partitions: cfg.Partitions, Shards: cfg.Shards, Window: cfg.Window, Lead: cfg.Lead,
		CatchUpLimit: cfg.CatchUpLimit, BackgroundThreshold: cfg.BackgroundAbove,
		BackgroundChunk: cfg.BackgroundChunk, Owner: cfg.InstanceID,
		CompletedRetention: cfg.CompletedRetention, CleanupInterval: cleanupInterval(cfg.CompletedRetention),
	}, emitter.Deps{
		Store: a.store, Partitions: a.partitions, Logger: a.log, Metrics: a.metrics,
		Quotas: emitter.NewQuotaCache(a.store, tenantQuotas, 0, nil),
		Disk:   a.diskGuard, ReleaseToken: a.releaseToken, Watch: a.finisher,
		TracerProvider: a.tracing.Provider,
	})
	if err != nil {
		return err
	}
	a.finisher.UseEmitter(a.emitter)
	httpd, err := httpdelivery.New(httpdelivery.Config{
		SigningSecret: secrets[0], PreviousSigningSecrets: secrets[1:], ReleaseBaseURL: cfg.PublicURL, Timeout: cfg.HTTPTimeout,
		AllowCIDRs: cfg.HTTPAllowCIDRs, DenyCIDRs: cfg.HTTPDenyCIDRs,
		BatchMaxEvents: cfg.HTTPBatchMaxEvents, BatchMaxBytes: cfg.HTTPBatchMaxBytes,
	})
	if err != nil {
		return err
	}
	sqsd, err := sqsdelivery.New(ctx, sqsdelivery.Config{Region: cfg.SQSRegion, Endpoint: cfg.SQSEndpoint, ReleaseBaseURL: cfg.PublicURL, Logger: a.log})
	if err != nil {
		return err
	}
	// One throttle per process: the handler feeds it and delivers what it
	// dispatches; the master releases and extends tokens through it. Early
	// dispatch needs every release of a policy to go through the throttle
	// that owns it: one process owns an embedded store, and with MongoDB
	// the master forwards a release to the owner of the event's shard
	// (tokenOwners).
	a.throttle, err = throttle.New(throttle.Config{Shards: cfg.Shards, EarlyDispatch: earlyDispatch(cfg)},
		throttle.Deps{Store: a.store, Shards: a.shards, Limits: a.store, Caps: master.PolicyCaps(a.store), Holds: a.store, Logger: a.log, Metrics: a.metrics})
	if err != nil {
		return err
	}
	a.handler, err = handler.New(handler.Config{Shards: cfg.Shards, Retention: cfg.Retention, Owner: cfg.InstanceID,
		IdempotencyRetention: cfg.IdempotencyRetention, AuditRetention: cfg.AuditRetention, TenantWeight: cfg.TenantWeight,
		RetentionInterval: retentionInterval(a.retentionByTTL),
		OutcomeLinger:     offIfZero(cfg.OutcomeLinger), LaunchGap: offIfZero(cfg.LaunchGap),
		MaxScheduled: cfg.MaxHeld},
		handler.Deps{
			Store: a.store, Shards: a.shards, Throttle: a.throttle, Logger: a.log, Metrics: a.metrics,
			// Delivery is shared between tenants by their weights.
			Tenants: a.store,
			// The master's idempotency records are cleaned up with the events.
			Idempotency: a.store,
			Audit:       a.store,
			Deliverers:  map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpd, model.TargetHTTPBatch: httpd, model.TargetSQS: sqsd},
			// The queues of adaptive SQS policies feed their limits.
			Backlogs:       sqsd,
			TracerProvider: a.tracing.Provider,
		})
	if err != nil {
		return err
	}
	var owners master.TokenOwners
	if cfg.Store == "mongo" {
		owners = tokenOwners{shards: a.shards, k: cfg.Shards, self: cfg.InstanceID}
	}
	a.master, err = master.New(master.Config{
		AdminKey: cfg.AdminKey, Partitions: cfg.Partitions,
		RateLimit: master.RateLimit{PerSecond: cfg.RateLimit, Burst: cfg.RateBurst},
		// The deliverer's SSRF rule, so that a target it would refuse is refused on save.
		TargetAllowCIDRs: cfg.HTTPAllowCIDRs, TargetDenyCIDRs: cfg.HTTPDenyCIDRs,
		// Shared by every instance and kept across restarts, so that any
		// of them replays a sealed idempotency record.
		IdempotencySecret: secrets[0], PreviousIdempotencySecrets: secrets[1:],
		TenantWeight: cfg.TenantWeight,
		TenantQuotas: tenantQuotas,
		CatchUpLimit: cfg.CatchUpLimit,
	}, master.Deps{
		Store: a.store, Emitter: a.emitter, Logger: a.log, Disk: a.diskGuard,
		// Releases served here hand tokens to this throttle's buckets.
		Tokens:         a.throttle,
		TokenOwners:    owners,
		TracerProvider: a.tracing.Provider,
		Propagator:     a.tracing.Propagator,
	})
	if err != nil {
		return err
	}
	a.resumer = a.master.NewResumer(0)
	a.deadlines = master.NewDeadlineChecker(a.store, a.metrics, nil, a.log, 0)
	a.deadlines.NotifyMisses(a.finisher)
	a.metrics.countForwards(a.master.TokenForwards)
	a.metrics.exportHeld(a.handler.Held, a.handler.PeakHeld)
	if a.storeSpace != nil {
		a.metrics.exportStoreSpace(a.storeSpace)
	}
	if a.storeCommits != nil {
		a.metrics.exportStoreCommits(a.storeCommits)
	}
	e := a.master.Echo()
	e.Pre(a.metrics.apiMiddleware)
	e.Pre(middleware.RequestID())
	e.Pre(a.requestLog)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", a.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{})))
	// The console: static files only; its pages call the /v1 API with the
	// operator's key.
	e.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/") })
	e.GET("/ui/*", echo.WrapHandler(http.StripPrefix("/ui", ui.Handler())))
	return nil
}

// requestLog logs every API request with its request id: at debug level
// when it succeeded, at info for 4xx and warn for 5xx.
func (a *App) requestLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		status := c.Response().Status
		ev := a.log.Debug()
		switch {
		case status >= 500:
			ev = a.log.Warn()
		case status >= 400:
			ev = a.log.Info()
		}
		ev.Ctx(c.Request().Context()).Str(logkey.Request, c.Response().Header().Get(echo.HeaderXRequestID)).
			Str("method", c.Request().Method).Str("route", c.Path()).Str("path", c.Request().URL.Path).
			Int("status", status).Dur("duration", time.Since(start)).Msg("api request")
		return nil
	}
}

// readyz is ready when the store answers, a write to it completes and both
// lease groups have renewed recently: an instance that cannot reach the
// store, or whose writes hang, must not get traffic, because every write it
// accepts would fail.
func (a *App) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readyzTimeout)
	defer cancel()
	checks := map[string]string{"store": "ok", "storeWrite": "ok", "leases": "ok"}
	ready := true
	if err := a.store.Ping(ctx); err != nil {
		checks["store"] = err.Error()
		ready = false
	}
	if err := a.probeStoreWrite(ctx); err != nil {
		checks["storeWrite"] = err.Error()
		ready = false
	}
	for _, b := range []*lease.Balancer{a.partitions, a.shards} {
		if !b.Healthy() {
			checks["leases"] = "lease renewal failing for group " + b.Config().Group
			ready = false
		}
	}
	// A nearly full disk refuses new work but stays ready: releases and
	// deliveries must keep reaching this instance, and do while the store's
	// writes go through. An instance whose store writes fail for lack of
	// space is not ready.
	_, checks["disk"] = a.diskGuard.DiskStatus()
	if ok, reason := a.checkDiskFull(); reason != "" {
		checks["disk"] = reason
		ready = ready && ok
	}
	if v, ok := indexCheck(a.indexes); ok {
		checks["indexes"] = v // reported, never unready: see indexCheck
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	return c.JSON(status, map[string]any{"ready": ready, "checks": checks})
}

// readyzTimeout bounds each check of /readyz.
const readyzTimeout = 2 * time.Second

// probeRun is one store write of /readyz; err is set when done is closed.
type probeRun struct {
	started time.Time
	done    chan struct{}
	err     error
}

// probeLease names the lease the /readyz write probe writes: shaped as a
// lease group's membership lease ("<group>/member/<owner>"), which a store
// deletes once expired where it deletes by TTL, so that the records of
// instances gone (named hostname-pid) do not pile up.
func probeLease(instance string) string { return "readyz/member/" + instance }

// probeStoreWrite writes this instance's probe lease (probeLease) and waits for it until ctx ends. A write that does not return is not
// started again: later calls wait for the same one and report its age.
func (a *App) probeStoreWrite(ctx context.Context) error {
	a.probeMu.Lock()
	run := a.probe
	if run == nil {
		run = &probeRun{started: time.Now(), done: make(chan struct{})}
		a.probe = run
		go func() {
			// Bounded for a store that honours deadlines, not by the
			// request: a later /readyz reports a write still hanging.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_, err := a.store.LeaseAcquire(wctx, probeLease(a.cfg.InstanceID), a.cfg.InstanceID, time.Now(), time.Minute)
			if errors.Is(err, model.ErrConflict) {
				err = nil // held by a namesake: the store wrote and answered
			}
			run.err = err
			a.probeMu.Lock()
			a.probe = nil
			a.probeMu.Unlock()
			close(run.done)
		}()
	}
	a.probeMu.Unlock()
	select {
	case <-run.done:
		if run.err != nil {
			return fmt.Errorf("store write probe: %w", run.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store write probe: a write has not completed for %s", time.Since(run.started).Round(time.Millisecond))
	}
}

// tokenOwners finds the instance that owns an event's tokens: the holder
// of the event's queue shard, whose throttle runs its policy's bucket (all
// events of a policy live on one shard).
type tokenOwners struct {
	shards *lease.Balancer
	k      int
	self   string
}

func (o tokenOwners) TokenOwner(ctx context.Context, e *model.Event) (string, error) {
	shard := model.ShardOf(e, o.k)
	if _, ok := o.shards.Held()[shard]; ok {
		return "", nil
	}
	h, ok, err := o.shards.HolderOf(ctx, shard)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", fmt.Errorf("%w: no live holder of queue shard %d", model.ErrUnavailable, shard)
	case h.Owner == o.self || h.Addr == "":
		// Taken by this instance a moment ago, or held by one that
		// advertises no address (a version without forwarding, which runs
		// no early dispatch on MongoDB): served here, as such versions do.
		return "", nil
	}
	return h.Addr, nil
}

// advertiseURL is the default base URL this instance advertises to the
// others: the bound listen address, with the host name in place of an
// address that means "all addresses".
func advertiseURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// diskProbe is the disk guard's probe: the embedded store's data directory.
// MongoDB's disk is not this process's to watch (nil: no guard).
func (a *App) diskProbe() guard.Space {
	if a.cfg.Store != "embedded" {
		return nil
	}
	return diskspace.Dir{Path: a.cfg.DataDir}
}

// diskFullBelow is the free space under which the data disk counts as
// full: a store commit may need more than is left.
const diskFullBelow = 1 << 20

// The data disk's states, as checkDiskFull reports and logs them.
const (
	diskRoom       int32 = iota // at least diskFullBelow free
	diskFullWrites              // full, and the store's writes go through (its reserve)
	diskFullFails               // the store's writes fail for lack of space
)

// checkDiskFull reports whether the data disk is full and, if it is, why
// and whether the instance is still ready: it is while the store's writes
// go through, in the space its file keeps allocated, so that deliveries
// and releases go on; it is not once they fail for lack of space. It logs
// every change of state. reason is "" while the disk has room.
func (a *App) checkDiskFull() (ready bool, reason string) {
	if a.disk == nil {
		return true, ""
	}
	var st embedded.SpaceStatus
	if a.storeSpace != nil {
		st = a.storeSpace()
	}
	free, total, err := a.disk.Usage()
	if err != nil && !st.Full {
		return true, "" // DiskStatus reports it
	}
	// The store's own report stands until the disk has room (a commit
	// may not need new pages to show it).
	state := diskRoom
	switch {
	case st.Full && (err != nil || free < diskFullBelow):
		state = diskFullFails
		reason = fmt.Sprintf("full: store writes fail for lack of space (%v): deliveries and releases stall until space is freed, then resume by themselves", st.Err)
	case err == nil && free < diskFullBelow:
		state = diskFullWrites
		reason = fmt.Sprintf("full: %d bytes free of %d: new schedules and triggers are refused; %s", free, total, reserveText(st.Reserved))
	}
	if old := a.diskState.Swap(state); old != state {
		switch state {
		case diskFullFails:
			a.log.Error().Err(st.Err).Uint64("freeBytes", free).
				Msg("data disk full: store writes fail for lack of space, deliveries and releases stall until space is freed")
		case diskFullWrites:
			ev := a.log.Warn()
			if old == diskFullFails {
				ev = a.log.Info()
			}
			ev.Uint64("freeBytes", free).Uint64("totalBytes", total).Int64("reserveBytes", st.Reserved).
				Msg("data disk full: deliveries and releases go on in the store's reserve")
		default:
			a.log.Info().Uint64("freeBytes", free).Msg("data disk has room again")
		}
	}
	return state != diskFullFails, reason
}

// reserveText says what the store's reserve of n bytes left means on a
// full disk.
func reserveText(n int64) string {
	if n <= 0 {
		return "the store has no reserve left: deliveries and releases go on only while its writes find freed pages"
	}
	return fmt.Sprintf("deliveries and releases go on in the store's reserve (%.1f MiB left)", float64(n)/(1<<20))
}

// AdminKeyFile returns the file the generated admin key was written to, or
// "" if the key came from configuration.
func (a *App) AdminKeyFile() string { return a.adminKeyPath }

// AdminKey returns the admin API key in force.
func (a *App) AdminKey() string { return a.cfg.AdminKey }

// Addr returns the address the API listens on.
func (a *App) Addr() string { return a.ln.Addr().String() }

// maxConns is -server-max-conns, or where it is 0 half the open-file limit
// (the rest is left to the store, outgoing deliveries and the like).
func maxConns(cfg Config) (int, error) {
	if cfg.ServerMaxConns > 0 {
		return cfg.ServerMaxConns, nil
	}
	l, err := fdlimit.Get()
	if err != nil {
		return 0, err
	}
	return int(min(l.Soft/2, math.MaxInt32)), nil
}

// Start listens and starts the background services. It returns at once.
func (a *App) Start(ctx context.Context) error {
	ln := a.ln
	limit, err := maxConns(a.cfg)
	if err != nil {
		a.log.Warn().Err(err).Msg("API connections not capped in total")
	}
	conns := connlimit.New(limit, a.cfg.ServerMaxConnsPerClient, func(reason string) {
		a.metrics.connsShed.WithLabelValues(reason).Inc()
	})
	a.srv = &http.Server{
		Handler:           a.master.Handler(),
		ReadHeaderTimeout: a.cfg.ServerReadHeaderTimeout,
		WriteTimeout:      a.cfg.ServerWriteTimeout,
		IdleTimeout:       a.cfg.ServerIdleTimeout,
		ConnState:         conns.ConnState,
	}
	go func() { a.serveErr <- a.srv.Serve(conns.Listener(ln)) }()
	// Reverse stop order: the lease groups first, so that the handler and
	// the emitter find their shards and partitions held.
	svcs := a.services()
	for i := len(svcs) - 1; i >= 0; i-- {
		if err := svcs[i].Start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", svcs[i].name, err)
		}
	}
	go a.watch()
	ev := a.log.Info().Str("listen", ln.Addr().String()).Str("store", a.cfg.Store).
		Int("maxConns", limit).Int("maxConnsPerClient", a.cfg.ServerMaxConnsPerClient)
	if a.adminKeyPath != "" {
		ev = ev.Str("adminKeyFile", a.adminKeyPath)
	}
	ev.Msg("schedulerd started")
	return nil
}

// watch updates the lease gauges and logs a full data disk every 5s until
// Shutdown.
func (a *App) watch() {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		a.metrics.leasesHeld.WithLabelValues("emitter").Set(float64(len(a.partitions.Held())))
		a.metrics.leasesHeld.WithLabelValues("handler").Set(float64(len(a.shards.Held())))
		a.checkDiskFull()
		select {
		case <-a.done:
			return
		case <-t.C:
		}
	}
}

// Wait blocks until the HTTP server fails or ctx ends.
func (a *App) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-a.serveErr:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("http server: %w", err)
	}
}

// services lists the background components in the order they stop: the
// resumer (it emits through the emitter), the deadline checker, the emitter (no new events), then the handler (in-flight deliveries
// finish), the throttle (tokens taken but not sent go back), then the lease
// groups (the units go to other instances at once). Start runs the list
// backwards.
func (a *App) services() []component {
	return []component{
		{"resumer", a.resumer}, {"finisher", a.finishing}, {"deadlines", a.deadlines}, {"emitter", a.emitter}, {"handler", a.handler}, {"throttle", a.throttle},
		{"emitter leases", a.partitions}, {"handler leases", a.shards},
	}
}

// component is a background component and its name in logs and errors.
type component struct {
	name string
	startstop.Service
}

// within runs f and waits for it until ctx ends; then it returns an error
// naming what did not return, and f goes on in the background.
func within(ctx context.Context, what string, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return fmt.Errorf("%s did not return within the shutdown timeout", what)
		}
	}
}

// Shutdown stops taking new work, lets in-flight deliveries finish, hands
// the leases back so that other instances take over at once, then stops the
// API (kept up meanwhile so that consumers can still release tokens) and
// closes the store. Safe to call twice.
//
// It returns when ctx ends even if a component's Stop or the store's Close
// never returns (a store call that hangs): the error names it, the
// components after it are not stopped and the store is left open.
func (a *App) Shutdown(ctx context.Context) error {
	a.stopOnce.Do(func() {
		a.log.Info().Msg("schedulerd shutting down")
		close(a.done)
		var errs []error
		stuck := ""
		for _, svc := range a.services() {
			if err := within(ctx, svc.name+" stop", func() error { svc.Stop(); return nil }); err != nil {
				errs, stuck = append(errs, err), svc.name
				break
			}
		}
		if a.srv != nil {
			if err := a.srv.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http shutdown: %w", err))
				a.srv.Close()
			}
		}
		if a.srv == nil {
			a.ln.Close()
		}
		if stuck == "" {
			if err := within(ctx, "store close", a.store.Close); err != nil {
				errs, stuck = append(errs, fmt.Errorf("close store: %w", err)), "store"
			}
		}
		// The spans of the work just stopped are flushed within what is
		// left of the shutdown's time.
		if err := a.tracing.Shutdown(ctx); err != nil {
			a.log.Warn().Err(err).Msg("tracing: spans not flushed at shutdown")
		}
		a.stopErr = errors.Join(errs...)
		if stuck != "" {
			a.log.Error().Err(a.stopErr).Str("stuck", stuck).Dur("shutdownTimeout", a.cfg.ShutdownTimeout).
				Msg("schedulerd shutdown timed out")
			return
		}
		a.log.Info().Err(a.stopErr).Msg("schedulerd stopped")
	})
	return a.stopErr
}

// offIfZero maps a flag's 0 ("off") to a handler setting's negative value
// (its 0 means "the default").
func offIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// earlyDispatch decides -early-dispatch: auto is on for the embedded store
// and off for MongoDB, where a crash between the send and its commit (more
// likely with several instances) sends the event again.
func earlyDispatch(cfg Config) bool {
	switch cfg.EarlyDispatch {
	case "on":
		return true
	case "off":
		return false
	}
	return cfg.Store != "mongo"
}

// setupTracing builds the trace provider from the OTEL_* variables and,
// when tracing is on, has log lines written with a span's context carry
// its trace_id and span_id.
func (a *App) setupTracing(ctx context.Context, hooks Hooks) error {
	// The exporter and the SDK read the variables they own themselves.
	t, err := tracing.Setup(ctx, tracing.Options{Getenv: os.Getenv, Logger: a.log, Exporter: hooks.SpanExporter})
	if err != nil {
		return err
	}
	a.tracing = t
	if t.Enabled() {
		a.log = a.log.Hook(tracing.LogHook{})
		a.log.Info().Msg("tracing: spans exported by OTLP")
	}
	return nil
}
