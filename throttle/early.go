package throttle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Early dispatch (Config.EarlyDispatch).
//
// A release that hands its token to the next waiting event normally sends
// that event only after the commit that records both (the release and the
// next event's start) is durable, so a token cycle costs the consumer's work
// plus one commit. With early dispatch the next event is sent as soon as the
// release arrives and the commit runs meanwhile; the release call still
// answers only after it.
//
// The bound holds because the consumer gave the token back before the next
// event goes out, and nothing else can take that token while the commit runs:
// the released event must be delivered (the handler writes nothing more about
// it then) and its slot is held (eventSlots), so the only other writes that
// could end it first, another release and a timeout reclaim, wait or skip
// it. That needs every such write to run in this process, the one that owns
// the policy's queue shard (its bucket runs here):
//
//   - The embedded store has one process.
//   - With instances sharing MongoDB, the master forwards a release or
//     extend that reaches an instance without the event's shard to the
//     shard's holder (master.TokenOwners; the holder's address is on its
//     member lease), and a forwarded call that finds the shard moved again
//     answers 503 rather than being served there. Reclaims run at the
//     holder. So a duplicate release is served here, behind the slot.
//   - The lease fence covers what the holder writes: the next event's start
//     is a compare-and-set under the fence it was claimed with, so it loses
//     once a newer holder claimed the shard's events again.
//
// What is left is the window of an owner change: this process sends the
// next event only while it still holds the shard by its own clock (Owns,
// checked before the send), but a duplicate release of the released event
// that reaches the new holder after the lease expired, and before this
// commit lands, can win there and free the token once more. It needs a consumer that repeats a release
// within one commit of a lease expiry that the holder did not see coming
// (renewals failing for a whole lease TTL); the next holder's
// reconciliation then counts the tokens held again. Instances that do not
// forward (a version without it, advertising no address) serve releases
// themselves and can race the owner's early dispatch the same way, so a
// rolling upgrade from such a version has that window until the last of
// them stops.
//
// What it gives up is only about crashes: if the process dies after the send
// and before the commit, the store still has the released event holding the
// token and the sent one waiting. The consumer's release fails and is
// retried; the sent event's release acknowledges it while it is still
// scheduled, claimed again or not (acknowledgeSent; the master passes the
// copy of an older fence here). The shard's next owner holds such an event
// back for its takeover grace (handler.Config.TakeoverGrace, SendsEarly)
// rather than giving it the token the other release frees. A release later
// than that finds the event delivered again (at least once), and if the
// consumer still works on its first copy when the retried release frees the
// token, that copy runs beside the token's next holder.

// releaseEarly releases e and starts nx with nx sent first. taken is false,
// with nothing done, when e is not delivered (its delivery's outcome is not
// written yet, so the handler may still move it) or nx's slot is held; the
// caller then releases the usual way.
func (t *Throttle) releaseEarly(ctx context.Context, e *model.Event, nx *next, now time.Time) (taken, released bool, err error) {
	st := t.deps.Store
	// Read under e's slot: e stays as read until the write below, but
	// for the handler's delivering → delivered write, which keeps the
	// token (writeEarly follows it). A delivering event whose delivery
	// failed could still go to retrying and free its token that way, so
	// it goes early only once the handler reported its 2xx (Delivered).
	cur, err := st.EventGetByID(ctx, e.ID)
	if err != nil || !(cur.Status == model.EventDelivered || cur.Status == model.EventDelivering && t.delivered.has(e.ID)) {
		return false, false, nil
	}
	// Only the copy the caller read may go early: a later copy (claimed
	// again, or retried after its token timed out) holds the token for its
	// own consumer, and the release below would lose after the send.
	attempt := model.CurrentAttempt(e)
	if model.Superseded(cur, e.Fence, attempt) {
		return false, false, nil
	}
	// Only while this process still holds the next event's shard under the
	// fence it was claimed with, by its own clock: once the lease expired, a
	// new holder may serve a duplicate release of e.
	if !t.deps.Shards.Owns(nx.it.Shard, nx.it.Fence) {
		return false, false, nil
	}
	nid := nx.it.Event.ID
	if !t.slots.tryAcquire(nid) {
		return false, false, nil
	}
	if t.acked.take(nid) {
		// Its consumer acknowledged it while it waited here: the usual
		// release finds its start lost and drops it.
		t.slots.release(nid)
		return false, false, nil
	}
	// The next event's own release (a fast consumer) waits for its slot,
	// and its outcome write for started, until the start is written.
	defer t.slots.release(nid)
	started := make(chan struct{})
	defer close(started)
	nx.dispatch(started)

	ts := []store.EventTransition{store.Release(e.ID, cur.Status, e.Fence, attempt, now), nx.transition()}
	res, err := t.writeEarly(ctx, ts)
	if err != nil {
		// Sent, but neither write is known to have applied: the event waits
		// again (at least once); the consumer retries its release.
		nx.putBack()
		t.log.Error().Err(err).Str(logkey.Event, e.ID).Str("next", nid).Str(logkey.Policy, e.PolicyID).
			Msg("release and start of the early-sent next event not written")
		return true, false, fmt.Errorf("release %s: %w", e.ID, err)
	}
	if res[0] != nil {
		// Cannot happen while only this process writes (see above). The
		// next event was not started: it waits again.
		nx.putBack()
		t.log.Error().Err(res[0]).Str(logkey.Event, e.ID).Str("next", nid).Str(logkey.Policy, e.PolicyID).
			Msg("release lost after the next event was sent early")
		return true, false, nil
	}
	if res[1] != nil {
		// Cancelled, or claimed under a newer fence, after it was sent.
		// Its token stays counted (it may still run) until reconciliation
		// finds that no event holds it.
		t.log.Warn().Err(res[1]).Str(logkey.Event, nid).Str(logkey.Policy, e.PolicyID).
			Msg("start of an early-sent event lost; its token is left to reconciliation")
		nx.handedOver("", false)
		t.releasedHolder(e.PolicyID, e.ID)
		return true, true, nil
	}
	nx.handedOver(e.ID, true)
	return true, true, nil
}

