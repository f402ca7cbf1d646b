package throttle

import (
	"context"
	"reflect"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
)

// A policy's limit schedule (model.Policy.Limits) and hold lower its
// effective limit for a while. The owner keeps them through the adaptive
// policies' path (adaptive.go): a policy with either gets a controller
// whose limit is its MaxInFlight, and headroom and overLimit keep the
// tokens out under the least of that, the applying rule and the hold.
// The bucket evaluates the schedule when the policy changes and at the
// instant it next may change (a timer), not only when it next polls; a
// hold ends at its Until by the same timer (and is ignored from then on
// by every check).

// capNow is the limit schedule's answer the bucket last computed.
func (b *bucket) capNow() model.Cap {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cap == (model.Cap{}) {
		return model.NoCap
	}
	return b.cap
}

// limitsChanged reports whether the limit schedule or hold differ.
func limitsChanged(old, p *model.Policy) bool {
	if old == nil {
		return len(p.Limits) > 0 || p.Hold != nil
	}
	return !reflect.DeepEqual(old.Limits, p.Limits) || !reflect.DeepEqual(old.Hold, p.Hold)
}

// ratePolicy is p with the rate its limit schedule allows under c.
func ratePolicy(p *model.Policy, c model.Cap) *model.Policy {
	if c.RatePerSecond <= 0 {
		return p
	}
	q := *p
	q.RatePerSecond, q.Burst = p.EffectiveRate(c)
	return &q
}

// applyLimits evaluates the policy's limit schedule and hold if they
// changed or their next boundary has come, applies the rate and limit
// they allow, reports them, and arms the timer that wakes the bucket at
// the next boundary.
func (b *bucket) applyLimits(ctx context.Context) {
	t := b.t
	now := t.deps.Clock.Now()
	b.mu.Lock()
	p := b.policy
	due := b.capDirty || (!b.capNext.IsZero() && !now.Before(b.capNext))
	b.mu.Unlock()
	if p == nil || !due {
		return
	}
	c := model.NoCap
	if len(p.Limits) > 0 && t.deps.Caps != nil {
		var err error
		if c, err = t.deps.Caps.PolicyCap(ctx, p, now); err != nil {
			// The previous answer stays; try again at the next poll.
			if ctx.Err() == nil {
				t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Msg("evaluating the policy's limit schedule failed")
			}
			b.mu.Lock()
			b.capNext = now.Add(t.cfg.PollInterval)
			b.mu.Unlock()
			b.armLimits(t.cfg.PollInterval)
			return
		}
	}
	next := p.NextChange(c, now)
	b.mu.Lock()
	b.cap, b.capNext, b.capDirty = c, next, false
	before := rateOf(b.lim)
	b.lim = rateLimiter(b.lim, ratePolicy(p, c), now)
	rateMoved := rateOf(b.lim) != before
	b.mu.Unlock()
	limit, source := p.MaxInFlight, model.LimitSourcePolicy
	if ctl := t.adapt.of(p, now); ctl != nil {
		ctl.mu.Lock()
		ctl.cap = c
		limit, source = ctl.effLocked(now)
		ctl.mu.Unlock()
	}
	t.deps.Metrics.EffectiveLimit(b.policyID, limit)
	t.deps.Metrics.LimitSource(b.policyID, source)
	if !next.IsZero() {
		b.armLimits(next.Sub(now))
	}
	if rateMoved {
		signal(b.wake)
	}
	// A raised limit lets waiting events out; a lowered one is kept by
	// headroom and overLimit.
	signal(b.released)
}

// armLimits wakes the bucket after d (one timer per bucket).
func (b *bucket) armLimits(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.capTimer != nil {
		b.capTimer.Stop()
	}
	b.capTimer = b.t.deps.Clock.AfterFunc(max(d, 0), func() {
		signal(b.wake)
		signal(b.released)
	})
}
