package master

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"
)

// rateLimiter is one token bucket per scope (tenant id or "admin").
type rateLimiter struct {
	limit rate.Limit
	burst int
	clock clockwork.Clock

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newRateLimiter(cfg RateLimit, clock clockwork.Clock) *rateLimiter {
	return &rateLimiter{limit: rate.Limit(cfg.PerSecond), burst: cfg.Burst, clock: clock, buckets: make(map[string]*rate.Limiter)}
}

// allow takes one token of scope's bucket. If none is left it reports how
// long until one will be.
func (l *rateLimiter) allow(scope string) (bool, time.Duration) {
	now := l.clock.Now()
	l.mu.Lock()
	b, ok := l.buckets[scope]
	if !ok {
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[scope] = b
	}
	l.mu.Unlock()
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// failureLimiter counts failures (wrong release tokens) per key (a client
// address, an event) in fixed windows; a key with more than Max failures in
// its window is over the limit until the window ends.
type failureLimiter struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu   sync.Mutex
	keys map[string]*failures
}

type failures struct {
	n     int
	start time.Time
}

// failureLimiterSweep is the map size from which expired windows are
// dropped, so that many keys do not grow the map without bound; past
// failureLimiterCap new keys are not counted until windows expire.
const (
	failureLimiterSweep = 10_000
	failureLimiterCap   = 100_000
)

func newFailureLimiter(cfg WrongTokens, now func() time.Time) *failureLimiter {
	return &failureLimiter{max: cfg.Max, window: cfg.Window, now: now, keys: make(map[string]*failures)}
}

// fail counts one failure of key and returns how long key remains over the
// limit: 0 while it has had at most Max failures in its window.
func (l *failureLimiter) fail(key string) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.keys[key]
	if !ok || !now.Before(f.start.Add(l.window)) {
		if !ok && len(l.keys) >= failureLimiterSweep {
			for k, g := range l.keys {
				if !now.Before(g.start.Add(l.window)) {
					delete(l.keys, k)
				}
			}
			if len(l.keys) >= failureLimiterCap {
				return 0
			}
		}
		f = &failures{start: now}
		l.keys[key] = f
	}
	f.n++
	if f.n <= l.max {
		return 0
	}
	return f.start.Add(l.window).Sub(now)
}
