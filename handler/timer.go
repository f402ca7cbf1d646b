package handler

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/throttle"
)

// itemHeap is a min-heap of scheduled events by LaunchAt. Each entry
// keeps its launch as unix nanoseconds beside the item, so that ordering
// compares integers in the heap's own memory rather than reading every
// event it passes, and no item is boxed into an interface on its way in
// or out.
type itemHeap []heapEntry

type heapEntry struct {
	at int64 // launchKey(it.Event.LaunchAt)
	it throttle.Item
}

var (
	minKeyTime = time.Unix(0, math.MinInt64)
	maxKeyTime = time.Unix(0, math.MaxInt64)
)

// launchKey is t in unix nanoseconds, clamped to the range they can hold
// (years 1678-2262): a launch before it is due in any case, one after it
// not for centuries.
func launchKey(t time.Time) int64 {
	switch {
	case t.Before(minKeyTime):
		return math.MinInt64
	case t.After(maxKeyTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func (h *itemHeap) push(it throttle.Item) {
	*h = append(*h, heapEntry{at: launchKey(it.Event.LaunchAt), it: it})
	h.up(len(*h) - 1)
}

// pop removes and returns the earliest item; h must not be empty.
func (h *itemHeap) pop() throttle.Item {
	old := *h
	n := len(old) - 1
	top := old[0].it
	old[0] = old[n]
	old[n] = heapEntry{}
	*h = old[:n]
	if n > 0 {
		h.down(0)
	}
	return top
}

// init orders h after its entries changed in place.
func (h itemHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h itemHeap) up(i int) {
	e := h[i]
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].at <= e.at {
			break
		}
		h[i] = h[parent]
		i = parent
	}
	h[i] = e
}

func (h itemHeap) down(i int) {
	e := h[i]
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].at < h[c].at {
			c = r
		}
		if e.at <= h[c].at {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = e
}

// schedule puts claimed events into the timer heap.
func (h *Handler) schedule(items []throttle.Item) {
	if len(items) == 0 {
		return
	}
	h.mu.Lock()
	var head time.Time
	if len(h.heap) > 0 {
		head = h.heap[0].it.Event.LaunchAt
	}
	for _, it := range items {
		h.heap.push(it)
	}
	newHead := head.IsZero() || h.heap[0].it.Event.LaunchAt.Before(head)
	h.mu.Unlock()
	if newHead {
		select {
		case h.wakeT <- struct{}{}:
		default:
		}
	}
}

// Scheduled returns how many unsent events the handler holds outside the
// throttle: in the timer heap and, due, in the delivery queues.
func (h *Handler) Scheduled() int {
	h.mu.Lock()
	n := len(h.heap)
	h.mu.Unlock()
	return n + h.queue.Len()
}

// Held returns how many claimed events this handler holds in memory: in
// the timer heap, waiting in the throttle, on their way from the throttle
// to the delivery queues (holding a token), in the delivery queues, being
// delivered and with their outcomes not yet written. Events move between
// the handler's parts, and from the throttle into them, under mu, so each
// is counted once.
func (h *Handler) Held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.heap) + h.launching + h.thr.Holding() + h.queue.Len() + h.sent
}

// PeakHeld returns the most events Held right after a claim since the
// handler was made.
func (h *Handler) PeakHeld() int { return int(h.peak.Load()) }

// minClaim is the least room a claim pass waits for once MaxScheduled was
// reached, so that a drain of a few events does not cost a commit each.
func (h *Handler) minClaim() int {
	return max(1, min(h.cfg.ClaimBatch, h.cfg.MaxScheduled/4))
}

// passMax is the most events one prefetch pass claims over all shards.
func (h *Handler) passMax() int {
	return max(h.minClaim(), h.cfg.MaxScheduled/4)
}

