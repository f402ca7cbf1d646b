package throttle

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// bucket is one policy's waiting events on its owner. One goroutine (run)
// takes tokens and hands events out, so the bucket is serialised.
type bucket struct {
	t        *Throttle
	policyID string
	shard    int
	fence    int64

	mu     sync.Mutex
	q      *Queue
	policy *model.Policy
	// lim holds the policy's rate tokens (see rate.go); nil without a rate.
	lim *rate.Limiter
	// gifts are tokens handed over in this process (see handoff.go):
	// counted in the persisted InUse, not yet used by a waiting event.
	gifts  int
	closed bool // stopped: takes no more gifts
	// out counts the events taken from q that are in transit (transit.go).
	out int
	// finished: the run ended and q was drained; nothing is taken from it
	// again.
	finished bool
	// keys are the token holders by key value of a policy with a
	// concurrency key (keyed.go).
	keys holders
	// cap is what the policy's limit schedule allows (limits.go), from
	// its last evaluation until capNext (zero: it never changes by
	// itself); capDirty: the policy changed since.
	cap      model.Cap
	capNext  time.Time
	capDirty bool
	capTimer clockwork.Timer

	// Owned by the run goroutine: when the store last had no free token
	// (zero: it had), and whether gifts were used since. While tokens
	// circulate as gifts the store has none free either, so it is asked
	// again only after PollInterval, not after every gift.
	starvedAt   time.Time
	giftedSince bool
	// progressAt is when the bucket last handed out tokens. A bucket with
	// events waiting and no progress for stallReconcile reconciles at once
	// instead of at the next ReconcileInterval: leaked tokens (an owner that
	// died after acquiring) are repaired only while tokens do not move, and
	// a bucket starved by its leaks is exactly such a quiet moment.
	progressAt time.Time

	wake     chan struct{} // events were added
	released chan struct{} // a token went back
	cancel   context.CancelFunc
	once     sync.Once

	// starts are the delivering writes in flight: the next tokens are
	// acquired while the previous batch is being written. At most
	// maxStarts run at once; reconciliation waits for all of them.
	starts   sync.WaitGroup
	startSem chan struct{}

	// slow is the slowest store call of this bucket in the last minute or
	// so (slowAt: when that window began); see settle.
	slowMu sync.Mutex
	slow   time.Duration
	slowAt time.Time
}

// observe records how long one of the bucket's store calls took.
func (b *bucket) observe(start time.Time) {
	now := b.t.deps.Clock.Now()
	d := now.Sub(start)
	b.slowMu.Lock()
	defer b.slowMu.Unlock()
	if now.Sub(b.slowAt) > time.Minute {
		b.slow, b.slowAt = 0, now
	}
	b.slow = max(b.slow, d)
}

// settle is the pause between reconciliation readings: ReconcileSettle, or
// twice the slowest recent store call if that is longer. A token write
// of another process (a release's token return, the start of an owner that
// just lost the shard) that the store delays between its readings looks
// exactly like a leak; repairing it would count one token too few and let
// one event too many out. Its delay is that of this bucket's own calls
// (they queue on the same policy document), so the readings must span
// several of them. It is capped at maxSettle: a leak starves the bucket
// until it is repaired, and while instances die a bucket lives a few tens of
// seconds before its shard moves (long runs with caps of one minute and of
// 10 s repaired leaks only after the kills stopped, and drained at a third
// of the speed).
func (b *bucket) settle() time.Duration {
	b.slowMu.Lock()
	defer b.slowMu.Unlock()
	return max(b.t.cfg.ReconcileSettle, min(2*b.slow, maxSettle))
}

const maxStarts = 16

// maxSettle caps settle.
const maxSettle = 3 * time.Second

func (b *bucket) stop() { b.once.Do(b.cancel) }

func (b *bucket) setPolicy(p *model.Policy) {
	now := b.t.deps.Clock.Now()
	b.mu.Lock()
	key := ""
	if b.policy != nil {
		key = b.policy.ConcurrencyKey
	}
	old := b.policy
	b.policy = p
	b.rekeyLocked(key)
	before := rateOf(b.lim)
	b.lim = rateLimiter(b.lim, ratePolicy(p, b.cap), now)
	changed := rateOf(b.lim) != before
	limits := limitsChanged(old, p)
	b.capDirty = b.capDirty || limits
	b.mu.Unlock()
	if changed || limits {
		// A bucket waiting for rate tokens recomputes its wait.
		signal(b.wake)
	}
}

func (b *bucket) limiter() *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lim
}

