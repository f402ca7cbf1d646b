package throttle

import (
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/schedulerd/schedulerd/model"
)

// Policy rates (Policy.RatePerSecond, Policy.Burst).
//
// A policy with a rate lets an event out only when it holds a concurrency
// token (MaxInFlight, persisted) and a rate token. Rate tokens live in the
// memory of the bucket's owner only: every event of a policy is dispatched by
// the one instance that holds the policy's queue shard (model.ShardOf), by its
// bucket's round or by a release handing its token to the bucket's next
// event (takeNext), so the owner's limiter is the policy's rate across
// instances. When the shard changes owner the new owner starts with a full
// burst; the rate can be exceeded by at most one burst per change of owner.
//
// Rate tokens are taken with the limiter's explicit-time methods and the
// Throttle's clock, so tests drive them with a fake clock.

// rateLimiter returns the limiter that applies p's rate: cur adjusted if there
// is one, a new one (with a full burst) if not, nil if p has no rate.
func rateLimiter(cur *rate.Limiter, p *model.Policy, now time.Time) *rate.Limiter {
	if p == nil || !(p.RatePerSecond > 0) || math.IsInf(p.RatePerSecond, 0) {
		return nil
	}
	burst := p.Burst
	if burst < 1 {
		burst = model.DefaultBurst(p.RatePerSecond)
	}
	lim := rate.Limit(p.RatePerSecond)
	if cur == nil {
		return rate.NewLimiter(lim, burst)
	}
	if cur.Limit() != lim {
		cur.SetLimitAt(now, lim)
	}
	if cur.Burst() != burst {
		cur.SetBurstAt(now, burst)
	}
	return cur
}

// rateAvailable is how many whole rate tokens lim has at now, at most max;
// max without a limiter.
func rateAvailable(lim *rate.Limiter, now time.Time, max int) int {
	if lim == nil {
		return max
	}
	n := lim.TokensAt(now)
	if n < 1 {
		return 0
	}
	return min(max, int(n))
}

// rateTake takes n rate tokens at now. A release's hand-off may have taken
// some since rateAvailable counted them: the limiter then goes into debt,
// which the next events pay by waiting, so the average rate still holds.
func rateTake(lim *rate.Limiter, now time.Time, n int) {
	if lim == nil || n <= 0 {
		return
	}
	lim.ReserveN(now, n)
}

// rateWait is how long until lim has a whole token.
func rateWait(lim *rate.Limiter, now time.Time) time.Duration {
	missing := 1 - lim.TokensAt(now)
	if missing <= 0 {
		return 0
	}
	// Rounded up: waking a moment early would find no token again.
	return time.Duration(math.Ceil(missing / float64(lim.Limit()) * float64(time.Second)))
}

// limits are a limiter's settings; zero without one.
type limits struct {
	perSecond rate.Limit
	burst     int
}

func rateOf(lim *rate.Limiter) limits {
	if lim == nil {
		return limits{}
	}
	return limits{lim.Limit(), lim.Burst()}
}