// window is how many events of one policy may wait for tokens before the
// claims leave its other due events in the store: its part of half the
// bound, shared by the policies with waiting events, so that throttled
// backlogs leave the other half to the other events; at least a delivery
// batch (a quarter of the bound if that is less), so that a bucket finds
// events to hand its tokens to between claims.
func (h *Handler) window(policies int) int {
	least := max(1, min(h.cfg.MaxBatch, h.cfg.MaxScheduled/4))
	return max(least, h.cfg.MaxScheduled/(2*max(1, policies)))
}

// madeRoom wakes the prefetch loop if its last pass stopped at
// MaxScheduled, or left the events of a policy in the store that has
// drained to half its window: delivery has made room for the next claims.
func (h *Handler) madeRoom() {
	wake := h.full.Load() && h.cfg.MaxScheduled-h.Held() >= h.minClaim()
	if !wake {
		h.skippedMu.Lock()
		skipped, window := h.skipped, h.skipWindow
		h.skippedMu.Unlock()
		if len(skipped) > 0 {
			waiting := h.thr.WaitingByPolicy()
			for _, p := range skipped {
				if waiting[p].Waiting <= window/2 {
					wake = true
					break
				}
			}
		}
	}
	if wake {
		select {
		case h.wakeP <- struct{}{}:
		default:
		}
	}
}

// timerLoop sleeps until the earliest launch time, then hands every due
// event on: unthrottled ones to the delivery queues, throttled ones to their
// bucket.
func (h *Handler) timerLoop() {
	clock := h.deps.Clock
	timer := clock.NewTimer(time.Hour)
	defer timer.Stop()
	due := make([]throttle.Item, 0, h.cfg.MaxBatch)
	var last time.Time // the last wake that launched events
	for {
		now := clock.Now()
		due = due[:0]
		wait := time.Hour
		h.mu.Lock()
		for len(h.heap) > 0 && len(due) < h.cfg.MaxBatch {
			// Compared at full precision: a wake before the head's launch
			// instant (timer slack, a new head) only re-arms the timer.
			if d := h.heap[0].it.Event.LaunchAt.Sub(now); d > 0 {
				wait = d
				break
			}
			due = append(due, h.heap.pop())
		}
		h.launching = len(due)
		h.mu.Unlock()
		if len(due) > 0 {
			last = now
			if !h.launch(due) {
				return
			}
			continue
		}
		if h.cfg.LaunchGap > 0 && !last.IsZero() {
			// A head due within the gap waits for its end, with those
			// due by then.
			wait = max(wait, last.Add(h.cfg.LaunchGap).Sub(now))
		}
		wake := now.Add(wait)
		timer.Reset(wait)
		if now := clock.Now(); !now.Before(wake) && h.headDue(now) {
			// The clock passed the wake instant between the reading
			// above and arming the timer (a fake clock advanced at
			// once), so the timer would fire late: look again.
			continue
		}
		select {
		case <-h.stopCh:
			return
		case <-timer.Chan():
		case <-h.wakeT:
			timer.Stop()
		}
	}
}

// headDue reports whether the earliest event in the heap is due at now.
func (h *Handler) headDue(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.heap) > 0 && !h.heap[0].it.Event.LaunchAt.After(now)
}

// launch routes due events and starts the deliveries of the unthrottled
// ones in this goroutine; false when the handler is stopping.
func (h *Handler) launch(due []throttle.Item) bool {
	owned := *h.owned.Load()
	var throttled, ready []throttle.Item
	for _, it := range due {
		if f, ok := owned[it.Shard]; !ok || f != it.Fence {
			continue // shard lost: its next owner claims the event again
		}
		if it.Event.PolicyID != "" {
			throttled = append(throttled, it)
			continue
		}
		ready = append(ready, it)
	}
	select {
	case <-h.stopCh:
		return false
	default:
	}
	// Under mu, so that Held counts each event once, launching or queued.
	h.mu.Lock()
	h.queue.push(ready...)
	if len(throttled) > 0 {
		h.thr.Enqueue(throttled...)
	}
	h.launching = 0
	h.mu.Unlock()
	if len(ready) == 0 {
		return true
	}
	return h.startDeliveries()
}

