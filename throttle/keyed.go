package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
)

// A policy with a ConcurrencyKey bounds the tokens out per key value by
// MaxInFlight; the store's InUse counts them all and is bounded by
// MaxInFlightTotal (model.Policy.TokenCap). The per-key counts are not
// persisted: the owner keeps the token-holding events by key in memory
// (holders), counted from the store when the bucket starts (a takeover or a
// restart) and again whenever they may have gone stale: a token given back
// without naming its event (Released: a release on another instance, a
// reclaim, a failed delivery), a start that did not apply, or a bucket
// whose waiting keys are all at their bound for a PollInterval. A release
// through this process's Throttle names its event and needs no recount.
// Stale counts are never too low: a recount runs after the bucket's own
// starts have returned, and releases that land during it are applied after.
// Keyed buckets take no gifts (a gift does not say which key may use it); a
// release's own call hands its token on (handoff.go) only to an event whose
// key is below its bound (takeKeyedLocked).

// holders is the owner's count of token-holding events per key value. Keys
// with none are dropped, so idle keys cost nothing. Guarded by bucket.mu.
type holders struct {
	loaded   bool
	dirty    bool      // recount before the next hand-out
	at       time.Time // last recount
	byID     map[string]string
	perKey   map[string]int
	during   map[string]bool // released while a recount ran
	counting bool
	// pending are events handed a token by a release whose commit is in
	// flight: not yet holding in the store, so a recount keeps them.
	pending map[string]string
}

func (h *holders) add(id, key string) {
	if _, ok := h.byID[id]; ok {
		return
	}
	h.byID[id] = key
	h.perKey[key]++
}

func (h *holders) remove(id string) {
	k, ok := h.byID[id]
	if !ok {
		return
	}
	delete(h.byID, id)
	if h.perKey[k]--; h.perKey[k] <= 0 {
		delete(h.perKey, k)
	}
	if len(h.byID) == 0 {
		// Go maps do not shrink: let a burst of keys go with its maps.
		h.byID, h.perKey = map[string]string{}, map[string]int{}
	}
}

// releasedHolder tells the bucket of policyID, if this instance owns it and
// it is keyed, that event id gave its token back. The caller wakes it.
func (t *Throttle) releasedHolder(policyID, id string) {
	t.mu.Lock()
	b := t.buckets[policyID]
	t.mu.Unlock()
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.keyedLocked() {
		return
	}
	if b.keys.counting {
		b.keys.during[id] = true
	}
	if b.keys.loaded {
		b.keys.remove(id)
	}
}

// takeKeyedLocked pops the next waiting event whose key is below its bound
// once released (an event being released, holding a token of this bucket)
// lets go, for that event's token, and counts it as holding.
func (b *bucket) takeKeyedLocked(released string) (Item, bool) {
	h := &b.keys
	if !h.loaded || h.dirty || h.counting {
		return Item{}, false // the bucket's round decides after its recount
	}
	if b.lim != nil && !b.lim.AllowN(b.t.deps.Clock.Now(), 1) {
		return Item{}, false
	}
	relKey, relHolds := h.byID[released]
	bound := b.policy.MaxInFlight
	it, k, ok := b.q.PopEligible(func(k string) bool {
		n := h.perKey[k]
		if relHolds && k == relKey {
			n--
		}
		return n < bound
	})
	if !ok {
		return Item{}, false
	}
	// released stays counted until its release is known to have won
	// (handedOver): too high a count for a moment, never too low.
	h.add(it.Event.ID, k)
	if h.pending == nil {
		h.pending = map[string]string{}
	}
	h.pending[it.Event.ID] = k
	return it, true
}

// handedOver settles the holders of a keyed bucket after a release that
// took n: released gave its token to n (holds), or n did not start.
func (n *next) handedOver(released string, holds bool) {
	if n == nil {
		return
	}
	b := n.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !holds && !n.sent {
		b.out-- // dropped: its start lost
	}
	delete(b.keys.pending, n.it.Event.ID)
	if !b.keyedLocked() {
		return
	}
	if !holds {
		b.keys.remove(n.it.Event.ID)
		b.keys.dirty = true
		return
	}
	b.keys.remove(released)
}

// markStale asks for a recount of the holders before the next hand-out.
func (b *bucket) markStale() {
	b.mu.Lock()
	b.keys.dirty = true
	b.mu.Unlock()
}

// keyOf is the concurrency key value of e under p's current key. This is
// the one place it is computed (events do not carry it).
func keyOf(p *model.Policy, e *model.Event) string {
	return model.ConcurrencyKeyOf(p.ConcurrencyKey, e.ScheduleID, e.Payload)
}

