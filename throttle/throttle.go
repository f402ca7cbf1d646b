// Package throttle keeps the token buckets of throttling policies.
//
// A policy allows at most MaxInFlight events to hold a token at once, summed
// over all instances. The count of tokens out (Policy.InUse) lives in the
// store and changes only by compare-and-set (PolicyAcquireTokens never lets
// it exceed MaxInFlight), so the bound holds whatever the concurrency; a
// bucket in memory only decides which waiting event gets the next token.
//
// A policy with a RatePerSecond also needs a rate token per event, from a
// token bucket kept by the policy's bucket in memory (see rate.go).
//
// Events of a throttled policy all live on one queue shard (model.ShardOf),
// so the handler that owns that shard is the one owner of the policy's
// bucket and serialises it: one goroutine per bucket acquires tokens in small
// batches, moves the chosen events from scheduled to delivering (with the
// shard's lease fence and TokenExpiresAt) and hands them to the handler's
// workers over the Dispatched channel.
//
// The runtime builds one Throttle per process and passes it to the handler
// (which enqueues due events and delivers what comes out of Dispatched) and
// to the master (which releases and extends tokens through it).
//
// Releases come first (the seed's "released events with the highest
// priority"). A Throttle is passed to whoever releases tokens in its process
// (the master's release endpoint, the handler's failed deliveries): its
// Release and ReturnTokens hand a token straight to the next event waiting
// in its own bucket of the policy, without a store write (see handoff.go),
// or else give it back to the store and wake the bucket. The package-level
// Release, for callers without a Throttle, only gives it back to the store.
// Releases made on another instance are seen by polling PolicyAcquireTokens
// every PollInterval while events wait and no wake-up came.
package throttle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/internal/startstop"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Store is what the throttle needs from the store.
type Store interface {
	ReleaseStore
	PolicyGetByID(ctx context.Context, id string) (*model.Policy, error)
	PolicyListAll(ctx context.Context) ([]*model.Policy, error)
	PolicyAcquireTokens(ctx context.Context, policyID string, want int) (int, error)
	PolicySetInUse(ctx context.Context, policyID string, expectedVersion int64, expectedInUse, inUse int) error
	EventFindTokenExpired(ctx context.Context, policyID string, t time.Time, limit int) ([]*model.Event, error)
	EventCountHoldingTokens(ctx context.Context, policyID string) (int, error)
	// EventGetByID reads events back after a write that may have applied.
	EventGetByID(ctx context.Context, id string) (*model.Event, error)
}

// CapSource says what a policy's limit schedule allows at an instant.
type CapSource interface {
	PolicyCap(ctx context.Context, p *model.Policy, now time.Time) (model.Cap, error)
}

// Shards tells which event queue shards this instance owns and under which
// lease fence. *lease.Balancer satisfies it.
type Shards interface {
	Held() map[int]int64
	Owns(shard int, fence int64) bool
}

// Metrics receives the throttle's counters and gauges.
type Metrics interface {
	// TokenTimeouts counts tokens reclaimed because they were not released
	// within the policy's tokenTimeout.
	TokenTimeouts(policyID string, n int)
	// TokensInUse reports the persisted number of tokens out.
	TokensInUse(policyID string, n int)
	// TokensWaiting reports how many events wait in the bucket.
	TokensWaiting(policyID string, n int)
	// Dead counts events moved to dead, by model.PriorityClass.
	Dead(priority string, n int)
	// Retried counts failed attempts that will be tried again (a timed
	// out token of an event still delivering included), by
	// model.PriorityClass.
	Retried(priority string, n int)
	// PolicyGone forgets the series of a deleted policy.
	PolicyGone(policyID string)
	// EffectiveLimit reports a policy's effective limit when it changes:
	// its adaptive limit, limit schedule and hold applied (see
	// Throttle.Effective).
	EffectiveLimit(policyID string, limit int)
	// LimitSource reports where the effective limit comes from when that
	// changes (model.LimitSource*, or "limits[i]").
	LimitSource(policyID, source string)
}

// NopMetrics discards everything.
type NopMetrics struct{}

func (NopMetrics) TokenTimeouts(string, int)  {}
func (NopMetrics) TokensInUse(string, int)    {}
func (NopMetrics) TokensWaiting(string, int)  {}
func (NopMetrics) Dead(string, int)           {}
func (NopMetrics) Retried(string, int)        {}
func (NopMetrics) PolicyGone(string)          {}
func (NopMetrics) EffectiveLimit(string, int) {}
func (NopMetrics) LimitSource(string, string) {}

