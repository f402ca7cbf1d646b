package handler

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// limitObserver is the throttle's adaptive-limit input: delivery outcomes of
// throttled events, by policy (see throttle/adaptive.go).
type limitObserver interface {
	Observe(policyID string, o throttle.Outcome, latency time.Duration)
}

// backlogReader is the SQS deliverer's port to a queue's backlog
// (ApproximateNumberOfMessages); *sqsdelivery.Deliverer implements it.
type backlogReader interface {
	Backlog(ctx context.Context, queueURL string) (int, error)
}

// backlogObserver is the throttle's input for the backlog of an adaptive
// policy's SQS queue.
type backlogObserver interface {
	ObserveBacklog(policyID string, prev, cur int)
}

// backlogInterval is how often the queues of adaptive SQS policies are read.
const backlogInterval = 5 * time.Second

// backlogs are the SQS queues adaptive policies delivered to lately, with
// their last reading.
type backlogs struct {
	mu sync.Mutex
	m  map[string]*backlog // by policy
}

type backlog struct {
	queueURL string
	last     int
	read     bool
}

// seen records that policyID delivered to queueURL.
func (b *backlogs) seen(policyID, queueURL string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]*backlog{}
	}
	if cur := b.m[policyID]; cur == nil || cur.queueURL != queueURL {
		b.m[policyID] = &backlog{queueURL: queueURL}
	}
}

// pollBacklogs reads the queue of every adaptive SQS policy delivered so far
// and reports the backlog to the throttle.
func (h *Handler) pollBacklogs(ctx context.Context) error {
	br, ok := h.deps.Deliverers[model.TargetSQS].(backlogReader)
	if !ok {
		return nil
	}
	bo, ok := h.thr.(backlogObserver)
	if !ok {
		return nil
	}
	h.backlogs.mu.Lock()
	polls := h.backlogs.m
	h.backlogs.m = nil
	h.backlogs.mu.Unlock()
	var errs []error
	for policyID, q := range polls {
		n, err := br.Backlog(ctx, q.queueURL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		prev := n
		if q.read {
			prev = q.last
		}
		bo.ObserveBacklog(policyID, prev, n)
		q.last, q.read = n, true
		// Kept for the next poll unless a delivery replaced it.
		h.backlogs.mu.Lock()
		if h.backlogs.m == nil {
			h.backlogs.m = map[string]*backlog{}
		}
		if _, replaced := h.backlogs.m[policyID]; !replaced {
			h.backlogs.m[policyID] = q
		}
		h.backlogs.mu.Unlock()
	}
	return errors.Join(errs...)
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
		if it.Event.Target.Type == model.TargetSQS {
			h.backlogs.seen(it.Policy.ID, it.Event.Target.QueueURL)
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
