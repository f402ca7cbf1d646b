package handler

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/throttle"
)

// limitObserver is the throttle's adaptive-limit input: delivery outcomes of
// throttled events, by policy (see throttle/adaptive.go).
type limitObserver interface {
	Observe(policyID string, o throttle.Outcome, latency time.Duration)
}

// observeLimits reports the outcomes of a delivered batch to the throttle,
// which moves the limits of adaptive policies.
func (h *Handler) observeLimits(items []throttle.Item, results []delivery.Result, latency time.Duration) {
	lo, ok := h.thr.(limitObserver)
	if !ok {
		return
	}
	for i, it := range items {
		if it.Policy == nil || it.Policy.Adaptive == nil || i >= len(results) {
			continue
		}
		lo.Observe(it.Policy.ID, outcomeOf(results[i]), latency)
	}
}

// outcomeOf classifies r for the adaptive limit.
func outcomeOf(r delivery.Result) throttle.Outcome {
	if r.Err == nil {
		return throttle.OutcomeOK
	}
	switch {
	case r.StatusCode == http.StatusTooManyRequests, r.StatusCode == http.StatusServiceUnavailable:
		return throttle.OutcomeOverloaded
	case r.StatusCode >= 500:
		return throttle.OutcomeServerError
	}
	var ne net.Error
	if errors.Is(r.Err, context.DeadlineExceeded) || errors.As(r.Err, &ne) && ne.Timeout() {
		return throttle.OutcomeTimeout
	}
	return throttle.OutcomeOther
}
