package throttle

import (
	"context"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
)

// An adaptive policy (model.Policy.Adaptive) keeps MaxInFlight = Adaptive.Max
// in the store, which enforces it as the ceiling across instances. Its owner,
// the only process that acquires the policy's tokens, enforces the lower
// effective limit: before acquiring it reads the persisted InUse and asks
// only for what fits under the limit, and releases do not hand their token
// on while the tokens out exceed it.
//
// The limit follows the consumer's signals, after TCP CUBIC: it remembers
// the level at which the consumer last said it was overloaded (wmax), comes
// back towards it quickly, holds just below it for a few windows before it
// tries it again (more windows each time the same level fails again), and
// grows faster and faster beyond it once the consumer takes it. A 429 or
// 503 takes one off the limit (one request more than the consumer takes),
// each further one in the same window one more, down to ×0.9. A timeout,
// a 5xx share over adaptiveServerErrorShare, or a window whose mean
// latency exceeds adaptiveLatencyGrowth times the best (of responses: the
// best window ever; of releases, for policies without autoRelease: the
// best of the last adaptiveRecent minutes) takes it ×0.9, once per window.
// A window is `limit` outcomes (or releases).

// Outcome is what a delivery attempt told about the consumer's capacity.
type Outcome int

const (
	OutcomeOK          Outcome = iota // accepted
	OutcomeOverloaded                 // 429 or 503, with or without Retry-After
	OutcomeTimeout                    // no answer in time
	OutcomeServerError                // another 5xx
	OutcomeOther                      // a failure that says nothing of capacity
)

const (
	// adaptiveDecrease is the multiplicative decrease: gentle, because
	// the window after a decrease ignores late signals and the limit
	// holds just below the level that failed.
	adaptiveDecrease         = 0.9
	adaptiveServerErrorShare = 0.1
	adaptiveLatencyGrowth    = 2.0
	// adaptiveHold and adaptiveMaxHold bound the healthy windows the
	// limit spends just below wmax before it tries wmax again.
	adaptiveHold    = 2
	adaptiveMaxHold = 8
	// adaptiveRecent is how far back "the best recent window" of release
	// latency looks, in whole minutes: a consumer that stays slower for
	// longer sets a new baseline.
	adaptiveRecent = 5
)

// Limit reasons, as in the policy's limitReason.
const (
	LimitReasonStart       = "start"
	LimitReasonHealthy     = "healthy"
	LimitReasonOverloaded  = "overloaded"
	LimitReasonTimeout     = "timeout"
	LimitReasonServerError = "server_errors"
	LimitReasonLatency     = "latency"
	LimitReasonBacklog     = "backlog"
)

// LimitState is a policy's effective limit and why it last changed.
type LimitState struct {
	Limit     int
	Reason    string
	ChangedAt time.Time
}

// aimd is one adaptive policy's controller.
type aimd struct {
	mu       sync.Mutex
	min, max int
	state    LimitState
	// The current window: observations since it began, successes, 5xx,
	// summed latency of successes.
	seen, ok, serverErr int
	latSum              time.Duration
	// decreased: the limit went down in this window, from from;
	// overloads: on an overload (further ones take it down further).
	decreased, overloads bool
	from                 int
	// wmax is the limit at which the consumer last said it was overloaded
	// (0: never). The limit holds at wmax-1 for hold healthy windows (held
	// so far) before it tries wmax again; at or beyond wmax it grows by
	// step, which doubles each healthy window.
	wmax, hold, held, step int
	// best is the lowest mean success latency of a full window.
	best time.Duration
	// rel is the window of release latencies (policies without
	// autoRelease): releases seen, their summed latency, and the best
	// window mean of each of the last adaptiveRecent minutes.
	rel struct {
		seen   int
		sum    time.Duration
		recent []minuteBest
	}
	// out is the owner's count of tokens out: the persisted InUse at the
	// last acquisition, plus what it acquired since, minus the tokens
	// it sent back instead of handing them on. peak is the most out in
	// the current window (tokensOut), never below out.
	out, peak int
	// adaptive: the limit follows the consumer's signals; otherwise it
	// is the policy's MaxInFlight and only cap and hold lower it (eff).
	adaptive bool
	// cap is what the policy's limit schedule allows now, brake its
	// hold (model.Policy.Hold).
	cap   model.Cap
	brake *model.PolicyHold
}

