package app

import (
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/throttle"
)

// metrics holds every Prometheus series schedulerd exports. It implements
// the Metrics interfaces that the emitter and handler declare.
type metrics struct {
	reg *prometheus.Registry

	// emitter
	scanDuration   prometheus.Histogram
	childrenRead   prometheus.Counter
	firesRecorded  *prometheus.CounterVec
	eventsEmitted  prometheus.Counter
	firesSkipped   *prometheus.CounterVec
	windowsSkipped prometheus.Counter
	partitionsLost prometheus.Counter
	firesDeferred  *prometheus.CounterVec

	// handler and throttle
	delivered     prometheus.Counter
	retried       *prometheus.CounterVec
	tokensRenewed prometheus.Counter
	dead          *prometheus.CounterVec
	lateness      prometheus.Histogram
	tokenWait     prometheus.Histogram
	failures      *prometheus.CounterVec
	tokenTimeouts *prometheus.CounterVec
	// deadlineMissed counts fires not finished by their deadline.
	deadlineMissed *prometheus.CounterVec
	tokensInUse    *prometheus.GaugeVec
	tokensWaiting  *prometheus.GaugeVec
	// effectiveLimit is the adaptive limit of the policies this instance owns.
	effectiveLimit *prometheus.GaugeVec
	// limitSource is 1 for the source of that limit.
	limitSource   *prometheus.GaugeVec
	oldestWaiting *prometheus.GaugeVec

	// api
	apiRequests *prometheus.CounterVec
	apiDuration *prometheus.HistogramVec

	// leases
	leasesHeld *prometheus.GaugeVec

	// connsShed counts API connections closed by the connection caps.
	connsShed *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.scanDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "schedulerd_emitter_window_scan_seconds",
		Help:    "Time to scan and emit one window of one partition.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	m.childrenRead = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "schedulerd_emitter_children_read_total",
		Help: "Children read by window scans (follows due children, not schedules).",
	})
	m.firesRecorded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedulerd_fires_total",
		Help: "Fires recorded, by decision.",
	}, []string{"decision"})
	m.eventsEmitted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "schedulerd_events_emitted_total",
		Help: "Events written by the emitter (first insert only).",
	})
	m.firesSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedulerd_fires_skipped_total",
		Help: "Due fires that were not emitted, by reason.",
	}, []string{"reason"})
	m.windowsSkipped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "schedulerd_emitter_windows_skipped_total",
		Help: "Windows jumped over because they were older than the catch-up limit.",
	})
	m.partitionsLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "schedulerd_emitter_partitions_lost_total",
		Help: "Partitions given up after losing the watermark compare-and-set.",
	})
	m.firesDeferred = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedulerd_fires_deferred_total",
		Help: "Fires whose events were held back for a later minute, by reason (quota: the tenant's maxEventsPerMinute; disk: the disk guard).",
	}, []string{"reason"})
	m.apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedulerd_api_requests_total",
		Help: "API requests by route and status.",
	}, []string{"method", "route", "status"})
	m.apiDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "schedulerd_api_request_seconds",
		Help:    "API request latency by route.",
		Buckets: prometheus.DefBuckets,
	}, []string{"method", "route"})
	m.leasesHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schedulerd_leases_held",
		Help: "Leases this instance holds, by group (emitter partitions, handler shards).",
	}, []string{"group"})
	m.connsShed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedulerd_api_connections_shed_total",
		Help: "API connections closed by -server-max-conns or -server-max-conns-per-client, by reason (idle_closed: an idle one made room; refused: every other was busy).",
	}, []string{"reason"})
	m.delivered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "schedulerd_events_delivered_total",
		Help: "Successful delivery attempts.",
	})
	m.retried = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedulerd_events_retried_total",
		Help: "Failed delivery attempts that will be tried again, by priority class (high > 0, default 0, low < 0).",
	}, []string{"priority"})
	m.tokensRenewed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "schedulerd_tokens_renewed_total",
		Help: "Tokens renewed before a send because the event waited more than TokenRenewAfter after taking its token.",
	})
	m.deadlineMissed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedulerd_fire_deadline_missed_total",
		Help: "Fires not finished by their deadline, by their schedule's policy (\"\" for none), counted once across instances.",
	}, []string{"policy"})
	m.dead = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedulerd_events_dead_total",
		Help: "Events moved to dead after their last attempt, by priority class (high > 0, default 0, low < 0).",
	}, []string{"priority"})
	m.lateness = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "schedulerd_delivery_lateness_seconds",
		Help:    "Delay the scheduler added: delivery start minus the moment the event may go (launch time, or the later grant of its token when throttled).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 20),
	})
	m.tokenWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "schedulerd_token_wait_seconds",
		Help:    "Time a throttled event waited for its token after its launch time (the policy's delay).",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 14),
	})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedulerd_delivery_failures_total",
		Help: "Failed delivery attempts, by reason (timeout, refused, ssrf, http_4xx, http_5xx, sqs, other).",
	}, []string{"reason"})
	for _, r := range delivery.Reasons {
		m.failures.WithLabelValues(string(r)) // every reason is exported from the start, at 0
	}
	for _, c := range model.PriorityClasses {
		m.retried.WithLabelValues(c) // exported from the start, at 0
		m.dead.WithLabelValues(c)
	}
	m.oldestWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schedulerd_oldest_waiting_seconds",
		Help: "Age (now minus launch time) of the oldest due event held and not sent yet (waiting for a token or a worker), by policy (none: unthrottled) and priority class.",
	}, []string{"policy", "priority"})
	m.tokenTimeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedulerd_token_timeouts_total",
		Help: "Tokens reclaimed because they were not released within tokenTimeout, by policy.",
	}, []string{"policy"})
	m.tokensInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schedulerd_tokens_in_use",
		Help: "Tokens out per policy (as last seen by this instance's bucket owner).",
	}, []string{"policy"})
	m.tokensWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schedulerd_tokens_waiting",
		Help: "Events due and waiting for a token per policy (owned buckets).",
	}, []string{"policy"})
	m.effectiveLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schedulerd_policy_effective_limit",
		Help: "The effective limit of a policy (owned buckets): its maxInFlight or adaptive limit, lowered by its limit schedule and hold.",
	}, []string{"policy"})
	m.limitSource = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schedulerd_policy_limit_source",
		Help: "1 for where a policy's effective limit comes from (owned buckets): policy, adaptive, hold or limits[i].",
	}, []string{"policy", "source"})
	m.reg.MustRegister(m.delivered, m.retried, m.tokensRenewed, m.dead, m.lateness, m.tokenWait, m.failures, m.tokenTimeouts, m.tokensInUse, m.tokensWaiting, m.oldestWaiting, m.effectiveLimit, m.limitSource, m.deadlineMissed)
	m.reg.MustRegister(m.firesDeferred, m.scanDuration, m.childrenRead, m.firesRecorded, m.eventsEmitted,
		m.firesSkipped, m.windowsSkipped, m.partitionsLost, m.apiRequests, m.apiDuration, m.leasesHeld, m.connsShed)
	return m
}

