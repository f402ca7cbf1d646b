package throttle

import (
	"context"
	"errors"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

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
		b.doneTransit(len(items)) // dropped: they stay scheduled in the store
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
	readBack := false
	if err != nil && !errors.Is(err, model.ErrNotApplied) {
		// Some of the writes may have applied (a lost reply): find out
		// before a token goes back that an event holds.
		res, err = b.readBack(ctx, items, exp, err)
		readBack = true
	}
	if err != nil {
		_ = returnTokens(context.WithoutCancel(ctx), t.deps.Store, b.policyID, len(items), 0)
		b.markStale()
		b.requeue(items)
		if ctx.Err() == nil {
			t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Msg("start delivering failed")
		}
		return err
	}
	out := make([]Item, 0, len(items))
	lost, kept, gone := 0, 0, 0
	for i, it := range items {
		if errors.Is(res[i], errStartUnknown) {
			// Neither started by this write nor still waiting: its token
			// stays counted (a leak at worst, repaired by reconciliation),
			// since returning it could be once too many.
			kept++
			gone++
			continue
		}
		if res[i] != nil {
			// Cancelled, or claimed by a newer owner of the shard; or,
			// read back, not started and waiting again.
			lost++
			if !readBack || !errors.Is(res[i], model.ErrConflict) {
				gone++
			}
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
	b.doneTransit(gone)
	if lost > 0 {
		_ = returnTokens(context.WithoutCancel(ctx), t.deps.Store, b.policyID, lost, 0)
		b.markStale()
	}
	if kept > 0 {
		t.log.Warn().Str(logkey.Policy, b.policyID).Int("tokens", kept).Msg("start outcome unknown; tokens left to reconciliation")
	}
	if len(out) > 0 {
		t.send(out)
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
	// The write often failed because the bucket stopped (its context was
	// cancelled mid-call, the store being fine): the reads go on for a while
	// regardless, so that the tokens are settled exactly.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackFor)
	defer cancel()
	wait := t.cfg.PollInterval
	for i, it := range items {
		res[i] = t.startOutcome(ctx, it.Event.ID, it.Fence, exp, &wait)
		if errors.Is(res[i], model.ErrConflict) {
			b.requeue([]Item{it}) // not started: it waits again
		}
	}
	t.log.Info().Err(cause).Str(logkey.Policy, b.policyID).Int("events", len(items)).Msg("start write failed ambiguously; read back")
	return res, nil
}

// startOutcome reads event id back after a start write under fence with
// token expiry exp failed without saying whether it applied, retrying while
// the store is unreachable until ctx ends (*wait is the pause between
// tries, doubled up to 5s). It returns nil if the start applied,
// model.ErrConflict if the event is still scheduled under fence (not
// started), model.ErrNotFound, or errStartUnknown.
func (t *Throttle) startOutcome(ctx context.Context, id string, fence int64, exp time.Time, wait *time.Duration) error {
	for {
		e, err := t.deps.Store.EventGetByID(ctx, id)
		switch {
		case err == nil:
		case errors.Is(err, model.ErrNotFound):
			return model.ErrNotFound
		default:
			if !sleepCtx(ctx, t.deps.Clock, *wait) {
				// Unknown: keep the token (safe), requeue nothing.
				return errStartUnknown
			}
			*wait = min(2**wait, 5*time.Second)
			continue
		}
		switch {
		case e.Status == model.EventDelivering && startedBy(e, fence, exp):
			return nil
		case e.Status == model.EventScheduled && e.Fence == fence:
			return model.ErrConflict
		default:
			return errStartUnknown
		}
	}
}