// newQueue returns b's queue (NewKeyedQueue's keyOf) ordered by
// urgency: its time per event is 1 / the policy's throughput, with the
// hold time measured here when there is one. Queue calls hold b.mu.
func (b *bucket) newQueue(keyOf func(*model.Event) string) *Queue {
	q := NewKeyedQueue(keyOf)
	q.SetUrgency(Urgency{Now: b.t.deps.Clock.Now, PerEvent: func() time.Duration {
		if b.policy == nil {
			return 0
		}
		p := *b.policy
		if h, ok := b.t.HoldTime(b.policyID); ok {
			p.HoldTime = h
		}
		r, ok := p.Throughput()
		if !ok || r <= 0 {
			return 0
		}
		return time.Duration(float64(time.Second) / r)
	}})
	return q
}

func (b *bucket) getPolicy() *model.Policy {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.policy
}

type roundResult int

const (
	roundIdle    roundResult = iota // nothing waits
	roundStarved                    // events wait, no tokens free
	roundError                      // store trouble; wait and try again
	roundGone                       // the policy was deleted
	roundRate                       // events wait for the policy's rate
	// roundKeysAtBound: events wait, each of a key at its bound; one of
	// another key, enqueued later, may go at once.
	roundKeysAtBound
)

func (b *bucket) run(ctx context.Context) {
	t := b.t
	clock := t.deps.Clock
	poll := clock.NewTimer(t.cfg.PollInterval)
	defer poll.Stop()
	// A new owner first repairs the persisted count of tokens out (once
	// the shard has settled; until then it only loads the policy).
	for ctx.Err() == nil {
		err := b.reconcile(ctx)
		if err == nil {
			break
		}
		if errors.Is(err, model.ErrNotFound) {
			// Deleted policy: dead-letter what waits, then sleep until
			// more arrives.
			b.policyGone(ctx)
			select {
			case <-ctx.Done():
				return
			case <-b.wake:
			}
			continue
		}
		if ctx.Err() == nil {
			t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Msg("bucket start failed; retrying")
		}
		if !sleepCtx(ctx, clock, t.cfg.PollInterval*4) {
			return
		}
	}
	// From here on the bucket takes hand-offs: its gifts are counted by
	// every later reconciliation.
	t.running.add(b)
	defer func() {
		t.running.remove(b)
		b.returnGifts(ctx)
	}()
	nextReconcile := clock.Now().Add(t.cfg.ReconcileInterval)
	lastReconcile := clock.Now()
	b.progressAt = clock.Now()
	for ctx.Err() == nil {
		if !clock.Now().Before(nextReconcile) {
			b.starts.Wait()
			err := b.reconcile(ctx)
			if errors.Is(err, model.ErrNotFound) {
				b.drop(ctx)
				break
			}
			if err != nil && ctx.Err() == nil {
				t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Msg("token reconciliation failed")
			}
			lastReconcile = clock.Now()
			nextReconcile = lastReconcile.Add(t.cfg.ReconcileInterval)
		}
		res := b.round(ctx)
		if res == roundGone {
			b.drop(ctx)
			break
		}
		starved := res == roundStarved || res == roundKeysAtBound
		if stall := b.stallReconcile(); starved && clock.Since(b.progressAt) >= stall && clock.Since(lastReconcile) >= stall {
			nextReconcile = clock.Now() // starved for a while: look for leaks now
		}
		b.mu.Lock()
		waiting := b.q.Len()
		b.mu.Unlock()
		t.deps.Metrics.TokensWaiting(b.policyID, waiting)
		switch res {
		case roundIdle:
			select {
			case <-ctx.Done():
			case <-b.wake:
			case <-b.released:
			case <-clock.After(clock.Until(nextReconcile)):
			}
		case roundRate:
			// Tokens that come back wait as gifts; only time brings
			// rate tokens.
			wait := min(rateWait(b.limiter(), clock.Now()), max(clock.Until(nextReconcile), 0))
			select {
			case <-ctx.Done():
			case <-b.wake: // more events, or the rate changed
			case <-clock.After(wait):
			}
		case roundStarved, roundError, roundKeysAtBound:
			// More events help only keys below their bound: a nil
			// channel never fires.
			var more <-chan struct{}
			if res == roundKeysAtBound {
				more = b.wake
			}
			poll.Reset(t.cfg.PollInterval)
			select {
			case <-ctx.Done():
			case <-more:
			case <-b.released:
			case <-poll.Chan():
			}
		}
	}
	// Dropped: the waiting events stay scheduled in the store and are
	// claimed again by the shard's next owner.
	b.starts.Wait()
	b.mu.Lock()
	b.q.Drain()
	b.finished = true
	if b.capTimer != nil {
		b.capTimer.Stop()
	}
	b.mu.Unlock()
}