// emitter.Metrics

func (m *metrics) WindowScanned(_ int, childrenRead int, d time.Duration) {
	m.scanDuration.Observe(d.Seconds())
	m.childrenRead.Add(float64(childrenRead))
}
func (m *metrics) FiresRecorded(d model.FireDecision, n int) {
	m.firesRecorded.WithLabelValues(string(d)).Add(float64(n))
}
func (m *metrics) EventsEmitted(n int) { m.eventsEmitted.Add(float64(n)) }
func (m *metrics) FiresSkipped(r emitter.SkipReason, n int) {
	m.firesSkipped.WithLabelValues(string(r)).Add(float64(n))
}
func (m *metrics) WindowsSkipped(_ int, n int) { m.windowsSkipped.Add(float64(n)) }
func (m *metrics) PartitionLost(int)           { m.partitionsLost.Inc() }
func (m *metrics) FiresDeferred(r emitter.DeferReason, n int) {
	m.firesDeferred.WithLabelValues(string(r)).Add(float64(n))
}

// apiMiddleware counts requests by route template (never the raw path, so
// ids do not explode the label set).
func (m *metrics) apiMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			// Let the error handler write the problem document now so
			// that the status it chooses is the one counted.
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		m.apiRequests.WithLabelValues(c.Request().Method, route, strconv.Itoa(status)).Inc()
		m.apiDuration.WithLabelValues(c.Request().Method, route).Observe(time.Since(start).Seconds())
		return nil
	}
}

// handler.Metrics (and throttle.Metrics)

