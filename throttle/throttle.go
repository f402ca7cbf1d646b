// Package throttle keeps the token buckets of throttling policies.
//
// A policy allows at most MaxInFlight events to hold a token at once, summed
// over all instances. The count of tokens out (Policy.InUse) lives in the
// store and changes only by compare-and-set (PolicyAcquireTokens never lets
// it exceed MaxInFlight), so the bound holds whatever the concurrency; a
// bucket in memory only decides which waiting event gets the next token.
//
// Events of a throttled policy all live on one queue shard (model.ShardOf),
// so the handler that owns that shard is the one owner of the policy's
// bucket and serialises it: one goroutine per bucket acquires tokens in small
// batches, moves the chosen events from scheduled to delivering (with the
// shard's lease fence and TokenExpiresAt) and hands them to the handler.
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
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
)

// Store is what the throttle needs from the store.
type Store interface {
	ReleaseStore
	PolicyGetByID(ctx context.Context, id string) (*model.Policy, error)
	PolicyListAll(ctx context.Context) ([]*model.Policy, error)
	PolicyAcquireTokens(ctx context.Context, policyID string, want int) (int, error)
	PolicySetInUse(ctx context.Context, policyID string, expectedVersion int64, inUse int) error
	EventFindTokenExpired(ctx context.Context, policyID string, t time.Time, limit int) ([]*model.Event, error)
	EventCountHoldingTokens(ctx context.Context, policyID string) (int, error)
	// EventGetByID reads events back after a write that may have applied.
	EventGetByID(ctx context.Context, id string) (*model.Event, error)
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
	// Dead counts events moved to dead.
	Dead(n int)
}

// NopMetrics discards everything.
type NopMetrics struct{}

func (NopMetrics) TokenTimeouts(string, int) {}
func (NopMetrics) TokensInUse(string, int)   {}
func (NopMetrics) TokensWaiting(string, int) {}
func (NopMetrics) Dead(int)                  {}

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
}

func (c *Config) validate() error {
	def := func(d *time.Duration, v time.Duration, name string) error {
		if *d == 0 {
			*d = v
		}
		if *d < 0 {
			return fmt.Errorf("throttle config: %s must be positive, got %s", name, *d)
		}
		return nil
	}
	defInt := func(i *int, v int, name string) error {
		if *i == 0 {
			*i = v
		}
		if *i < 0 {
			return fmt.Errorf("throttle config: %s must be positive, got %d", name, *i)
		}
		return nil
	}
	return errors.Join(
		defInt(&c.Shards, 16, "Shards"),
		def(&c.PollInterval, 50*time.Millisecond, "PollInterval"),
		defInt(&c.AcquireBatch, 32, "AcquireBatch"),
		def(&c.DefaultTokenTimeout, 5*time.Minute, "DefaultTokenTimeout"),
		defInt(&c.DefaultMaxAttempts, model.DefaultMaxAttempts, "DefaultMaxAttempts"),
		def(&c.ReconcileInterval, time.Minute, "ReconcileInterval"),
		def(&c.ReconcileSettle, time.Second, "ReconcileSettle"),
		defInt(&c.ReclaimBatch, 500, "ReclaimBatch"),
	)
}

// Deps are the throttle's collaborators.
type Deps struct {
	Store  Store
	Shards Shards
	// Clock defaults to the real clock.
	Clock   clockwork.Clock
	Logger  zerolog.Logger
	Metrics Metrics
	// Dispatch receives events that now hold a token and are in status
	// delivering (Item.Policy set). It takes responsibility for each: deliver
	// it, or give its token back. Required.
	Dispatch func(items []Item)
	// Reclaimed, if set, is called with the events whose tokens timed out,
	// after their compare-and-set won and before the tokens go back to the
	// bucket (a test hook: a consumer stops counting them).
	Reclaimed func(events []*model.Event)
	// Settled reports whether every event of shard that its previous owners
	// had scheduled has been claimed again under fence (a claim under fence
	// came back short). Until then a start that a previous owner sent
	// before it died or lost the lease may still land, holding a token
	// that the persisted InUse counts but no event shows yet: a
	// reconciliation would take it for a leak, and once the start landed
	// one event too many could be out. Reconciliation waits for it. Nil:
	// always settled (a single process).
	Settled func(shard int, fence int64) bool
}

// Throttle holds the buckets of the policies whose shard this instance owns.
type Throttle struct {
	cfg  Config
	deps Deps
	log  zerolog.Logger

	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	buckets map[string]*bucket
	wg      sync.WaitGroup
	stopped bool

	// running are the buckets that take hand-offs (see handoff.go); unlike
	// buckets, it keeps a replaced bucket until its run ends.
	running runningBuckets
	// slots serialise the releases and reclaims of each event.
	slots eventSlots
	// delivered are the events the handler delivered whose outcome is not
	// written yet (EarlyDispatch only).
	delivered deliveredSet
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
	if deps.Dispatch == nil {
		return nil, errors.New("throttle deps: Dispatch is required")
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	if deps.Metrics == nil {
		deps.Metrics = NopMetrics{}
	}
	return &Throttle{cfg: cfg, deps: deps, log: deps.Logger.With().Str(logkey.Component, "throttle").Logger(),
		buckets: map[string]*bucket{}}, nil
}

// Config returns the validated configuration.
func (t *Throttle) Config() Config { return t.cfg }

// Start lets buckets run until Stop or until ctx is cancelled.
func (t *Throttle) Start(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil {
		t.ctx, t.cancel = context.WithCancel(context.WithoutCancel(ctx))
		go func() {
			select {
			case <-ctx.Done():
				t.cancel()
			case <-t.ctx.Done():
			}
		}()
	}
	return nil
}

// Stop stops every bucket and waits for their goroutines. Waiting events are
// left in the store as scheduled (the next owner of the shard claims them
// again). Safe to call twice or before Start.
func (t *Throttle) Stop(ctx context.Context) {
	t.mu.Lock()
	t.stopped = true
	if t.cancel != nil {
		t.cancel()
	}
	t.buckets = map[string]*bucket{}
	t.mu.Unlock()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Enqueue adds launched events of throttled policies to their buckets. Items
// claimed under an older fence than the bucket's are dropped; a newer fence
// replaces the bucket (the shard changed owner and came back).
func (t *Throttle) Enqueue(items ...Item) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil || t.stopped {
		return
	}
	touched := map[*bucket]bool{}
	for _, it := range items {
		b := t.bucketLocked(it.Event.PolicyID, it.Shard, it.Fence)
		if b == nil {
			continue
		}
		b.mu.Lock()
		b.q.Push(it)
		b.mu.Unlock()
		touched[b] = true
	}
	for b := range touched {
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
	b = &bucket{t: t, policyID: policyID, shard: shard, fence: fence, q: NewQueue(),
		wake: make(chan struct{}, 1), released: make(chan struct{}, 1), cancel: cancel,
		startSem: make(chan struct{}, maxStarts)}
	t.buckets[policyID] = b
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		b.run(ctx)
	}()
	return b
}

// Released tells the bucket of policyID, if this instance owns it, that a
// token went back, so that the next waiting event goes at once. It never
// blocks.
func (t *Throttle) Released(policyID string) {
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

// WaitingAll returns how many events wait in all buckets.
func (t *Throttle) WaitingAll() int {
	t.mu.Lock()
	bs := make([]*bucket, 0, len(t.buckets))
	for _, b := range t.buckets {
		bs = append(bs, b)
	}
	t.mu.Unlock()
	n := 0
	for _, b := range bs {
		b.mu.Lock()
		n += b.q.Len()
		b.mu.Unlock()
	}
	return n
}
