package throttle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// TransitionStore is the one store method Extend needs.
type TransitionStore interface {
	EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error)
}

// ReleaseStore is what Release needs: the event CAS, reading the event
// after a lost one, and giving the token back.
type ReleaseStore interface {
	TransitionStore
	EventGetByID(ctx context.Context, id string) (*model.Event, error)
	PolicyReleaseTokens(ctx context.Context, policyID string, n int, timedOut int) error
}

// holdingFrom lists the token-holding statuses to try, e.Status first.
func holdingFrom(s model.EventStatus) []model.EventStatus {
	if s == model.EventDelivering {
		return []model.EventStatus{model.EventDelivering, model.EventDelivered}
	}
	return []model.EventStatus{model.EventDelivered, model.EventDelivering}
}

// Release is the consumer's release of event e through the store alone, for
// callers with no Throttle of the policy in their process (the master of an
// instance without a handler; tools and tests). It never hands the token to a
// bucket: it goes back to the store, and the bucket owner sees it when woken
// ((*Throttle).Released) or when it next polls. With a Throttle, use
// (*Throttle).Release. Otherwise the two behave alike; see there.
func Release(ctx context.Context, st ReleaseStore, e *model.Event, now time.Time) (released bool, err error) {
	return release(ctx, st, nil, e, now)
}

// Release is the consumer's release of event e (the master calls it for
// POST /v1/events/{id}/release, after checking the release token): a
// compare-and-set from the token-holding status (delivering or delivered) to
// released with FinishedAt = now and the token expiry cleared. Only the
// caller whose CAS wins gives the policy's token back, so releasing twice, or
// racing the handler's own transition or the timeout reclaim, returns exactly
// one token.
//
// e is the event as the caller last read it; its status may be stale (the
// handler may have moved delivering to delivered meanwhile), so both holding
// statuses are tried. It may also be the copy the consumer got, sent early
// under an older fence than the one the event is scheduled under now
// (claimed again after its sender died): that copy holds no token, and its
// release acknowledges the event while it waits here (acknowledgeSent).
// released is false, with a nil error, when the event holds no token any
// more (already released, reclaimed, dead, cancelled, or not yet
// delivered). Errors: model.ErrUnavailable (store); if the CAS won
// but the token could not be returned, released is true and the error says
// so (the bucket owner's periodic reconciliation repairs the count).
//
// If the policy's bucket runs in t and events wait in it, the next waiting
// event takes the token in the same store call as the release: the release's
// compare-and-set and then the event's scheduled → delivering write with
// store.EventTransition.RequiresPrevious, one commit on the embedded store;
// the event is dispatched once it is durably delivering. If that start
// loses, the token is handed to the bucket directly instead of being written
// back (see handoff.go). A token that does go back to the store wakes t's
// bucket of the policy, if any, so that the next waiting event goes at once.
//
// A release of an adaptive policy's event whose delivery is recorded
// (e.DeliveredAt) tells its controller how long the consumer held it.
func (t *Throttle) Release(ctx context.Context, e *model.Event, now time.Time) (released bool, err error) {
	released, err = release(ctx, t.deps.Store, t, e, now)
	if released && e.DeliveredAt != nil {
		t.ObserveRelease(e.PolicyID, now.Sub(*e.DeliveredAt))
		t.ObserveHold(e.PolicyID, now.Sub(*e.DeliveredAt))
	}
	return released, err
}