func (m *metrics) Delivered(n int) { m.delivered.Add(float64(n)) }
func (m *metrics) Retried(priority string, n int) {
	m.retried.WithLabelValues(priority).Add(float64(n))
}
func (m *metrics) Dead(priority string, n int) { m.dead.WithLabelValues(priority).Add(float64(n)) }
func (m *metrics) TokensRenewed(n int)         { m.tokensRenewed.Add(float64(n)) }
func (m *metrics) Lateness(d time.Duration)    { m.lateness.Observe(d.Seconds()) }
func (m *metrics) TokenWait(d time.Duration)   { m.tokenWait.Observe(d.Seconds()) }
func (m *metrics) DeliveryFailed(r delivery.Reason, n int) {
	m.failures.WithLabelValues(string(r)).Add(float64(n))
}
func (m *metrics) TokenTimeouts(policyID string, n int) {
	m.tokenTimeouts.WithLabelValues(policyID).Add(float64(n))
}
func (m *metrics) TokensInUse(policyID string, n int) {
	m.tokensInUse.WithLabelValues(policyID).Set(float64(n))
}
func (m *metrics) TokensWaiting(policyID string, n int) {
	m.tokensWaiting.WithLabelValues(policyID).Set(float64(n))
}
func (m *metrics) OldestWaiting(ages map[handler.WaitingKey]time.Duration) {
	m.oldestWaiting.Reset()
	for k, d := range ages {
		m.oldestWaiting.WithLabelValues(k.Policy, k.Priority).Set(d.Seconds())
	}
}
func (m *metrics) PolicyGone(policyID string) {
	m.tokenTimeouts.DeleteLabelValues(policyID)
	m.tokensInUse.DeleteLabelValues(policyID)
	m.tokensWaiting.DeleteLabelValues(policyID)
	m.effectiveLimit.DeleteLabelValues(policyID)
	m.limitSource.DeletePartialMatch(prometheus.Labels{"policy": policyID})
}

// EffectiveLimit exports a policy's effective limit
// (schedulerd_policy_effective_limit{policy}).
func (m *metrics) EffectiveLimit(policyID string, limit int) {
	m.effectiveLimit.WithLabelValues(policyID).Set(float64(limit))
}

// LimitSource exports where a policy's effective limit comes from
// (schedulerd_policy_limit_source{policy,source} 1, one series a policy).
func (m *metrics) LimitSource(policyID, source string) {
	m.limitSource.DeletePartialMatch(prometheus.Labels{"policy": policyID})
	m.limitSource.WithLabelValues(policyID, source).Set(1)
}

var _ throttle.Metrics = (*metrics)(nil)

// FireDeadlineMissed counts a missed deadline
// (schedulerd_fire_deadline_missed_total{policy}).
func (m *metrics) FireDeadlineMissed(_ *model.Fire, policyID string) {
	m.deadlineMissed.WithLabelValues(policyID).Inc()
}

var _ master.DeadlineObserver = (*metrics)(nil)

// exportStoreSpace exports the embedded store's report of its disk space.
func (m *metrics) exportStoreSpace(space func() embedded.SpaceStatus) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "schedulerd_store_reserve_bytes",
		Help: "Disk space the embedded store's file keeps allocated past its data, which its writes take on a full disk.",
	}, func() float64 { return float64(space().Reserved) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "schedulerd_store_out_of_space",
		Help: "1 while the embedded store's writes fail for lack of disk space (until space is freed), else 0.",
	}, func() float64 {
		if space().Full {
			return 1
		}
		return 0
	}))
}

// exportStoreCommits exports the embedded store's write transactions and
// the writes they carried.
func (m *metrics) exportStoreCommits(commits func() embedded.CommitStats) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "schedulerd_store_commits_total",
		Help: "Write transactions the embedded store committed, each one disk sync: concurrent writes share one (group commit).",
	}, func() float64 { return float64(commits().Commits) }))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "schedulerd_store_writes_total",
		Help: "Writes the embedded store's committed transactions carried; divided by schedulerd_store_commits_total, the writes a commit.",
	}, func() float64 { return float64(commits().Writes) }))
}

// exportHeld exports the claimed events the handler holds in memory now
// and the most it held right after a claim.
func (m *metrics) exportHeld(held, peak func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "schedulerd_events_held",
		Help: "Claimed events held in memory (timer heap, throttle queues, delivery queues, deliveries, outcomes not yet written); at most -max-held-events.",
	}, func() float64 { return float64(held()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "schedulerd_events_held_peak",
		Help: "The most claimed events held in memory right after a claim since the start.",
	}, func() float64 { return float64(peak()) }))
}

// countForwards exports n, the releases and extends this instance forwarded
// to the owner of their event's policy.
func (m *metrics) countForwards(n func() int64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "schedulerd_token_forwards_total",
		Help: "Releases and extends forwarded to the instance that owns the event's policy (store=mongo).",
	}, func() float64 { return float64(n()) }))
}