// effLocked is the limit the owner keeps the tokens out under, and its
// source (model.EffectiveLimit). c.mu held.
func (c *aimd) effLocked(now time.Time) (int, string) {
	src := model.LimitSourcePolicy
	if c.adaptive {
		src = model.LimitSourceAdaptive
	}
	return model.EffectiveLimit(c.state.Limit, src, c.cap, c.brake, now)
}

// limited reports whether the owner keeps p's tokens out under a limit of
// its own (a controller): p is adaptive, or has a limit schedule or a hold.
func limited(p *model.Policy) bool {
	return p.Adaptive != nil || len(p.Limits) > 0 || p.Hold != nil
}

// newAIMD starts at the limit the policy's previous owner persisted, else at
// Adaptive.Max.
func newAIMD(p *model.Policy, now time.Time) *aimd {
	a := p.Adaptive
	if a == nil {
		// A fixed limit: observations never move it (min = max).
		n := p.MaxInFlight
		return &aimd{min: n, max: n, state: LimitState{Limit: n, Reason: model.LimitSourcePolicy, ChangedAt: now}, hold: adaptiveHold, step: 1, cap: model.NoCap, brake: p.Hold}
	}
	st := LimitState{Limit: a.Max, Reason: LimitReasonStart, ChangedAt: now}
	if p.EffectiveLimit > 0 {
		st = LimitState{Limit: min(max(p.EffectiveLimit, a.Min), a.Max), Reason: p.LimitReason, ChangedAt: p.LimitChangedAt}
	}
	return &aimd{min: a.Min, max: a.Max, state: st, hold: adaptiveHold, step: 1, adaptive: true, cap: model.NoCap, brake: p.Hold}
}

// observe feeds one outcome; it returns the new state if the limit changed.
func (c *aimd) observe(o Outcome, latency time.Duration, now time.Time) (LimitState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen++
	reason := ""
	switch o {
	case OutcomeOK:
		c.ok++
		c.latSum += latency
	case OutcomeOverloaded:
		reason = LimitReasonOverloaded
	case OutcomeTimeout:
		reason = LimitReasonTimeout
	case OutcomeServerError:
		c.serverErr++
		if float64(c.serverErr) > adaptiveServerErrorShare*float64(max(c.seen, c.state.Limit)) {
			reason = LimitReasonServerError
		}
	}
	if reason != "" {
		if !c.decreased {
			return c.decrease(reason, now)
		}
		// Each further overload is one more request than the consumer
		// takes: one less again, down to ×0.9 of the limit the window
		// began with. No further: requests it accepted under an older,
		// higher limit make it refuse new ones until they end.
		if reason == LimitReasonOverloaded && c.overloads && c.state.Limit > max(c.min, int(float64(c.from)*adaptiveDecrease)) {
			c.wmax = c.state.Limit
			return c.set(c.state.Limit-1, reason, now)
		}
	}
	if c.seen < c.state.Limit {
		return c.state, false
	}
	// A full window.
	full, used := c.ok == c.seen && !c.decreased, c.pushed()
	mean := time.Duration(0)
	if c.ok > 0 {
		mean = c.latSum / time.Duration(c.ok)
	}
	c.newWindow()
	if mean > 0 && c.best > 0 && float64(mean) > adaptiveLatencyGrowth*float64(c.best) {
		return c.decrease(LimitReasonLatency, now)
	}
	if mean > 0 && (c.best == 0 || mean < c.best) {
		c.best = mean
	}
	if full && used && c.state.Limit < c.max {
		return c.grow(now)
	}
	return c.state, false
}

