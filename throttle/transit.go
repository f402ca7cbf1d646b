package throttle

// Events in transit.
//
// An event taken from a bucket's queue for a token (acquired, a gift, or a
// release's hand-over) is still in this process's memory while its start
// is written and until the handler has it in its delivery queues
// (Forwarded), unless it goes back to the queue or is dropped (its start
// lost or unknown, the throttle stopping). Its bucket counts it (out) under
// the mutex of its queue, so that Holding reads each event once, waiting or
// in transit, and the handler's bound on claimed events in memory holds
// exactly.

// takenLocked counts items, just taken from b's queue, as in transit and
// marks them as b's. b.mu is held.
func (b *bucket) takenLocked(items []Item) {
	b.out += len(items)
	for i := range items {
		items[i].from = b
	}
}

// doneTransit ends the transit of n of b's items: they went back to the queue
// (counted there since) or left this process's memory.
func (b *bucket) doneTransit(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.out -= n
	b.mu.Unlock()
}

// requeue puts items back into b's queue: they are waiting again.
func (b *bucket) requeue(items []Item) {
	b.mu.Lock()
	for _, it := range items {
		b.q.Push(it)
	}
	b.out -= len(items)
	b.mu.Unlock()
}

// settleItems ends the transit of items, whichever bucket each is from.
func settleItems(items []Item) {
	for _, it := range items {
		if it.from != nil {
			it.from.doneTransit(1)
		}
	}
}

// Forwarded tells t that items, taken from Dispatched, are in the
// handler's delivery queues: they are no longer in transit. The handler
// calls it in the same critical section as it queues them and reads
// Holding, so that it counts each event once.
func (t *Throttle) Forwarded(items []Item) { settleItems(items) }

// Holding returns how many events t holds in memory: waiting in its
// buckets (those winding down too) and in transit to the handler.
func (t *Throttle) Holding() int {
	t.mu.Lock()
	bs := make([]*bucket, 0, len(t.live))
	for b := range t.live {
		bs = append(bs, b)
	}
	t.mu.Unlock()
	n := 0
	var gone []*bucket
	for _, b := range bs {
		b.mu.Lock()
		if !b.finished {
			n += b.q.Len()
		}
		n += b.out
		if b.finished && b.out == 0 {
			gone = append(gone, b)
		}
		b.mu.Unlock()
	}
	if len(gone) > 0 {
		// A finished bucket takes nothing from its queue again: its count
		// stays zero.
		t.mu.Lock()
		for _, b := range gone {
			delete(t.live, b)
		}
		t.mu.Unlock()
	}
	return n
}

// PolicyWaiting is how many events of a policy wait for tokens in its
// bucket, and the bucket's shard.
type PolicyWaiting struct {
	Shard   int
	Waiting int
}

// WaitingByPolicy returns the policies with events waiting in t's buckets.
func (t *Throttle) WaitingByPolicy() map[string]PolicyWaiting {
	t.mu.Lock()
	bs := make([]*bucket, 0, len(t.buckets))
	for _, b := range t.buckets {
		bs = append(bs, b)
	}
	t.mu.Unlock()
	out := map[string]PolicyWaiting{}
	for _, b := range bs {
		b.mu.Lock()
		if n := b.q.Len(); n > 0 {
			out[b.policyID] = PolicyWaiting{Shard: b.shard, Waiting: n}
		}
		b.mu.Unlock()
	}
	return out
}
