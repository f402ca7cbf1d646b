package throttle

import (
	"context"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
)

// HoldStore keeps a policy's measured hold time (store.Driver does).
type HoldStore interface {
	PolicySetHoldTime(ctx context.Context, policyID string, hold time.Duration) error
}

// holdWeight is the number of recent holds the mean mostly reflects: each
// new hold moves it by 1/holdWeight (once that many were seen).
const holdWeight = 50

// holdPersistEvery bounds how often a policy's hold time is written: at
// most once per interval, and only when it moved by holdPersistChange.
const (
	holdPersistEvery  = 5 * time.Second
	holdPersistChange = 0.05
)

// holdSet is the running mean hold time (delivery to release: the consumer's
// release call, or the answer of a policy that releases at delivery) of
// each policy this process has seen released.
type holdSet struct {
	mu sync.Mutex
	m  map[string]*holdMean
}

type holdMean struct {
	n         int
	mean      float64 // nanoseconds
	persisted float64
	at        time.Time // of the last write
	writing   bool
}

// ObserveHold reports how long a token of policyID was held, from the
// delivery of its event to its release. The policy's running mean is
// written to Deps.Holds now and then (model.Policy.HoldTime), off the
// delivery path.
func (t *Throttle) ObserveHold(policyID string, held time.Duration) {
	if policyID == "" || held < 0 {
		return
	}
	now := t.deps.Clock.Now()
	s := &t.holds
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]*holdMean{}
	}
	h := s.m[policyID]
	if h == nil {
		h = &holdMean{}
		s.m[policyID] = h
	}
	h.n = min(h.n+1, holdWeight)
	h.mean += (float64(held) - h.mean) / float64(h.n)
	write := t.deps.Holds != nil && !h.writing && now.Sub(h.at) >= holdPersistEvery &&
		(h.persisted == 0 || abs(h.mean-h.persisted) > holdPersistChange*h.persisted)
	mean := time.Duration(h.mean)
	if write {
		h.writing, h.at, h.persisted = true, now, h.mean
	}
	s.mu.Unlock()
	if !write {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), persistLimitTimeout)
		defer cancel()
		if err := t.deps.Holds.PolicySetHoldTime(ctx, policyID, mean); err != nil {
			t.log.Warn().Err(err).Str(logkey.Policy, policyID).Msg("recording the policy's hold time failed")
		}
		s.mu.Lock()
		h.writing = false
		s.mu.Unlock()
	}()
}

// HoldTime returns the running mean hold time of policyID measured here;
// false before any release of it.
func (t *Throttle) HoldTime(policyID string) (time.Duration, bool) {
	t.holds.mu.Lock()
	defer t.holds.mu.Unlock()
	h := t.holds.m[policyID]
	if h == nil || h.n == 0 {
		return 0, false
	}
	return time.Duration(h.mean), true
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