func (c *aimd) newWindow() {
	c.seen, c.ok, c.serverErr, c.latSum = 0, 0, 0, 0
	c.decreased, c.overloads = false, false
	c.peak = c.out
}

// pushed reports whether the tokens out reached half the limit in this
// window (the consumer saw enough load for its health to mean that it
// takes more). c.mu held.
func (c *aimd) pushed() bool { return 2*c.peak >= c.state.Limit }

// tokensOut records the owner's count of tokens out. c.mu held.
func (c *aimd) tokensOut(n int) {
	c.out = n
	c.peak = max(c.peak, n)
}

// decrease lowers the limit and starts a window in which no signal but
// further overloads lowers it again: the deliveries sent under the old
// limit still answer, and their signals are about that limit. The level
// that failed (wmax) is the limit before; an overload takes one off (the
// consumer took one request less), any other signal ×0.9.
func (c *aimd) decrease(reason string, now time.Time) (LimitState, bool) {
	c.newWindow()
	l := c.state.Limit
	c.decreased, c.from = true, l
	// The same level failing again holds the limit below it longer.
	if c.wmax == l {
		c.hold = min(2*c.hold, adaptiveMaxHold)
	} else {
		c.hold = adaptiveHold
	}
	c.wmax, c.held, c.step = l, 0, 1
	if reason == LimitReasonOverloaded {
		c.overloads = true
		return c.set(max(c.min, l-1), reason, now)
	}
	return c.set(max(c.min, int(float64(l)*adaptiveDecrease)), reason, now)
}

// grow raises the limit after a healthy window: halfway back up to just
// below wmax; there, after hold windows, to wmax; at or beyond it (or with
// no overload seen) by a step that doubles each window, up to an eighth of
// the limit (a consumer whose capacity grew gets there fast, and one that
// did not sees at most an eighth too many requests).
func (c *aimd) grow(now time.Time) (LimitState, bool) {
	l := c.state.Limit
	next := l
	switch {
	case c.wmax == 0 || l >= c.wmax:
		s := min(c.step, max(1, l/8))
		next, c.step = l+s, 2*s
	case l < c.wmax-1:
		next = l + max(1, (c.wmax-1-l)/2)
	default:
		if c.held++; c.held < c.hold {
			return c.state, false
		}
		next, c.held = c.wmax, 0
	}
	return c.set(min(next, c.max), LimitReasonHealthy, now)
}

// minuteBest is the best window mean of release latency in one minute.
type minuteBest struct {
	minute time.Time
	best   time.Duration
}

// observeRelease feeds the time from a delivery to its release: a window
// of `limit` releases whose mean exceeds adaptiveLatencyGrowth times the
// best window of the last adaptiveRecent minutes lowers the limit.
func (c *aimd) observeRelease(d time.Duration, now time.Time) (LimitState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rel.seen++
	c.rel.sum += d
	if c.rel.seen < c.state.Limit {
		return c.state, false
	}
	mean := c.rel.sum / time.Duration(c.rel.seen)
	c.rel.seen, c.rel.sum = 0, 0
	minute := now.Truncate(time.Minute)
	recent := c.rel.recent[:0]
	best := time.Duration(0)
	for _, m := range c.rel.recent {
		if minute.Sub(m.minute) < adaptiveRecent*time.Minute {
			recent = append(recent, m)
			if best == 0 || m.best < best {
				best = m.best
			}
		}
	}
	if n := len(recent); n > 0 && recent[n-1].minute.Equal(minute) {
		recent[n-1].best = min(recent[n-1].best, mean)
	} else {
		recent = append(recent, minuteBest{minute, mean})
	}
	c.rel.recent = recent
	if best > 0 && float64(mean) > adaptiveLatencyGrowth*float64(best) && !c.decreased {
		return c.decrease(LimitReasonLatency, now)
	}
	return c.state, false
}

