package throttle

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

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
	// gifts are tokens handed over in this process (see handoff.go):
	// counted in the persisted InUse, not yet used by a waiting event.
	gifts  int
	closed bool // stopped: takes no more gifts

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
	b.mu.Lock()
	b.policy = p
	b.mu.Unlock()
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
			if err := b.reconcile(ctx); err != nil && ctx.Err() == nil {
				t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Msg("token reconciliation failed")
			}
			lastReconcile = clock.Now()
			nextReconcile = lastReconcile.Add(t.cfg.ReconcileInterval)
		}
		res := b.round(ctx)
		if stall := b.stallReconcile(); res == roundStarved && clock.Since(b.progressAt) >= stall && clock.Since(lastReconcile) >= stall {
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
		case roundStarved, roundError:
			poll.Reset(t.cfg.PollInterval)
			select {
			case <-ctx.Done():
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
	b.mu.Unlock()
}

// round hands out tokens until none are free or nothing waits.
func (b *bucket) round(ctx context.Context) roundResult {
	t := b.t
	for ctx.Err() == nil {
		b.mu.Lock()
		n := b.q.Len()
		var gifted []Item
		surplus := 0
		if b.gifts > n {
			surplus = b.gifts - n
			b.gifts = n
		}
		if b.gifts > 0 {
			gifted = b.q.PopN(min(b.gifts, t.cfg.AcquireBatch))
			b.gifts -= len(gifted)
		}
		b.mu.Unlock()
		if surplus > 0 {
			_ = returnTokens(ctx, t.deps.Store, b.policyID, surplus, 0)
		}
		if len(gifted) > 0 {
			// Tokens handed over in this process: no acquisition needed.
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
		want := min(n, t.cfg.AcquireBatch)
		began := t.deps.Clock.Now()
		got, err := t.deps.Store.PolicyAcquireTokens(ctx, b.policyID, want)
		b.observe(began)
		if errors.Is(err, model.ErrNotFound) {
			b.policyGone(ctx)
			return roundIdle
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
		b.mu.Unlock()
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

// startAsync runs start for items that hold tokens in a goroutine of its
// own (at most maxStarts at once), so that the next tokens are taken while
// this batch's delivering write commits. false if ctx ended first (the
// tokens went back).
func (b *bucket) startAsync(ctx context.Context, items []Item) bool {
	t := b.t
	select {
	case b.startSem <- struct{}{}:
	case <-ctx.Done():
		_ = returnTokens(context.WithoutCancel(ctx), t.deps.Store, b.policyID, len(items), 0)
		return false
	}
	b.progressAt = t.deps.Clock.Now()
	b.starts.Add(1)
	go func() {
		defer func() { <-b.startSem; b.starts.Done() }()
		_ = b.start(ctx, items)
	}()
	return true
}

// start moves items that got tokens from scheduled to delivering and
// dispatches the ones whose compare-and-set won; the tokens of the others go
// back. On a store outage the items go back into the queue.
func (b *bucket) start(ctx context.Context, items []Item) error {
	t := b.t
	p := b.getPolicy()
	now := t.deps.Clock.Now()
	exp := now.Add(t.TokenTimeout(p))
	ts := make([]store.EventTransition, len(items))
	for i, it := range items {
		ts[i] = store.StartDelivery(it.Event.ID, it.Fence, exp, now)
	}
	res, err := t.deps.Store.EventTransition(ctx, ts)
	b.observe(now)
	if err != nil && !errors.Is(err, model.ErrNotApplied) {
		// Some of the writes may have applied (a lost reply): find out
		// before a token goes back that an event holds.
		res, err = b.readBack(ctx, items, exp, err)
	}
	if err != nil {
		_ = returnTokens(context.WithoutCancel(ctx), t.deps.Store, b.policyID, len(items), 0)
		b.mu.Lock()
		for _, it := range items {
			b.q.Push(it)
		}
		b.mu.Unlock()
		if ctx.Err() == nil {
			t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Msg("start delivering failed")
		}
		return err
	}
	out := make([]Item, 0, len(items))
	lost, kept := 0, 0
	for i, it := range items {
		if errors.Is(res[i], errStartUnknown) {
			// Neither started by this write nor still waiting: its token
			// stays counted (a leak at worst, repaired by reconciliation),
			// since returning it could be once too many.
			kept++
			continue
		}
		if res[i] != nil {
			// Cancelled, or claimed by a newer owner of the shard.
			lost++
			continue
		}
		e := *it.Event
		e.Status = model.EventDelivering
		e.TokenExpiresAt = &exp
		e.Fence = it.Fence
		it.Event = &e
		it.Policy = p
		out = append(out, it)
	}
	if lost > 0 {
		_ = returnTokens(context.WithoutCancel(ctx), t.deps.Store, b.policyID, lost, 0)
	}
	if kept > 0 {
		t.log.Warn().Str(logkey.Policy, b.policyID).Int("tokens", kept).Msg("start outcome unknown; tokens left to reconciliation")
	}
	if len(out) > 0 {
		t.deps.Dispatch(out)
	}
	return nil
}

// startedBy reports whether e carries what a start write under fence with
// token expiry exp sets (each start sets its own expiry).
func startedBy(e *model.Event, fence int64, exp time.Time) bool {
	return e.Fence == fence && e.TokenExpiresAt != nil && e.TokenExpiresAt.Equal(exp)
}

// readBackFor bounds how long readBack keeps trying to read events back.
const readBackFor = 30 * time.Second

// errStartUnknown marks, in readBack's results, an event whose start write
// may or may not have applied.
var errStartUnknown = errors.New("start outcome unknown")

// readBack settles a start write that failed without saying whether it
// applied: it reads the events back (retrying while the store is
// unreachable, until ctx ends) and returns per item nil if its start
// applied (delivering under this fence with this write's expiry),
// model.ErrConflict if it is still scheduled and was not started (it waits
// in the queue again and its token goes back), or errStartUnknown (its
// token stays counted). Items not read before ctx ends are unknown.
func (b *bucket) readBack(ctx context.Context, items []Item, exp time.Time, cause error) ([]error, error) {
	t := b.t
	res := make([]error, len(items))
	wait := t.cfg.PollInterval
	// The write often failed because the bucket stopped (its context was
	// cancelled mid-call, the store being fine): the reads go on for a while
	// regardless, so that the tokens are settled exactly.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackFor)
	defer cancel()
	for i := 0; i < len(items); {
		e, err := t.deps.Store.EventGetByID(ctx, items[i].Event.ID)
		switch {
		case err == nil:
		case errors.Is(err, model.ErrNotFound):
			res[i] = model.ErrNotFound
			i++
			continue
		default:
			if !sleepCtx(ctx, t.deps.Clock, wait) {
				// Unknown: keep the tokens (safe), requeue nothing.
				for j := i; j < len(items); j++ {
					res[j] = errStartUnknown
				}
				return res, nil
			}
			wait = min(2*wait, 5*time.Second)
			continue
		}
		it := items[i]
		switch {
		case e.Status == model.EventDelivering && startedBy(e, it.Fence, exp):
			res[i] = nil
		case e.Status == model.EventScheduled && e.Fence == it.Fence:
			res[i] = model.ErrConflict
			b.mu.Lock()
			b.q.Push(it) // not started: it waits again
			b.mu.Unlock()
		default:
			res[i] = errStartUnknown
		}
		i++
	}
	t.log.Info().Err(cause).Str(logkey.Policy, b.policyID).Int("events", len(items)).Msg("start write failed ambiguously; read back")
	return res, nil
}

// Reconciliation repairs the persisted InUse where it disagrees with the
// tokens really out: the policy's events that hold one plus this bucket's
// gifts. Tokens leak (InUse too high) when a crash falls between
// PolicyAcquireTokens and the delivering write, or when a release's token
// return fails.
//
// Telling a leak from tokens in motion is the hard part. A release in flight
// (its event already released, its token not yet returned) and a hand-off in
// flight on a store without transactions (the released event written, the
// next one's start not yet) look exactly like a leak, and under load some
// are always in flight while InUse sits at the bound, so a count that merely
// stays the same across a pause proves nothing (seen in a long chaos run:
// the repair lowered InUse under tokens in motion and the consumer held 10
// tokens of a policy bounded at 8). So a repair needs reconcileSamples
// readings settle() apart that agree on everything: InUse, the set of
// token-holding events (not just their number) and the gifts. Any change is
// motion: the repair waits for a quieter moment (the next interval). A leak
// is then given back by decrementing InUse (PolicyReleaseTokens), never by
// overwriting it, so a change that lands meanwhile is not lost. Nothing is
// repaired before the shard has settled (Deps.Settled): a previous owner's
// start may still land until then.
//
// The bucket's own goroutine runs it (reconcile) after waiting for its
// starts in flight (or before its first), so none of this owner's token
// moves is in flight at a reading.

// reading is one look at a policy's token accounting.
type reading struct {
	p       *model.Policy
	held    int      // events holding a token
	holders []string // their ids (only when withIDs), to see motion that keeps the number
	gifts   int
}

// read takes a reading and refreshes the cached policy. The holders' ids
// are read only if withIDs (a mismatch is being watched), so that the usual,
// consistent check costs two small reads.
func (b *bucket) read(ctx context.Context, withIDs bool) (reading, error) {
	t := b.t
	st := t.deps.Store
	defer b.observe(t.deps.Clock.Now())
	p, err := st.PolicyGetByID(ctx, b.policyID)
	if err != nil {
		return reading{}, err
	}
	b.setPolicy(p)
	held, err := st.EventCountHoldingTokens(ctx, b.policyID)
	if err != nil {
		return reading{}, err
	}
	var ids []string
	if withIDs {
		// Every token expires before the last instant a store can
		// compare (Unix nanoseconds in an int64).
		evs, err := st.EventFindTokenExpired(ctx, b.policyID, time.Unix(0, math.MaxInt64), reconcileLimit(p))
		if err != nil {
			return reading{}, err
		}
		ids = make([]string, len(evs))
		for i, e := range evs {
			ids[i] = e.ID
		}
		slices.Sort(ids)
	}
	b.mu.Lock()
	g := b.gifts
	b.mu.Unlock()
	return reading{p: p, held: held, holders: ids, gifts: g}, nil
}

// reconcile refreshes the cached policy and, where InUse disagrees with
// the tokens out, runs one reconciliation to its end. It pauses the bucket
// (its loop runs this) between the readings: its own token moves would
// otherwise be motion at every reading, and a partly leaked bucket that
// keeps busy would never be repaired. The pause is at most
// (reconcileSamples-1) × maxSettle, and only while a mismatch is watched.
func (b *bucket) reconcile(ctx context.Context) error {
	t := b.t
	quick, err := b.read(ctx, false)
	if err != nil {
		return err
	}
	t.deps.Metrics.TokensInUse(b.policyID, quick.p.InUse)
	if quick.p.InUse == quick.held+quick.gifts {
		return nil
	}
	if t.deps.Settled != nil && !t.deps.Settled(b.shard, b.fence) {
		return nil // a previous owner's start may still land: not yet
	}
	first, err := b.read(ctx, true)
	if err != nil {
		return err
	}
	out := first.held + first.gifts
	if first.p.InUse == out || len(first.holders) >= reconcileLimit(first.p) {
		// Consistent after all, or it cannot see every holder
		// (MaxInFlight was lowered far below them).
		return nil
	}
	for range reconcileSamples - 1 {
		if !sleepCtx(ctx, t.deps.Clock, b.settle()) {
			return ctx.Err()
		}
		r, err := b.read(ctx, true)
		if err != nil {
			return err
		}
		if r.p.InUse != first.p.InUse || r.held != first.held || r.gifts != first.gifts || !slices.Equal(r.holders, first.holders) {
			return nil // tokens in motion: not now
		}
	}
	st := t.deps.Store
	if leaked := first.p.InUse - out; leaked > 0 {
		if err := st.PolicyReleaseTokens(ctx, b.policyID, leaked, 0); err != nil {
			return err
		}
		t.log.Info().Str(logkey.Policy, b.policyID).Int("was", first.p.InUse).Int("now", out).Msg("reconciled tokens in use: leaked tokens returned")
		t.deps.Metrics.TokensInUse(b.policyID, out)
		return nil
	}
	// More tokens held than counted (only a bug elsewhere leads here):
	// count them all. A concurrent change of InUse fails the version check
	// only if the policy itself changed, so this writes the quiet reading.
	err = st.PolicySetInUse(ctx, b.policyID, first.p.Version, out)
	if err != nil && !errors.Is(err, model.ErrConflict) {
		return err
	}
	if err == nil {
		t.log.Warn().Str(logkey.Policy, b.policyID).Int("was", first.p.InUse).Int("now", out).Msg("reconciled tokens in use: more were held than counted")
		t.deps.Metrics.TokensInUse(b.policyID, out)
	}
	return nil
}

// stallReconcile is how long a bucket with events waiting may hand out no
// token before it reconciles out of turn: a few repair windows.
func (b *bucket) stallReconcile() time.Duration {
	return min(5*b.t.cfg.ReconcileSettle, b.t.cfg.ReconcileInterval)
}

// reconcileSamples is how many agreeing readings a repair needs.
const reconcileSamples = 3

// reconcileLimit bounds the holders read per reading: far more than can
// hold tokens, so that a truncated list cannot look like a leak.
func reconcileLimit(p *model.Policy) int {
	return 2*p.MaxInFlight + 1000
}

// policyGone sends the waiting events of a deleted policy to dead: they
// cannot be throttled, and delivering them unthrottled could flood the
// consumer the policy protected. They can be redriven.
func (b *bucket) policyGone(ctx context.Context) {
	t := b.t
	b.mu.Lock()
	items := b.q.Drain()
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
		b.mu.Lock()
		for _, it := range items {
			b.q.Push(it)
		}
		b.mu.Unlock()
		return
	}
	dead := 0
	for _, e := range res {
		if e == nil {
			dead++
		}
	}
	t.deps.Metrics.Dead(dead)
	t.log.Warn().Str(logkey.Policy, b.policyID).Int("events", dead).Msg("policy not found; events dead-lettered")
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