// Config configures a Throttle. Zero values take the defaults.
type Config struct {
	// Shards is the number of event queue shards K (as in model.ShardOf).
	// Default 16.
	Shards int
	// PollInterval is how often a bucket with waiting events and no free
	// tokens asks the store again when no release wake-up came (releases made
	// on other instances). Default 50ms.
	PollInterval time.Duration
	// AcquireBatch is the most tokens taken in one PolicyAcquireTokens.
	// Default 32.
	AcquireBatch int
	// DefaultTokenTimeout applies to policies whose TokenTimeout is zero.
	// Default 5m.
	DefaultTokenTimeout time.Duration
	// DefaultMaxAttempts applies to events whose MaxAttempts is zero.
	// Default model.DefaultMaxAttempts.
	DefaultMaxAttempts int
	// ReconcileInterval is how often a bucket owner recounts the events that
	// hold tokens and repairs the persisted InUse. Default 1m.
	ReconcileInterval time.Duration
	// ReconcileSettle is how long a reconciliation that found InUse and
	// the token-holding events apart waits between its readings; only a
	// mismatch that did not move across three readings is repaired (a
	// release in flight is not a leak). While the store is slow the pause
	// grows to twice the bucket's slowest store call of the last minute
	// (at most 3 s). Default 1s.
	ReconcileSettle time.Duration
	// ReclaimBatch is the most expired tokens reclaimed per store call.
	// Default 500.
	ReclaimBatch int
	// EarlyDispatch sends the event that a release hands its token to
	// before the commit that records the release and the event's start is
	// durable, which takes that commit out of the token cycle (see
	// early.go). Only for a store that this process uses alone, the
	// embedded store: every release and reclaim must go through this
	// Throttle. Default false.
	EarlyDispatch bool
	// DrainTimeout bounds how long Stop waits for the buckets' goroutines
	// before it cancels their store calls. Default 10s.
	DrainTimeout time.Duration
}

func (c *Config) validate() error {
	c.Shards = cmp.Or(c.Shards, 16)
	c.PollInterval = cmp.Or(c.PollInterval, 50*time.Millisecond)
	c.AcquireBatch = cmp.Or(c.AcquireBatch, 32)
	c.DefaultTokenTimeout = cmp.Or(c.DefaultTokenTimeout, 5*time.Minute)
	c.DefaultMaxAttempts = cmp.Or(c.DefaultMaxAttempts, model.DefaultMaxAttempts)
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, time.Minute)
	c.ReconcileSettle = cmp.Or(c.ReconcileSettle, time.Second)
	c.ReclaimBatch = cmp.Or(c.ReclaimBatch, 500)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, 10*time.Second)
	var errs []error
	for _, d := range []struct {
		v    time.Duration
		name string
	}{
		{c.PollInterval, "PollInterval"}, {c.DefaultTokenTimeout, "DefaultTokenTimeout"},
		{c.ReconcileInterval, "ReconcileInterval"}, {c.ReconcileSettle, "ReconcileSettle"},
		{c.DrainTimeout, "DrainTimeout"},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("throttle config: %s must be positive, got %s", d.name, d.v))
		}
	}
	for _, n := range []struct {
		v    int
		name string
	}{
		{c.Shards, "Shards"}, {c.AcquireBatch, "AcquireBatch"},
		{c.DefaultMaxAttempts, "DefaultMaxAttempts"}, {c.ReclaimBatch, "ReclaimBatch"},
	} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("throttle config: %s must be positive, got %d", n.name, n.v))
		}
	}
	return errors.Join(errs...)
}

// Deps are the throttle's collaborators.
type Deps struct {
	Store  Store
	Shards Shards
	// Limits, if set, records the effective limits of adaptive policies
	// (the store). Nil: they are kept in memory only.
	Limits LimitStore
	// Caps, if set, evaluates policies' limit schedules
	// (model.Policy.Limits). Nil: limit schedules are ignored; holds
	// still apply.
	Caps CapSource
	// Holds, if set, records each policy's measured hold time (the
	// store), which completion forecasts divide by. Nil: not recorded.
	Holds HoldStore
	// Clock defaults to the real clock.
	Clock   clockwork.Clock
	Logger  zerolog.Logger
	Metrics Metrics
	// Reclaimed, if set, is called with the events whose tokens timed out,
	// after their compare-and-set won and before the tokens go back to the
	// bucket (a test hook: a consumer stops counting them).
	Reclaimed func(events []*model.Event)
}