// release implements both: t, if not nil, is where the token may be handed
// over; st is t's store then.
func release(ctx context.Context, st ReleaseStore, t *Throttle, e *model.Event, now time.Time) (released bool, err error) {
	if e.Status.Finished() {
		return false, nil
	}
	// Once started, a release runs to its end even if the caller gives up
	// (a consumer that hangs up): a compare-and-set applied without its
	// token return, or a release applied without the next event's start,
	// would leak a token until reconciliation.
	ctx = context.WithoutCancel(ctx)
	if t != nil {
		// One token-taking write per event at a time in this process: a
		// second release of e waits for the first and then finds e
		// released.
		t.slots.acquire(e.ID)
		defer t.slots.release(e.ID)
	}
	// If an event waits in one of t's buckets, it takes the token in the
	// same store call (one commit instead of a release and then a start).
	var nx *next
	if t != nil && e.PolicyID != "" {
		nx = t.takeNext(e.PolicyID, e.ID)
	}
	if nx != nil && t.cfg.EarlyDispatch && nx.p != nil && !nx.p.AutoRelease {
		if taken, released, err := t.releaseEarly(ctx, e, nx, now); taken {
			return released, err
		}
	}
	var nextErr error
	var cur *model.Event
	// e.Status may be stale (the handler may have moved delivering to
	// delivered, or e's start was still being written when the caller read
	// it): a lost compare-and-set reads the event and tries its status.
	from := e.Status
	if !from.HoldsToken() {
		from = model.EventDelivered
	}
	// Only the copy of e the caller read is released: a later copy (e
	// claimed again, or retried after its token timed out, meanwhile) holds
	// the token for its own consumer.
	attempt := model.CurrentAttempt(e)
	for range maxReleaseTries {
		ts := []store.EventTransition{store.Release(e.ID, from, e.Fence, attempt, now)}
		if nx != nil {
			ts = append(ts, nx.transition())
		}
		errs, err := st.EventTransition(ctx, ts)
		if err != nil {
			if nx != nil && !errors.Is(err, model.ErrNotApplied) {
				return t.settleNext(ctx, e, nx, err)
			}
			nx.putBack()
			return false, err
		}
		if errs[0] == nil {
			released = true
			if nx != nil {
				nextErr = errs[1]
			}
			break
		}
		if errors.Is(errs[0], model.ErrNotFound) {
			nx.putBack()
			return false, nil
		}
		if !errors.Is(errs[0], model.ErrConflict) {
			nx.putBack()
			return false, errs[0]
		}
		cur, err = st.EventGetByID(ctx, e.ID)
		if errors.Is(err, model.ErrNotFound) {
			nx.putBack()
			return false, nil
		}
		if err != nil {
			nx.putBack()
			return false, err
		}
		if !cur.Status.HoldsToken() {
			break
		}
		from = cur.Status
	}
	if !released {
		nx.putBack()
		if t != nil && cur != nil && cur.Status == model.EventScheduled && e.PolicyID != "" {
			return t.acknowledgeSent(ctx, e, cur, attempt, now)
		}
		return false, nil
	}
	if e.PolicyID == "" {
		return true, nil
	}
	if nx != nil && nextErr == nil {
		// The next event holds the token now and is delivering.
		nx.handedOver(e.ID, true)
		nx.dispatch(nil)
		return true, nil
	}
	nx.handedOver("", false)
	// A next event whose start lost (cancelled, or claimed by a newer owner
	// of its shard) is dropped, as in (*bucket).start; the token is free.
	if t != nil && t.handOff(e.PolicyID, 1) == 1 {
		// An event waits in t's bucket: the token goes to it without a
		// store write.
		return true, nil
	}
	if t != nil {
		// A keyed bucket counts the token's key free before the token
		// is back: it waits for the token in the store, never beyond it.
		t.releasedHolder(e.PolicyID, e.ID)
	}
	err = returnTokens(ctx, st, e.PolicyID, 1, 0)
	if t != nil {
		// Woken whatever the write's outcome, as in ReturnTokens: a
		// needless wake-up costs one acquisition attempt.
		t.wakeReleased(e.PolicyID)
	}
	if err != nil {
		return true, fmt.Errorf("event %s released but its token was not returned: %w", e.ID, err)
	}
	return true, nil
}

// acknowledgeSent finishes cur, a scheduled event whose consumer has the
// copy e sent in attempt attempt, as released (store.AcknowledgeSent). Only
// an early dispatch whose start never applied leaves a sent event so, its
// sender having died before the write: this process serves cur's releases
// behind its slot, so an early start of its own has been written by now,
// and a start without an early send comes before the send. No copy holds a
// token then, so none goes back, and the shard's owner does not send it
// again while its consumer has it.
//
// cur may have been claimed again since e was sent (a newer fence: the
// restart or takeover that followed the crash) and wait in a bucket, whose
// early dispatch sends without reading the store. It is acknowledged only if
// that bucket is this process's (it holds cur's shard under cur's fence),
// and then marked so that an early dispatch drops it; a claim racing the
// write is read back and tried again.
func (t *Throttle) acknowledgeSent(ctx context.Context, e, cur *model.Event, attempt int, now time.Time) (bool, error) {
	st := t.deps.Store
	for range maxReleaseTries {
		ours := t.deps.Shards.Owns(cur.Shard, cur.Fence)
		if cur.Fence != e.Fence && !ours {
			return false, nil
		}
		if ours {
			// Marked first: a dispatch that takes it after the write
			// must find the mark.
			t.acked.add(cur.ID, now)
		}
		res, err := st.EventTransition(ctx, []store.EventTransition{store.AcknowledgeSent(cur.ID, cur.Fence, attempt, now)})
		if err != nil {
			return false, err
		}
		if res[0] == nil {
			return true, nil
		}
		if ours {
			t.acked.take(cur.ID)
		}
		if cur, err = st.EventGetByID(ctx, cur.ID); err != nil || cur.Status != model.EventScheduled {
			return false, nil
		}
	}
	return false, nil
}