// backlog lowers the limit of an SQS policy whose queue grows: a
// multiplicative decrease if the backlog exceeds the limit and grew since
// the last reading, an additive increase if it is empty while the tokens
// out reach half the limit.
func (c *aimd) backlog(prev, cur int, now time.Time) (LimitState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case cur > c.state.Limit && cur > prev:
		return c.set(max(c.min, int(float64(c.state.Limit)*adaptiveDecrease)), LimitReasonBacklog, now)
	case cur == 0 && c.state.Limit < c.max && c.pushed():
		return c.set(c.state.Limit+1, LimitReasonHealthy, now)
	}
	return c.state, false
}

func (c *aimd) set(limit int, reason string, now time.Time) (LimitState, bool) {
	if limit == c.state.Limit {
		return c.state, false
	}
	c.state = LimitState{Limit: limit, Reason: reason, ChangedAt: now}
	return c.state, true
}

// adaptiveSet holds the controllers of the adaptive policies this process
// has seen.
type adaptiveSet struct {
	mu sync.Mutex
	m  map[string]*aimd
}

// of returns p's controller, creating or resizing it; nil if p is not
// adaptive.
func (s *adaptiveSet) of(p *model.Policy, now time.Time) *aimd {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p == nil || !limited(p) {
		if p != nil {
			delete(s.m, p.ID)
		}
		return nil
	}
	c := s.m[p.ID]
	if c == nil || c.adaptive != (p.Adaptive != nil) {
		if s.m == nil {
			s.m = map[string]*aimd{}
		}
		c = newAIMD(p, now)
		s.m[p.ID] = c
		return c
	}
	c.mu.Lock()
	reason := LimitReasonStart
	if a := p.Adaptive; a != nil {
		c.min, c.max = a.Min, a.Max
	} else {
		c.min, c.max, reason = p.MaxInFlight, p.MaxInFlight, model.LimitSourcePolicy
	}
	if l := min(max(c.state.Limit, c.min), c.max); l != c.state.Limit {
		c.state = LimitState{Limit: l, Reason: reason, ChangedAt: now}
	}
	c.brake = p.Hold
	c.mu.Unlock()
	return c
}

// forget drops the controller of a deleted policy.
func (s *adaptiveSet) forget(policyID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, policyID)
}

func (s *adaptiveSet) get(policyID string) *aimd {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[policyID]
}

// getAdaptive is get for the controllers whose limit follows the
// consumer's signals; nil for the others.
func (s *adaptiveSet) getAdaptive(policyID string) *aimd {
	if c := s.get(policyID); c != nil && c.adaptive {
		return c
	}
	return nil
}

// LimitStore keeps the effective limit in the policy's representation
// (store.Driver does), for the API to show.
type LimitStore interface {
	PolicySetLimit(ctx context.Context, policyID string, limit int, reason string, at time.Time) error
}

// Observe reports a delivery outcome of policyID and its latency. It moves
// the limit of an adaptive policy; it does nothing for another policy.
func (t *Throttle) Observe(policyID string, o Outcome, latency time.Duration) {
	c := t.adapt.getAdaptive(policyID)
	if c == nil {
		return
	}
	if st, changed := c.observe(o, latency, t.deps.Clock.Now()); changed {
		t.limitChanged(policyID, st)
	}
}

// ObserveRelease reports the time from a delivery of policyID to its
// release by the consumer (Release calls it). It moves the limit of an
// adaptive policy this process owns; it does nothing for another policy,
// or for releases served by an instance that does not own the policy.
func (t *Throttle) ObserveRelease(policyID string, held time.Duration) {
	c := t.adapt.getAdaptive(policyID)
	if c == nil {
		return
	}
	if st, changed := c.observeRelease(max(held, 0), t.deps.Clock.Now()); changed {
		t.limitChanged(policyID, st)
	}
}