func (h *Handler) wakeDispatch() {
	select {
	case h.wakeD <- struct{}{}:
	default:
	}
}

// forward takes the events that took a token from the throttle to the
// delivery queues, with those handed on meanwhile, and starts their
// deliveries. Once the handler stops, the run hands back what is queued.
func (h *Handler) forward() {
	in := h.thr.Dispatched()
	var got []throttle.Item
	for {
		select {
		case <-h.stopCh:
			return
		case it := <-in:
			got = append(got[:0], it)
		}
	more:
		for len(got) < h.cfg.MaxBatch {
			select {
			case it := <-in:
				got = append(got, it)
			default:
				break more
			}
		}
		// Under mu, so that Held counts each event once, in transit or
		// queued.
		h.mu.Lock()
		h.queue.push(got...)
		h.thr.Forwarded(got)
		h.mu.Unlock()
		clear(got)
		if !h.startDeliveries() {
			return
		}
	}
}

// prefetchLoop claims due events every PrefetchInterval, at once when the
// held shards change, and again at once while claims come back full. It is
// its own loop rather than a gocron job because it must react to lease
// changes immediately.
func (h *Handler) prefetchLoop() {
	clock := h.deps.Clock
	ticker := clock.NewTicker(h.cfg.PrefetchInterval)
	defer ticker.Stop()
	for {
		more, err := h.prefetch(h.workCtx)
		if err != nil && h.workCtx.Err() == nil {
			h.log.Warn().Err(err).Msg("prefetch failed")
		}
		if more {
			select {
			case <-h.stopCh:
				return
			default:
			}
			continue
		}
		select {
		case <-h.stopCh:
			return
		case <-ticker.Chan():
		case <-h.deps.Shards.Changed():
		case <-h.wakeP:
		}
	}
}

// Prefetch runs one prefetch pass now: it picks up lease changes and claims
// the owned shards' events due within Horizon.
func (h *Handler) Prefetch(ctx context.Context) error {
	for {
		more, err := h.prefetch(ctx)
		if err != nil || !more {
			return err
		}
	}
}

