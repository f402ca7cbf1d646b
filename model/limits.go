package model

import (
	"strconv"
	"time"
)

// LimitRule is one entry of a policy's limit schedule: while When applies,
// at most MaxInFlight tokens are out (0: events wait, no token is granted)
// and, if RatePerSecond is positive, at most that many events a second go.
type LimitRule struct {
	When          LimitWhen `json:"when"`
	MaxInFlight   int       `json:"maxInFlight"`
	RatePerSecond float64   `json:"ratePerSecond,omitempty"`
}

// LimitWhen is when a LimitRule applies: on Days ("mon".."sun") between the
// local times of day From and To ("15:04"; "" is the start or end of the
// day) in Timezone, or while the tenant's calendar CalendarID covers the
// instant. Exactly one form is set.
type LimitWhen struct {
	Days       []string `json:"days,omitempty"`
	From       string   `json:"from,omitempty"`
	To         string   `json:"to,omitempty"`
	Timezone   string   `json:"timezone,omitempty"`
	CalendarID string   `json:"calendarId,omitempty"`
}

// PolicyHold is a temporary ceiling on a policy's tokens set by its
// consumer (or tenant): at most MaxInFlight out (0 stops the inflow) until
// Until, when it ends by itself. By is the prefix of the key that set it.
type PolicyHold struct {
	Until       time.Time `json:"until"`
	MaxInFlight int       `json:"maxInFlight"`
	SetAt       time.Time `json:"setAt"`
	By          string    `json:"by,omitempty"`
}

// Active reports whether h applies at now.
func (h *PolicyHold) Active(now time.Time) bool { return h != nil && now.Before(h.Until) }

// Sources of a policy's effective limit (EffectiveCap.Source): its own
// MaxInFlight, its adaptive limit, a hold, or "limits[i]", the rule of its
// limit schedule that applies.
const (
	LimitSourcePolicy   = "policy"
	LimitSourceAdaptive = "adaptive"
	LimitSourceHold     = "hold"
)

// Cap is what a policy's limit schedule allows at an instant. MaxInFlight
// is -1 when no rule applies; RatePerSecond 0 when no applying rule sets a
// rate. Rule is the index of the rule that sets MaxInFlight (-1: none);
// Next is the next instant at which the answer may change (zero: never).
type Cap struct {
	MaxInFlight   int
	RatePerSecond float64
	Rule          int
	Next          time.Time
}

// NoCap is the Cap of a policy without a limit schedule.
var NoCap = Cap{MaxInFlight: -1, Rule: -1}

// Effective is the limit p lets out at now and its source: the least of
// its own limit (Limit), the applying rule of its limit schedule (c) and
// an active hold (see EffectiveLimit).
func (p *Policy) Effective(c Cap, now time.Time) (limit int, source string) {
	source = LimitSourcePolicy
	if p.Adaptive != nil {
		source = LimitSourceAdaptive
	}
	return EffectiveLimit(p.Limit(), source, c, p.Hold, now)
}

// EffectiveLimit is the least of own (from ownSource), c's MaxInFlight and
// h's while h is active, with the source of the one taken. Ties go to own,
// then the rule.
func EffectiveLimit(own int, ownSource string, c Cap, h *PolicyHold, now time.Time) (limit int, source string) {
	limit, source = own, ownSource
	if c.MaxInFlight >= 0 && c.MaxInFlight < limit {
		limit, source = c.MaxInFlight, LimitRuleSource(c.Rule)
	}
	if h.Active(now) && h.MaxInFlight < limit {
		limit, source = h.MaxInFlight, LimitSourceHold
	}
	return limit, source
}

// EffectiveRate is the rate p lets out under c: the lower of its own rate
// and the applying rule's (0: no rate), and the burst that goes with it.
func (p *Policy) EffectiveRate(c Cap) (perSecond float64, burst int) {
	r, b := p.RatePerSecond, p.Burst
	if c.RatePerSecond > 0 && (r == 0 || c.RatePerSecond < r) {
		return c.RatePerSecond, DefaultBurst(c.RatePerSecond)
	}
	return r, b
}

// NextChange is the next instant after which p's effective limit may
// change by time alone: c.Next or the end of an active hold, whichever
// comes first; zero if neither.
func (p *Policy) NextChange(c Cap, now time.Time) time.Time {
	next := c.Next
	if h := p.Hold; h.Active(now) && (next.IsZero() || h.Until.Before(next)) {
		next = h.Until
	}
	return next
}

// LimitRuleSource names rule i of a limit schedule as a limit source.
func LimitRuleSource(i int) string { return "limits[" + strconv.Itoa(i) + "]" }