// Throttle holds the buckets of the policies whose shard this instance owns.
// The events that take tokens come out of Dispatched.
type Throttle struct {
	startstop.Base
	cfg  Config
	deps Deps
	log  zerolog.Logger

	// out hands events that now hold a token to their deliverer.
	out chan Item
	// settled maps a shard to the fence it settled under (MarkSettled).
	settled sync.Map // int → int64

	mu      sync.Mutex
	ctx     context.Context // the run context; nil until Start
	buckets map[string]*bucket
	// live are the buckets that may hold events in memory: buckets too,
	// and stopped ones until their run ended and nothing of theirs is in
	// transit (see Holding).
	live    map[*bucket]struct{}
	stopped bool

	// running are the buckets that take hand-offs (see handoff.go); unlike
	// buckets, it keeps a replaced bucket until its run ends.
	running runningBuckets
	// slots serialise the releases and reclaims of each event.
	slots eventSlots
	// delivered are the events the handler delivered whose outcome is not
	// written yet (EarlyDispatch only).
	delivered deliveredSet
	// acked are events acknowledged while they may wait in a bucket here
	// (see acknowledgeSent), which an early dispatch must not send.
	acked ackedSet
	// adapt holds the adaptive policies' limits (see adaptive.go).
	adapt adaptiveSet
	// holds measures the policies' hold times (see hold.go).
	holds holdSet
}

// New validates cfg and returns a Throttle; call Start before Enqueue.
func New(cfg Config, deps Deps) (*Throttle, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil {
		return nil, errors.New("throttle deps: Store is required")
	}
	if deps.Shards == nil {
		return nil, errors.New("throttle deps: Shards is required")
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	if deps.Metrics == nil {
		deps.Metrics = NopMetrics{}
	}
	return &Throttle{cfg: cfg, deps: deps, log: deps.Logger.With().Str(logkey.Component, "throttle").Logger(),
		buckets: map[string]*bucket{}, live: map[*bucket]struct{}{}, out: make(chan Item)}, nil
}

// Config returns the validated configuration.
func (t *Throttle) Config() Config { return t.cfg }

// Start lets buckets run until Stop. A second Start, or a Start after Stop,
// does nothing.
func (t *Throttle) Start(ctx context.Context) error {
	run, ok := t.StartInit(ctx, t.cfg.DrainTimeout)
	if !ok {
		return nil
	}
	t.mu.Lock()
	if t.ctx == nil && !t.stopped {
		t.ctx = run
	}
	t.mu.Unlock()
	t.Started()
	return nil
}

// Stop stops every bucket and waits for their goroutines until
// Config.DrainTimeout, then cancels their store calls. Waiting events are
// left in the store as scheduled (the next owner of the shard claims them
// again); events that took a token and were not taken from Dispatched are
// handed back. Safe to call twice or before Start.
func (t *Throttle) Stop() {
	t.Base.Stop(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.stopped = true
		for _, b := range t.buckets {
			b.stop()
		}
		t.buckets = map[string]*bucket{}
	})
}

// Dispatched delivers the events that took a token, in status delivering
// (Item.Policy set). Whoever receives one is responsible for it: deliver it,
// or give it back (HandBack).
func (t *Throttle) Dispatched() <-chan Item { return t.out }

// send hands items to Dispatched; once the throttle stops, the items not
// taken go back.
func (t *Throttle) send(items []Item) {
	stopping := t.Stopping()
	for i, it := range items {
		select {
		case t.out <- it:
		case <-stopping:
			settleItems(items[i:])
			t.HandBack(context.Background(), items[i:])
			return
		}
	}
}

// MarkSettled records that every event of shard that its previous owners had
// scheduled has been claimed again under fence (a claim under fence came back
// short). Until then a start that a previous owner sent before it died or
// lost the lease may still land, holding a token that the persisted InUse
// counts but no event shows yet: a reconciliation would take it for a leak,
// and once the start landed one event too many could be out. Reconciliation
// waits for it.
func (t *Throttle) MarkSettled(shard int, fence int64) { t.settled.Store(shard, fence) }

func (t *Throttle) isSettled(shard int, fence int64) bool {
	f, ok := t.settled.Load(shard)
	return ok && f.(int64) == fence
}

// Enqueue adds launched events of throttled policies to their buckets. Items
// claimed under an older fence than the bucket's are dropped; a newer fence
// replaces the bucket (the shard changed owner and came back). A bucket
// takes its items of one call at once: a round, even the first round of a
// bucket the call starts, sees all of them or none, so that the keys and
// priorities of one launch are ordered among each other.
func (t *Throttle) Enqueue(items ...Item) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil || t.stopped {
		return
	}
	groups := map[*bucket][]Item{}
	for _, it := range items {
		b := t.bucketLocked(it.Event.PolicyID, it.Shard, it.Fence)
		if b == nil {
			continue
		}
		groups[b] = append(groups[b], it)
	}
	for b, its := range groups {
		b.mu.Lock()
		for _, it := range its {
			b.q.Push(it)
		}
		b.mu.Unlock()
		signal(b.wake)
	}
}

