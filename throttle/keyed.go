package throttle

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
)

// A policy with a ConcurrencyKey bounds the tokens out per key value by
// MaxInFlight; the store's InUse counts them all and is bounded by
// MaxInFlightTotal (model.Policy.TokenCap). The per-key counts are not
// persisted: before each hand-out the owner counts the events holding a
// token by key (one store read), so they hold across instances, releases
// on other instances and restarts, and a new owner needs no takeover step.
// Keyed buckets take no gifts and hand no token on in a release's own call
// (handoff.go): a token so moved could land on a key at its bound. Released
// tokens go back to the store and wake the bucket.

// keyOf is the concurrency key value of e under p: the one stored on the
// event if any, else computed from its payload.
func keyOf(p *model.Policy, e *model.Event) string {
	if e.ConcurrencyKey != "" {
		return e.ConcurrencyKey
	}
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
		b.q = NewQueue()
	} else {
		p := b.policy
		b.q = NewKeyedQueue(func(e *model.Event) string { return keyOf(p, e) })
	}
	for _, it := range items {
		b.q.Push(it)
	}
}

// heldByKey counts the policy's token-holding events by key value. The
// bucket's own starts must have returned (their events then hold tokens in
// the store).
func (b *bucket) heldByKey(ctx context.Context, p *model.Policy) (map[string]int, error) {
	evs, err := b.t.deps.Store.EventFindTokenExpired(ctx, b.policyID, time.Unix(0, math.MaxInt64), reconcileLimit(p))
	if err != nil {
		return nil, err
	}
	held := make(map[string]int, len(evs))
	for _, e := range evs {
		held[keyOf(p, e)]++
	}
	return held, nil
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
		b.starts.Wait()
		began := t.deps.Clock.Now()
		held, err := b.heldByKey(ctx, p)
		b.observe(began)
		if err != nil {
			if ctx.Err() == nil {
				t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Msg("reading tokens held by key failed")
			}
			return roundError
		}
		// Tokens first, for as many events as their keys let go, so that
		// no key loses its turn for want of a token.
		room := func(k string) int { return p.MaxInFlight - held[k] }
		b.mu.Lock()
		want = b.q.CountEligible(room, want)
		b.mu.Unlock()
		if want == 0 {
			return roundStarved // every waiting key is at its bound
		}
		began = t.deps.Clock.Now()
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
			it, k, ok := b.q.PopEligible(func(k string) bool { return held[k] < p.MaxInFlight })
			if !ok {
				break
			}
			held[k]++
			items = append(items, it)
		}
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