// round hands out tokens until none are free or nothing waits.
func (b *bucket) round(ctx context.Context) roundResult {
	t := b.t
	b.applyLimits(ctx)
	if p := b.getPolicy(); p != nil && p.ConcurrencyKey != "" {
		return b.roundKeyed(ctx, p)
	}
	for ctx.Err() == nil {
		now := t.deps.Clock.Now()
		b.mu.Lock()
		n := b.q.Len()
		lim := b.lim
		var gifted []Item
		surplus := 0
		if b.gifts > n {
			surplus = b.gifts - n
			b.gifts = n
		}
		if b.gifts > 0 {
			gifted = b.q.PopN(rateAvailable(lim, now, min(b.gifts, t.cfg.AcquireBatch)))
			b.takenLocked(gifted)
			b.gifts -= len(gifted)
			rateTake(lim, now, len(gifted))
		}
		b.mu.Unlock()
		if surplus > 0 {
			_ = returnTokens(ctx, t.deps.Store, b.policyID, surplus, 0)
		}
		if len(gifted) > 0 {
			// Tokens handed over in this process: no acquisition needed.
			granted(gifted, t.deps.Clock.Now())
			b.giftedSince = true
			if !b.startAsync(ctx, gifted) {
				return roundIdle
			}
			continue
		}
		if n == 0 {
			return roundIdle
		}
		if !b.starvedAt.IsZero() && b.giftedSince && t.deps.Clock.Since(b.starvedAt) < t.cfg.PollInterval {
			return roundStarved
		}
		want := rateAvailable(lim, now, min(n, t.cfg.AcquireBatch))
		if want == 0 {
			return roundRate
		}
		began := t.deps.Clock.Now()
		want, err := b.headroom(ctx, want)
		got := 0
		if err == nil && want > 0 {
			got, err = t.deps.Store.PolicyAcquireTokens(ctx, b.policyID, want)
			b.acquired(got)
		}
		b.observe(began)
		if errors.Is(err, model.ErrNotFound) {
			return roundGone
		}
		if err != nil {
			if ctx.Err() == nil {
				t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Msg("acquire tokens failed")
			}
			return roundError
		}
		b.giftedSince = false
		if got == 0 {
			b.starvedAt = t.deps.Clock.Now()
			return roundStarved
		}
		b.starvedAt = time.Time{}
		b.mu.Lock()
		items := b.q.PopN(got)
		b.takenLocked(items)
		rateTake(lim, now, len(items))
		b.mu.Unlock()
		granted(items, t.deps.Clock.Now())
		if extra := got - len(items); extra > 0 {
			_ = returnTokens(ctx, t.deps.Store, b.policyID, extra, 0)
		}
		if !b.startAsync(ctx, items) {
			return roundIdle
		}
		if got < want {
			b.starvedAt = t.deps.Clock.Now()
			return roundStarved
		}
	}
	return roundIdle
}

// drop ends the bucket of a deleted policy: nothing is left to throttle or
// reconcile. Events of the policy that arrive later start a new bucket,
// which dead-letters them.
func (b *bucket) drop(ctx context.Context) {
	t := b.t
	t.mu.Lock()
	if t.buckets[b.policyID] == b {
		delete(t.buckets, b.policyID)
	}
	t.mu.Unlock()
	t.adapt.forget(b.policyID)
	b.policyGone(ctx)
	t.deps.Metrics.PolicyGone(b.policyID)
	t.log.Info().Str(logkey.Policy, b.policyID).Msg("policy deleted; its bucket is dropped")
	b.stop()
}

// policyGone sends the waiting events of a deleted policy to dead: they
// cannot be throttled, and delivering them unthrottled could flood the
// consumer the policy protected. They can be redriven.
func (b *bucket) policyGone(ctx context.Context) {
	t := b.t
	b.mu.Lock()
	items := b.q.Drain()
	b.takenLocked(items) // in memory until written dead
	b.mu.Unlock()
	if len(items) == 0 {
		return
	}
	now := t.deps.Clock.Now()
	ts := make([]store.EventTransition, len(items))
	for i, it := range items {
		ts[i] = store.Dead(it.Event.ID, model.EventScheduled, it.Fence, 0, "policy "+b.policyID+" not found", false, now)
	}
	res, err := t.deps.Store.EventTransition(ctx, ts)
	if err != nil {
		t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Msg("dead-lettering events of a missing policy failed")
		b.requeue(items)
		return
	}
	b.doneTransit(len(items))
	dead := 0
	byClass := map[string]int{}
	for i, e := range res {
		if e == nil {
			dead++
			byClass[model.PriorityClass(items[i].Event.Priority)]++
		}
	}
	for c, n := range byClass {
		t.deps.Metrics.Dead(c, n)
	}
	t.log.Warn().Str(logkey.Policy, b.policyID).Int("events", dead).Msg("policy not found; events dead-lettered")
}

// granted stamps items with the moment they got their tokens.
func granted(items []Item, at time.Time) {
	for i := range items {
		items[i].TokenAt = at
	}
}

func sleepCtx(ctx context.Context, clock interface {
	After(time.Duration) <-chan time.Time
}, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-clock.After(d):
		return true
	}
}
