package model

import "time"

// Limit is the number of tokens the policy lets out at once now: its
// adaptive limit when one is set, else MaxInFlight.
func (p *Policy) Limit() int {
	if p.Adaptive != nil && p.EffectiveLimit > 0 {
		return p.EffectiveLimit
	}
	return p.MaxInFlight
}

// Throughput is the events per second the policy can drain: its limit
// divided by the measured hold time, bounded by its rate. ok is false when
// neither is known (no rate, no hold time measured yet).
func (p *Policy) Throughput() (perSecond float64, ok bool) {
	var byHold float64
	if p.HoldTime > 0 {
		byHold = float64(p.Limit()) / p.HoldTime.Seconds()
	}
	switch {
	case p.RatePerSecond > 0 && byHold > 0:
		return min(p.RatePerSecond, byHold), true
	case p.RatePerSecond > 0:
		return p.RatePerSecond, true
	case byHold > 0:
		return byHold, true
	}
	return 0, false
}

// DrainTime is how long the policy takes to deliver n events at its
// Throughput; ok is false when the throughput is unknown.
func (p *Policy) DrainTime(n int) (time.Duration, bool) {
	r, ok := p.Throughput()
	if !ok {
		return 0, false
	}
	return time.Duration(float64(n) / r * float64(time.Second)), true
}
