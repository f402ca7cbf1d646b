package handler

import (
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// WaitingKey labels the age of the oldest waiting event: the policy
// ("none" for unthrottled events) and the priority class
// (model.PriorityClass).
type WaitingKey struct {
	Policy   string
	Priority string
}

// ReportWaiting reports the age of the oldest due event that this instance
// holds and has not sent yet, per policy and priority class: the events
// waiting for a token in the throttle's buckets and those due in the timer
// heap or the delivery queues (delivery is behind). Claims take the
// earliest events first, so a due event still in the store is younger than
// those held. It reads the buckets' waiting events, the due part of the heap
// and the head of each schedule's delivery queue, not the store.
func (h *Handler) ReportWaiting() {
	now := h.deps.Clock.Now()
	oldest := map[WaitingKey]time.Time{}
	add := func(policy string, priority int, launch time.Time) {
		if launch.After(now) {
			return
		}
		if policy == "" {
			policy = "none"
		}
		k := WaitingKey{Policy: policy, Priority: model.PriorityClass(priority)}
		if cur, ok := oldest[k]; !ok || launch.Before(cur) {
			oldest[k] = launch
		}
	}
	h.mu.Lock()
	// Only the due part of the heap: a node not due has no due children.
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h.heap) || h.heap[i].it.Event.LaunchAt.After(now) {
			continue
		}
		e := h.heap[i].it.Event
		add(e.PolicyID, e.Priority, e.LaunchAt)
		stack = append(stack, 2*i+1, 2*i+2)
	}
	h.mu.Unlock()
	h.queue.heads(func(e *model.Event) { add(e.PolicyID, e.Priority, e.LaunchAt) })
	for policy, byPrio := range h.thr.OldestWaiting() {
		for p, launch := range byPrio {
			add(policy, p, launch)
		}
	}
	ages := make(map[WaitingKey]time.Duration, len(oldest))
	for k, launch := range oldest {
		ages[k] = now.Sub(launch)
	}
	h.deps.Metrics.OldestWaiting(ages)
}
