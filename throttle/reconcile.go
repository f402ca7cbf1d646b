package throttle

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
)

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
// repaired before the shard has settled (MarkSettled): a previous owner's
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
	if !t.isSettled(b.shard, b.fence) {
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
	// count them all, unless the policy or its InUse moved since the quiet
	// reading (a token taken meanwhile would be lost from the count).
	err = st.PolicySetInUse(ctx, b.policyID, first.p.Version, first.p.InUse, out)
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
	if p.ConcurrencyKey == "" {
		return 2*p.MaxInFlight + 1000
	}
	return 2*min(p.TokenCap(), maxHolders) + 1000
}

// maxHolders caps the bound reconcileLimit reads for under a keyed policy
// (one without MaxInFlightTotal has no bound of its own).
const maxHolders = 100_000