// keyed reports whether the bucket's policy has a concurrency key.
func (b *bucket) keyedLocked() bool {
	return b.policy != nil && b.policy.ConcurrencyKey != ""
}

// rekeyLocked rebuilds the queue when the policy's concurrency key changed,
// so that its round robin runs across the right values.
func (b *bucket) rekeyLocked(before string) {
	after := ""
	if b.policy != nil {
		after = b.policy.ConcurrencyKey
	}
	if after == before {
		return
	}
	items := b.q.Drain()
	if after == "" {
		b.q = b.newQueue(nil)
	} else {
		p := b.policy
		b.q = b.newQueue(func(e *model.Event) string { return keyOf(p, e) })
	}
	for _, it := range items {
		b.q.Push(it)
	}
}

// recount counts the policy's token-holding events by key value from the
// store, once the bucket's own starts have returned.
func (b *bucket) recount(ctx context.Context, p *model.Policy) error {
	b.starts.Wait()
	b.mu.Lock()
	b.keys.counting, b.keys.during = true, map[string]bool{}
	b.mu.Unlock()
	began := b.t.deps.Clock.Now()
	evs, err := b.t.deps.Store.EventFindTokenExpired(ctx, b.policyID, time.Unix(0, math.MaxInt64), reconcileLimit(p))
	b.observe(began)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keys.counting = false
	if err != nil {
		return err
	}
	if len(evs) >= reconcileLimit(p) {
		// Not every holder was read: counts could be too low.
		return fmt.Errorf("more than %d events hold tokens: per-key counts unknown", len(evs))
	}
	h := holders{loaded: true, at: b.t.deps.Clock.Now(), byID: make(map[string]string, len(evs)), perKey: map[string]int{},
		pending: b.keys.pending}
	for _, e := range evs {
		if !b.keys.during[e.ID] {
			h.add(e.ID, keyOf(p, e))
		}
	}
	for id, k := range h.pending {
		h.add(id, k)
	}
	b.keys = h
	return nil
}

// roundKeyed is round for a policy with a concurrency key: it hands out
// tokens only to events whose key is below MaxInFlight, across keys in
// round robin after priority.
func (b *bucket) roundKeyed(ctx context.Context, p *model.Policy) roundResult {
	t := b.t
	for ctx.Err() == nil {
		b.mu.Lock()
		n := b.q.Len()
		lim := b.lim
		b.mu.Unlock()
		if n == 0 {
			return roundIdle
		}
		now := t.deps.Clock.Now()
		want := rateAvailable(lim, now, min(n, t.cfg.AcquireBatch))
		if want == 0 {
			return roundRate
		}
		b.mu.Lock()
		stale := !b.keys.loaded || b.keys.dirty
		b.mu.Unlock()
		if stale {
			if err := b.recount(ctx, p); err != nil {
				if ctx.Err() == nil {
					t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Msg("counting tokens held by key failed")
				}
				return roundError
			}
		}
		// Tokens first, for as many events as their keys let go, so that
		// no key loses its turn for want of a token.
		room := func(k string) int { return p.MaxInFlight - b.keys.perKey[k] }
		b.mu.Lock()
		want = b.q.CountEligible(room, want)
		if want == 0 && t.deps.Clock.Since(b.keys.at) >= t.cfg.PollInterval {
			// Every waiting key at its bound for a while: count again
			// (releases elsewhere, starts that did not apply).
			b.keys.dirty = true
		}
		b.mu.Unlock()
		if want == 0 {
			return roundKeysAtBound
		}
		began := t.deps.Clock.Now()
		got, err := t.deps.Store.PolicyAcquireTokens(ctx, b.policyID, want)
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
		if got == 0 {
			b.starvedAt = t.deps.Clock.Now()
			return roundStarved // the total bound
		}
		items := make([]Item, 0, got)
		b.mu.Lock()
		for len(items) < got {
			it, k, ok := b.q.PopEligible(func(k string) bool { return b.keys.perKey[k] < p.MaxInFlight })
			if !ok {
				break
			}
			b.keys.add(it.Event.ID, k)
			items = append(items, it)
		}
		b.takenLocked(items)
		b.mu.Unlock()
		if extra := got - len(items); extra > 0 {
			_ = returnTokens(ctx, t.deps.Store, b.policyID, extra, 0)
		}
		if len(items) == 0 {
			return roundStarved
		}
		b.starvedAt = time.Time{}
		b.mu.Lock()
		rateTake(lim, now, len(items))
		b.mu.Unlock()
		granted(items, t.deps.Clock.Now())
		if !b.startAsync(ctx, items) {
			return roundIdle
		}
	}
	return roundIdle
}