// settleNext settles a release of e that handed its token to nx and failed
// without saying whether it applied (a lost reply): nx's state in the store
// tells. Started under its fence with this call's expiry, it holds the
// token, which it could only take from e's applied release: it is
// dispatched and the release answers released. Still waiting, it goes back
// to its queue and the release fails with cause (the consumer retries and
// finds e released if it was). Otherwise its token stays counted, left to
// reconciliation, and the release fails with cause.
func (t *Throttle) settleNext(ctx context.Context, e *model.Event, nx *next, cause error) (released bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, readBackFor)
	defer cancel()
	wait := t.cfg.PollInterval
	out := t.startOutcome(ctx, nx.it.Event.ID, nx.it.Fence, nx.exp, &wait)
	t.log.Info().Err(cause).Str(logkey.Event, e.ID).Str("next", nx.it.Event.ID).Str(logkey.Policy, e.PolicyID).
		AnErr("outcome", out).Msg("release and start of the next event failed ambiguously; read back")
	switch {
	case out == nil:
		nx.handedOver(e.ID, true)
		nx.dispatch(nil)
		return true, nil
	case errors.Is(out, model.ErrConflict):
		nx.putBack()
	default:
		nx.handedOver("", false)
	}
	return false, cause
}

// Extend moves the token expiry of e to until, like a visibility-timeout
// heartbeat (the master calls it for POST /v1/events/{id}/extend). It is a
// compare-and-set on the token-holding status, so it cannot revive a token
// that was released or reclaimed meanwhile: model.ErrConflict then (the
// consumer no longer holds the token). model.ErrNotFound, model.ErrUnavailable.
// e.Status may be stale: both holding statuses are tried, and on success
// e.Status and e.TokenExpiresAt are set to what was written.
func (t *Throttle) Extend(ctx context.Context, e *model.Event, until, now time.Time) error {
	return Extend(ctx, t.deps.Store, e, until, now)
}

// Extend is (*Throttle).Extend through the store alone.
func Extend(ctx context.Context, st TransitionStore, e *model.Event, until, now time.Time) error {
	if e.Status.Finished() {
		return model.ErrConflict
	}
	// Only the copy of e the caller read is extended (see release).
	attempt := model.CurrentAttempt(e)
	for _, from := range holdingFrom(e.Status) {
		errs, err := st.EventTransition(ctx, []store.EventTransition{store.ExtendToken(e.ID, from, e.Fence, attempt, until, now)})
		if err != nil {
			return err
		}
		if errs[0] == nil {
			e.Status, e.TokenExpiresAt = from, &until
			return nil
		}
		if !errors.Is(errs[0], model.ErrConflict) {
			return errs[0]
		}
	}
	return model.ErrConflict
}

// maxReleaseTries bounds a release's compare-and-set attempts: the event
// moves between the two holding statuses once (delivering → delivered).
const maxReleaseTries = 3

// returnTokens gives n tokens back, retrying briefly while the store says
// the write did not apply (model.ErrNotApplied). Any other failure may have
// applied (a lost reply): sending it again could return the tokens twice and
// let more than maxInFlight events out, so it is not retried; a token that
// did not go back is a leak, which the bucket owner's reconciliation repairs.
func returnTokens(ctx context.Context, st interface {
	PolicyReleaseTokens(ctx context.Context, policyID string, n int, timedOut int) error
}, policyID string, n, timedOut int) error {
	if n <= 0 {
		return nil
	}
	var err error
	wait := 20 * time.Millisecond
	for range 5 {
		err = st.PolicyReleaseTokens(ctx, policyID, n, timedOut)
		if err == nil || errors.Is(err, model.ErrNotFound) {
			return nil
		}
		if !errors.Is(err, model.ErrNotApplied) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
	return err
}