// writeEarly writes ts (the release, then the next event's start), retrying
// a failed call until readBackFor has passed. A release that lost its
// compare-and-set to the handler's delivering → delivered write is tried
// again from delivered. A retry can also meet its own earlier call applied
// (a write that failed after its commit): the release is then found
// released, and the next event is read back to tell whether it started.
func (t *Throttle) writeEarly(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	st := t.deps.Store
	clock := t.deps.Clock
	deadline := clock.Now().Add(readBackFor)
	wait := 20 * time.Millisecond
	failed, moves := false, 0
	for {
		res, err := st.EventTransition(ctx, ts)
		if err != nil {
			failed = true
			if !clock.Now().Before(deadline) {
				return nil, err
			}
			t.log.Warn().Err(err).Str(logkey.Event, ts[0].ID).Msg("writing an early release failed; retrying")
			if !sleepCtx(ctx, clock, wait) {
				return nil, err
			}
			wait = min(2*wait, time.Second)
			continue
		}
		if !errors.Is(res[0], model.ErrConflict) {
			return res, nil
		}
		cur, err := st.EventGetByID(ctx, ts[0].ID)
		switch {
		case err != nil:
			return res, nil
		case cur.Status.HoldsToken() && cur.Status != ts[0].From && moves < maxReleaseTries:
			ts[0] = ts[0].ReleaseFrom(cur.Status)
			moves++
		case failed && cur.Status == model.EventReleased:
			return []error{nil, t.startedEarly(ctx, ts[1])}, nil
		default:
			return res, nil
		}
	}
}

// startedEarly tells whether start, written by an earlier call, applied:
// nil if the event holds the token under its fence and expiry.
func (t *Throttle) startedEarly(ctx context.Context, start store.EventTransition) error {
	e, err := t.deps.Store.EventGetByID(ctx, start.ID)
	if err != nil {
		return err
	}
	if e.Status.HoldsToken() && startedBy(e, start.Fence, *start.TokenExpiresAt) {
		return nil
	}
	return model.ErrConflict
}

// ackedSet holds the events acknowledged by a release while they may wait
// in one of the process's buckets. An entry goes when an early dispatch
// meets it, or after ackedFor (the bucket's own start, a compare-and-set,
// found it finished).
type ackedSet struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const ackedFor = 10 * time.Minute

func (a *ackedSet) add(id string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]time.Time{}
	}
	if len(a.m) >= 1024 {
		for k, at := range a.m {
			if now.Sub(at) > ackedFor {
				delete(a.m, k)
			}
		}
	}
	a.m[id] = now
}

// take reports whether id is in the set and removes it.
func (a *ackedSet) take(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.m[id]
	delete(a.m, id)
	return ok
}

// deliveredSet holds the events whose delivery the handler saw succeed and
// whose outcome (delivered) it has not written yet.
type deliveredSet struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func (d *deliveredSet) has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.m[id]
	return ok
}

func (d *deliveredSet) add(ids []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]struct{}{}
	}
	for _, id := range ids {
		d.m[id] = struct{}{}
	}
}

func (d *deliveredSet) remove(ids []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		delete(d.m, id)
	}
}

// Delivered tells t that the deliveries of ids succeeded (2xx or SQS
// accepted); their outcome write is pending. With EarlyDispatch such an
// event, though still delivering in the store, can be released early: the
// only write left for it keeps its token. Call OutcomeWritten after the
// write.
func (t *Throttle) Delivered(ids ...string) {
	if t.cfg.EarlyDispatch && len(ids) > 0 {
		t.delivered.add(ids)
	}
}

// OutcomeWritten forgets what Delivered recorded for ids.
func (t *Throttle) OutcomeWritten(ids ...string) {
	if t.cfg.EarlyDispatch && len(ids) > 0 {
		t.delivered.remove(ids)
	}
}

// SendsEarly reports whether t sends events before the write that starts
// them (Config.EarlyDispatch).
func (t *Throttle) SendsEarly() bool { return t.cfg.EarlyDispatch }
