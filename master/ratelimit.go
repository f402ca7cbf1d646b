package master

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// rateLimiter is one token bucket per scope (tenant id or "admin").
type rateLimiter struct {
	rate  float64 // tokens per second
	burst float64
	clock clockwork.Clock

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(cfg RateLimit, clock clockwork.Clock) *rateLimiter {
	return &rateLimiter{rate: cfg.PerSecond, burst: float64(cfg.Burst), clock: clock, buckets: make(map[string]*bucket)}
}

// allow takes one token of scope's bucket. If none is left it reports how
// long until one will be.
func (l *rateLimiter) allow(scope string) (bool, time.Duration) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[scope]
	if !ok {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[scope] = b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(l.burst, b.tokens+el*l.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}
