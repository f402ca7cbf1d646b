package throttle

import (
	"context"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// In-process token hand-off.
//
// A token that comes back through the Throttle that owns the policy's bucket
// (a release served by (*Throttle).Release, a failed or auto-released
// delivery of this handler) does not need two durable writes (InUse-1 by the
// returner, InUse+1 by the bucket's next acquisition) to reach the next
// waiting event: the returner gives it to the bucket as a gift and the
// persisted InUse does not change. The bound across instances holds because
// InUse keeps counting the token the whole time: InUse >= events holding
// tokens + gifts not yet used, exactly as between an acquisition and its
// delivering write. A gift lost to a crash is a leaked token, which the
// bucket owner's reconciliation repairs (it counts the bucket's gifts as
// held). A bucket accepts gifts only while events wait and gives unused ones
// back to the store when it stops.
//
// Only a Throttle knows its buckets, so hand-off happens only through its
// methods (Release, ReturnTokens), which callers get as a dependency; the
// package-level Release, for callers with no Throttle in the process, always
// writes the token back.

// runningBuckets are a Throttle's buckets that take hand-offs, by policy id:
// from the end of a bucket's first reconciliation (its gifts are counted from
// then on) until its run ends. A policy can have two while a bucket replaced
// under a newer fence winds down.
type runningBuckets struct {
	mu sync.Mutex
	m  map[string][]*bucket
}

func (r *runningBuckets) add(b *bucket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string][]*bucket{}
	}
	r.m[b.policyID] = append(r.m[b.policyID], b)
}

func (r *runningBuckets) remove(b *bucket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	bs := r.m[b.policyID]
	for i, x := range bs {
		if x == b {
			bs = append(bs[:i:i], bs[i+1:]...)
			break
		}
	}
	if len(bs) == 0 {
		delete(r.m, b.policyID)
	} else {
		r.m[b.policyID] = bs
	}
}

// of returns a copy, so that callers lock each bucket without holding r.mu.
func (r *runningBuckets) of(policyID string) []*bucket {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*bucket(nil), r.m[policyID]...)
}

// handOff gives up to n tokens of policyID to t's running buckets that have
// events waiting for them; it returns how many were taken. The caller
// returns the rest to the store.
func (t *Throttle) handOff(policyID string, n int) int {
	if n <= 0 || t.overLimit(policyID, true) {
		return 0
	}
	given := 0
	for _, b := range t.running.of(policyID) {
		if given == n {
			break
		}
		given += b.gift(n - given)
	}
	return given
}

// gift adds up to n tokens to the bucket if events wait that no gift covers
// yet, and wakes it; it returns how many it took.
func (b *bucket) gift(n int) int {
	b.mu.Lock()
	if b.closed || b.keyedLocked() {
		b.mu.Unlock()
		return 0
	}
	take := min(n, b.q.Len()-b.gifts)
	if take <= 0 {
		b.mu.Unlock()
		return 0
	}
	b.gifts += take
	b.mu.Unlock()
	signal(b.released)
	return take
}

// returnGifts closes the bucket to gifts and gives the unused ones back to
// the store.
func (b *bucket) returnGifts(ctx context.Context) {
	b.mu.Lock()
	b.closed = true
	n := b.gifts
	b.gifts = 0
	b.mu.Unlock()
	if n > 0 {
		if err := returnTokens(context.WithoutCancel(ctx), b.t.deps.Store, b.policyID, n, 0); err != nil {
			b.t.log.Warn().Err(err).Str(logkey.Policy, b.policyID).Int("tokens", n).Msg("returning unused tokens failed")
		}
	}
}

// next is a waiting event taken from a running bucket by a release, to be
// started in the release's own store call: the release's transition and
// then this one with RequiresPrevious, so that the released event's token
// moves to the next event in one commit, without touching the policy's
// persisted InUse (which counts the token the whole time, as for a gift).
type next struct {
	b   *bucket
	it  Item
	p   *model.Policy
	exp time.Time
	at  time.Time
	// sent: dispatched; the dispatched copy's transit ends when it is
	// forwarded, whatever becomes of n.
	sent bool
}

// takeNext takes one waiting event of policyID, not covered by a gift, from
// one of t's running buckets, for the token of released (the event being
// released); nil if there is none.
func (t *Throttle) takeNext(policyID, released string) *next {
	if t.overLimit(policyID, false) {
		return nil
	}
	for _, b := range t.running.of(policyID) {
		b.mu.Lock()
		var it Item
		ok := false
		// A policy with a rate hands the token on only with a rate token;
		// otherwise the token goes back and the bucket's round sends the
		// event when the rate allows.
		if !b.closed && b.q.Len()-b.gifts > 0 {
			if b.keyedLocked() {
				it, ok = b.takeKeyedLocked(released)
			} else if b.lim == nil || b.lim.AllowN(t.deps.Clock.Now(), 1) {
				it, ok = b.q.Pop()
			}
		}
		if ok {
			its := []Item{it}
			b.takenLocked(its)
			it = its[0]
		}
		b.mu.Unlock()
		if !ok {
			continue
		}
		p := b.getPolicy()
		now := t.deps.Clock.Now()
		return &next{b: b, it: it, p: p, exp: now.Add(t.TokenTimeout(p)), at: now}
	}
	return nil
}

// transition is the next event's scheduled → delivering write, applied only
// if the release before it in the same call won.
func (n *next) transition() store.EventTransition {
	return store.StartDelivery(n.it.Event.ID, n.it.Fence, n.exp, n.at).AfterPrevious()
}

// putBack returns the event to its bucket's queue: it was not started.
func (n *next) putBack() {
	if n == nil {
		return
	}
	n.b.mu.Lock()
	delete(n.b.keys.pending, n.it.Event.ID)
	n.b.keys.remove(n.it.Event.ID)
	n.b.q.Push(n.it)
	if !n.sent {
		n.b.out--
	}
	n.b.mu.Unlock()
	signal(n.b.wake)
}

// dispatch hands the event (delivering, holding the token) to Dispatched
// without making the release caller wait for it. started, if not
// nil, is closed once the write that starts the event has returned (see
// Item.Started).
func (n *next) dispatch(started <-chan struct{}) {
	e := *n.it.Event
	e.Status = model.EventDelivering
	exp := n.exp
	e.TokenExpiresAt = &exp
	e.Fence = n.it.Fence
	it := n.it
	it.Event = &e
	it.Policy = n.p
	it.TokenAt = n.at
	it.Started = started
	n.sent = true
	go n.b.t.send([]Item{it})
}
