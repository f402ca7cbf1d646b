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

// BacklogReader reads the backlog of an SQS queue
// (ApproximateNumberOfMessages); *sqsdelivery.Deliverer implements it.
type BacklogReader interface {
	Backlog(ctx context.Context, queueURL string) (int, error)
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
	if h.deps.Backlogs == nil {
		return nil
	}
	h.backlogs.mu.Lock()
	polls := h.backlogs.m
	h.backlogs.m = nil
	h.backlogs.mu.Unlock()
	var errs []error
	for policyID, q := range polls {
		n, err := h.deps.Backlogs.Backlog(ctx, q.queueURL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		prev := n
		if q.read {
			prev = q.last
		}
		if !h.thr.ObserveBacklog(policyID, prev, n) {
			continue // deleted, no longer adaptive, or owned elsewhere
		}
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

// adaptiveHTTP reports whether items hold an event of an adaptive policy;
// a group of http or http_batch deliveries that does is sent one event per
// call (deliverEach). An http_batch event then goes in a request of its
// own: the limit learns from each event's own answer and latency, which a
// batch's answer, slower the more events it holds, would blur.
func adaptiveHTTP(items []throttle.Item, idx []int) bool {
	for _, i := range idx {
		if p := items[i].Policy; p != nil && p.Adaptive != nil {
			return true
		}
	}
	return false
}

// deliverEach delivers evs (the events of items) one per call, all at
// once. As each answer comes, it reports it to the adaptive limit (with its
// own latency) and queues its outcome for the writers: a batch answered as
// a whole would hold every token until its slowest answer, and keep the
// consumer's load in lockstep batches that reach it all at once.
func (h *Handler) deliverEach(ctx context.Context, d Deliverer, evs []*model.Event, items []throttle.Item) []delivery.Result {
	rs := make([]delivery.Result, len(evs))
	var wg sync.WaitGroup
	for j := range evs {
		wg.Go(func() {
			start := h.deps.Clock.Now()
			r := d.Deliver(ctx, evs[j:j+1])
			if len(r) == 1 {
				rs[j] = r[0]
			} else {
				rs[j] = delivery.Result{Err: errors.New("deliverer returned no result")}
			}
			now := h.deps.Clock.Now()
			h.answer(items[j], rs[j], now.Sub(start))
			h.outcomes.put(h.outcomesAt(&outcomes{items: items[j : j+1], results: rs[j : j+1], traces: []string{evs[j].TraceParent}}, now))
		})
	}
	wg.Wait()
	return rs
}

// answer reports the consumer's answer r to a delivery of it to the
// throttle, which moves the limit of an adaptive policy.
func (h *Handler) answer(it throttle.Item, r delivery.Result, latency time.Duration) {
	if it.Policy == nil {
		return
	}
	if it.Policy.AutoRelease && r.Err == nil {
		// Its token goes back at the answer: the hold is the delivery.
		h.thr.ObserveHold(it.Policy.ID, latency)
	}
	if it.Policy.Adaptive == nil {
		return
	}
	if it.Event.Target.Type == model.TargetSQS {
		h.backlogs.seen(it.Policy.ID, it.Event.Target.QueueURL)
	}
	h.thr.Observe(it.Policy.ID, outcomeOf(r), latency)
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
