package master

import (
	"time"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/model"
)

// setLimit applies a request's maxInFlight (nil: unchanged) and adaptive to
// p. maxInFlight is the ceiling of an adaptive limit: adaptive.max, if given,
// must equal it. In an update, adaptive.min 0 removes adaptive.
func setLimit(fe *fieldErrors, p *model.Policy, maxInFlight *int, adaptive *api.AdaptiveLimit, update bool) {
	if maxInFlight != nil {
		p.MaxInFlight = *maxInFlight
	}
	a := p.Adaptive
	switch {
	case adaptive != nil && adaptive.Min == 0 && update:
		if adaptive.Max != nil {
			fe.add("adaptive.max", "must be left out when adaptive.min 0 removes adaptive")
			return
		}
		a = nil
	case adaptive != nil:
		if adaptive.Min < 1 {
			fe.add("adaptive.min", "must be at least 1")
			return
		}
		if adaptive.Max != nil && *adaptive.Max != p.MaxInFlight {
			fe.add("adaptive.max", "must equal maxInFlight (or be left out): maxInFlight is the ceiling")
			return
		}
		a = &model.AdaptiveLimit{Min: adaptive.Min}
	case a != nil:
		a = &model.AdaptiveLimit{Min: a.Min}
	}
	if a == nil {
		p.Adaptive = nil
		p.EffectiveLimit, p.LimitReason, p.LimitChangedAt = 0, "", time.Time{}
		return
	}
	a.Max = p.MaxInFlight
	if a.Min > a.Max {
		field := "adaptive.min"
		if adaptive == nil {
			field = "maxInFlight"
		}
		fe.add(field, "adaptive.min must be at most maxInFlight")
		return
	}
	p.Adaptive = a
	if p.EffectiveLimit != 0 {
		// The owner clamps its limit to the new bounds; until it says
		// otherwise the representation does too.
		p.EffectiveLimit = min(max(p.EffectiveLimit, a.Min), a.Max)
	}
}

type limitState struct {
	limit  int
	reason string
	at     time.Time
}

// limitOf is an adaptive policy's effective limit as its owner last
// persisted it; Adaptive.Max from the policy's last update before that.
func limitOf(p *model.Policy) limitState {
	if p.EffectiveLimit == 0 {
		return limitState{limit: p.Adaptive.Max, reason: "start", at: p.UpdatedAt}
	}
	return limitState{limit: p.EffectiveLimit, reason: p.LimitReason, at: p.LimitChangedAt}
}