// prefetch claims one batch per owned shard; more reports that some shard
// returned a full batch (and memory allows another pass). The shards are
// claimed concurrently, so that the store can put their claims into one
// commit (the embedded driver batches concurrent writes).
func (h *Handler) prefetch(ctx context.Context) (more bool, err error) {
	held := h.deps.Shards.Held()
	h.syncShards(held)
	dueBefore := h.deps.Clock.Now().Add(h.cfg.Horizon)
	// The room left under MaxScheduled is split over the owned shards, so
	// that claims never take more than it; a shard whose share comes back
	// full is claimed again once delivery makes room (madeRoom).
	least := 1
	if h.full.Load() {
		least = h.minClaim()
	}
	room := h.cfg.MaxScheduled - h.Held()
	if room < least || len(held) == 0 {
		h.full.Store(true)
		// Room made after the check above wakes the loop.
		if room = h.cfg.MaxScheduled - h.Held(); room < least || len(held) == 0 {
			return false, nil
		}
	}
	h.full.Store(false)
	// A pass takes at most a quarter of the bound (passMax): the claims
	// of a pass share a commit, which holds the writes of every event it
	// claims until it ends, so an empty handler filling up at once would
	// hold those of the whole bound besides the events. The next pass
	// follows at once.
	room = min(room, h.passMax())
	share := max(1, min(h.cfg.ClaimBatch, room/len(held)))
	// A policy whose events wait for tokens up to its window has its other
	// due events left in the store meanwhile (SkipPolicies): they cannot
	// take the room of the other events of its shard and of the others.
	waiting := h.thr.WaitingByPolicy()
	window := h.window(len(waiting))
	skip := map[int][]string{}
	var skipped []string
	for p, w := range waiting {
		if w.Waiting >= window {
			skip[w.Shard] = append(skip[w.Shard], p)
			skipped = append(skipped, p)
		}
	}
	h.skippedMu.Lock()
	h.skipped, h.skipWindow = skipped, window
	h.skippedMu.Unlock()
	if len(skipped) > 0 {
		// A policy that drained before the line above was not seen by
		// madeRoom: look once more.
		h.madeRoom()
	}
	early := h.thr.SendsEarly()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for shard, fence := range held {
		if room <= 0 {
			break
		}
		limit := min(share, room)
		room -= limit
		if !h.deps.Shards.Owns(shard, fence) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs, cerr := h.deps.Store.EventClaimDue(ctx, &store.EventClaimParams{
				Shard: shard, Fence: fence, DueBefore: dueBefore, Limit: limit, SkipPolicies: skip[shard]})
			if cerr != nil {
				// The store may have applied the claim and lost the reply:
				// those events would stay scheduled under this fence with
				// nobody holding them. Take the shard again under a new
				// fence, so that everything claimed under this one is
				// claimable again.
				h.deps.Shards.Refence(shard)
				mu.Lock()
				errs = append(errs, cerr)
				mu.Unlock()
				return
			}
			items := make([]throttle.Item, len(evs))
			now := h.deps.Clock.Now()
			for i, e := range evs {
				e.Status, e.Fence = model.EventScheduled, fence
				items[i] = throttle.Item{Event: e, Shard: shard, Fence: fence}
				if e.TakenOver && (e.PolicyID == "" || early) && !e.LaunchAt.After(now) {
					// Its previous owner may have sent it; give the
					// consumer's acknowledging release time to land. A
					// throttled one is sent only with its start, a
					// compare-and-set from scheduled, written first,
					// unless the throttle sends early: its release then
					// acknowledges it (scheduled → released), and the
					// start after the grace loses.
					e.LaunchAt = now.Add(h.cfg.TakeoverGrace)
					items[i].Recheck = e.PolicyID == ""
				}
			}
			h.schedule(items)
			if len(evs) > 0 {
				held := h.Held()
				for p := h.peak.Load(); int64(held) > p && !h.peak.CompareAndSwap(p, int64(held)); p = h.peak.Load() {
				}
				if f := h.deps.Hooks.Claimed; f != nil {
					f(len(evs), held)
				}
			}
			if len(evs) >= limit {
				mu.Lock()
				more = true
				mu.Unlock()
			} else {
				// Nothing is left scheduled under an older fence: a start
				// a previous owner sent can no longer apply.
				h.thr.MarkSettled(shard, fence)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		err = errs[0]
	}
	return more, err
}

// syncShards records the held shards; events of shards no longer held (or
// held under another fence) are dropped from memory.
func (h *Handler) syncShards(held map[int]int64) {
	old := *h.owned.Load()
	same := len(old) == len(held)
	if same {
		for s, f := range held {
			if of, ok := old[s]; !ok || of != f {
				same = false
				break
			}
		}
	}
	if same {
		return
	}
	cp := make(map[int]int64, len(held))
	for s, f := range held {
		cp[s] = f
	}
	h.owned.Store(&cp)
	h.thr.SyncShards(cp)
	h.mu.Lock()
	kept := h.heap[:0]
	for _, e := range h.heap {
		if f, ok := cp[e.it.Shard]; ok && f == e.it.Fence {
			kept = append(kept, e)
		}
	}
	clear(h.heap[len(kept):])
	h.heap = kept
	h.heap.init()
	h.mu.Unlock()
	// Due unthrottled events of lost shards too; throttled ones hold a
	// token and go (their start was written under the fence).
	h.queue.filter(func(it throttle.Item) bool {
		if it.Policy != nil {
			return true
		}
		f, ok := cp[it.Shard]
		return ok && f == it.Fence
	})
	h.log.Info().Int("shards", len(cp)).Msg("owned shards changed")
	select {
	case h.wakeT <- struct{}{}:
	default:
	}
}