// ObserveBacklog reports the backlog of an adaptive SQS policy's queue
// (prev: the previous reading). It returns false if this process keeps no
// limit for policyID (not adaptive, deleted, or owned elsewhere): its
// queue need not be read.
func (t *Throttle) ObserveBacklog(policyID string, prev, cur int) bool {
	c := t.adapt.getAdaptive(policyID)
	if c == nil {
		return false
	}
	if st, changed := c.backlog(prev, cur, t.deps.Clock.Now()); changed {
		t.limitChanged(policyID, st)
	}
	return true
}

// Limit returns the effective limit of an adaptive policy this process
// owns; false if it has none.
func (t *Throttle) Limit(policyID string) (LimitState, bool) {
	c := t.adapt.getAdaptive(policyID)
	if c == nil {
		return LimitState{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state, true
}

func (t *Throttle) limitChanged(policyID string, st LimitState) {
	if lim, src, ok := t.Effective(policyID); ok {
		t.deps.Metrics.EffectiveLimit(policyID, lim)
		t.deps.Metrics.LimitSource(policyID, src)
	}
	t.log.Info().Str(logkey.Policy, policyID).Int("effectiveLimit", st.Limit).Str("limitReason", st.Reason).Msg("policy limit changed")
	t.mu.Lock()
	b := t.buckets[policyID]
	t.mu.Unlock()
	if b != nil {
		signal(b.released) // a raised limit may let waiting events out
	}
	if ls := t.deps.Limits; ls != nil {
		// Off the delivery path; the latest state is written.
		go func() {
			c := t.adapt.get(policyID)
			if c == nil {
				return
			}
			c.mu.Lock()
			st := c.state
			c.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), persistLimitTimeout)
			defer cancel()
			if err := ls.PolicySetLimit(ctx, policyID, st.Limit, st.Reason, st.ChangedAt); err != nil {
				t.log.Warn().Err(err).Str(logkey.Policy, policyID).Msg("recording the policy's effective limit failed")
			}
		}()
	}
}

// persistLimitTimeout bounds the write of an effective limit.
const persistLimitTimeout = 10 * time.Second

// Effective returns the limit the owner keeps policyID's tokens under and
// its source (model.LimitSource*, or "limits[i]"); false if this process
// keeps no limit of its own for it (it owns no bucket of it, or the
// policy has nothing but its MaxInFlight, which the store enforces).
func (t *Throttle) Effective(policyID string) (limit int, source string, ok bool) {
	c := t.adapt.get(policyID)
	if c == nil {
		return 0, "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	limit, source = c.effLocked(t.deps.Clock.Now())
	return limit, source, true
}

// headroom caps want at what fits under b's effective limit (its adaptive
// limit, limit schedule and hold); want itself for a policy without one.
// It reads the persisted InUse.
func (b *bucket) headroom(ctx context.Context, want int) (int, error) {
	now := b.t.deps.Clock.Now()
	c := b.t.adapt.of(b.getPolicy(), now)
	if c == nil {
		return want, nil
	}
	p, err := b.t.deps.Store.PolicyGetByID(ctx, b.policyID)
	if err != nil {
		return 0, err
	}
	capNow := b.capNow()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cap = capNow
	c.tokensOut(p.InUse)
	eff, _ := c.effLocked(now)
	return max(0, min(want, eff-c.out)), nil
}

// acquired counts n tokens taken from the store.
func (b *bucket) acquired(n int) {
	if c := b.t.adapt.get(b.policyID); c != nil {
		c.mu.Lock()
		c.tokensOut(c.out + n)
		c.mu.Unlock()
	}
}

// overLimit reports whether a released token of policyID must go back to
// the store instead of to a waiting event (the tokens out exceed the
// effective limit); if so and returning, it counts the token as gone back.
func (t *Throttle) overLimit(policyID string, returning bool) bool {
	c := t.adapt.get(policyID)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if eff, _ := c.effLocked(t.deps.Clock.Now()); c.out > eff {
		if returning {
			c.out--
		}
		return true
	}
	return false
}