// bucketLocked returns the bucket of policyID under fence, creating and
// starting it if needed; nil if the fence is older than the bucket's.
func (t *Throttle) bucketLocked(policyID string, shard int, fence int64) *bucket {
	b := t.buckets[policyID]
	if b != nil && b.fence == fence {
		return b
	}
	if b != nil && b.fence > fence {
		return nil
	}
	if b != nil {
		b.stop()
	}
	ctx, cancel := context.WithCancel(t.ctx)
	b = &bucket{t: t, policyID: policyID, shard: shard, fence: fence,
		wake: make(chan struct{}, 1), released: make(chan struct{}, 1), cancel: cancel,
		startSem: make(chan struct{}, maxStarts)}
	b.q = b.newQueue(nil)
	t.buckets[policyID] = b
	t.live[b] = struct{}{}
	t.Go(func() { b.run(ctx) })
	return b
}

// Released tells the bucket of policyID, if this instance owns it, that a
// token went back, so that the next waiting event goes at once. It never
// blocks. A keyed bucket counts its holders again (the token's event is
// not named).
func (t *Throttle) Released(policyID string) {
	t.mu.Lock()
	b := t.buckets[policyID]
	t.mu.Unlock()
	if b != nil {
		b.markStale()
		signal(b.released)
	}
}

// wakeReleased is Released after a release that told the bucket its event
// (releasedHolder).
func (t *Throttle) wakeReleased(policyID string) {
	t.mu.Lock()
	b := t.buckets[policyID]
	t.mu.Unlock()
	if b != nil {
		signal(b.released)
	}
}

// SyncShards drops the buckets of shards that are no longer held under the
// same fence. Their waiting events stay scheduled in the store; the shard's
// new owner claims them again.
func (t *Throttle) SyncShards(held map[int]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, b := range t.buckets {
		if f, ok := held[b.shard]; !ok || f != b.fence {
			b.stop()
			delete(t.buckets, id)
		}
	}
}

// Waiting returns how many events wait in policyID's bucket.
func (t *Throttle) Waiting(policyID string) int {
	t.mu.Lock()
	b := t.buckets[policyID]
	t.mu.Unlock()
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.q.Len()
}

// ReturnTokens gives n tokens of policyID back (a dispatched event could not
// be delivered and its holding transition won) and wakes the bucket.
func (t *Throttle) ReturnTokens(ctx context.Context, policyID string, n int) error {
	if n <= 0 {
		return nil
	}
	// Tokens go first to events waiting in t's buckets (no store write).
	n -= t.handOff(policyID, n)
	err := returnTokens(ctx, t.deps.Store, policyID, n, 0)
	t.Released(policyID)
	return err
}

// TokenTimeout returns the token timeout that applies to p.
func (t *Throttle) TokenTimeout(p *model.Policy) time.Duration {
	if p != nil && p.TokenTimeout > 0 {
		return p.TokenTimeout
	}
	return t.cfg.DefaultTokenTimeout
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// OldestWaiting returns, per policy with events waiting for a token in
// this instance's buckets, the earliest LaunchAt among them per priority.
// It reads every waiting event (see Queue.Oldest).
func (t *Throttle) OldestWaiting() map[string]map[int]time.Time {
	t.mu.Lock()
	bs := make([]*bucket, 0, len(t.buckets))
	for _, b := range t.buckets {
		bs = append(bs, b)
	}
	t.mu.Unlock()
	out := make(map[string]map[int]time.Time, len(bs))
	for _, b := range bs {
		b.mu.Lock()
		if b.q.Len() > 0 {
			out[b.policyID] = b.q.Oldest()
		}
		b.mu.Unlock()
	}
	return out
}

// HandBack returns events that took a token but were not sent to pending and
// gives their tokens back. An item sent early (Item.Started) goes back once
// its start is written.
func (t *Throttle) HandBack(ctx context.Context, items []Item) {
	if len(items) == 0 {
		return
	}
	for _, it := range items {
		if it.Started != nil {
			<-it.Started
		}
	}
	now := t.deps.Clock.Now()
	ts := make([]store.EventTransition, len(items))
	for i, it := range items {
		ts[i] = store.HandBack(it.Event.ID, it.Fence, now)
	}
	res, err := t.deps.Store.EventTransition(ctx, ts)
	if err != nil {
		// They keep their tokens until the tokens time out; the reclaim
		// then makes them retrying.
		t.log.Warn().Err(err).Int("events", len(items)).Msg("handing back events failed")
		return
	}
	back := map[string]int{}
	for i, it := range items {
		if res[i] == nil {
			back[it.Event.PolicyID]++
		}
	}
	for pid, n := range back {
		if err := t.ReturnTokens(ctx, pid, n); err != nil {
			t.log.Warn().Err(err).Str(logkey.Policy, pid).Msg("returning tokens failed")
		}
	}
}
