package throttle

import (
	"context"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// In-process token hand-off.
//
// A token that comes back in the process that owns the policy's bucket (a
// release call served here, a failed or auto-released delivery of this
// handler) does not need two durable writes (InUse-1 by the returner, InUse+1
// by the bucket's next acquisition) to reach the next waiting event: the
// returner gives it to the bucket as a gift and the persisted InUse does not
// change. The bound across instances holds because InUse keeps counting
// the token the whole time: InUse >= events holding tokens + gifts not yet
// used, exactly as between an acquisition and its delivering write. A gift
// lost to a crash is a leaked token, which the bucket owner's reconciliation
// repairs (it counts the bucket's gifts as held). A bucket accepts gifts only
// while events wait and gives unused ones back to the store when it stops.

// local lists the running buckets of this process by policy id.
var local = struct {
	sync.Mutex
	m map[string][]*bucket
}{m: map[string][]*bucket{}}

func registerBucket(b *bucket) {
	local.Lock()
	local.m[b.policyID] = append(local.m[b.policyID], b)
	local.Unlock()
}

func unregisterBucket(b *bucket) {
	local.Lock()
	defer local.Unlock()
	bs := local.m[b.policyID]
	for i, x := range bs {
		if x == b {
			bs = append(bs[:i:i], bs[i+1:]...)
			break
		}
	}
	if len(bs) == 0 {
		delete(local.m, b.policyID)
	} else {
		local.m[b.policyID] = bs
	}
}

// handOff gives up to n tokens of policyID to local buckets that keep their
// tokens in st and have events waiting for them; it returns how many were
// taken. The caller returns the rest to the store.
func handOff(st any, policyID string, n int) int {
	if n <= 0 {
		return 0
	}
	local.Lock()
	bs := append([]*bucket(nil), local.m[policyID]...)
	local.Unlock()
	given := 0
	for _, b := range bs {
		if given == n {
			break
		}
		if !sameStore(b.t.deps.Store, st) {
			continue
		}
		given += b.gift(n - given)
	}
	return given
}

// sameStore compares two store values; values of incomparable types are
// never the same.
func sameStore(a, b any) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// gift adds up to n tokens to the bucket if events wait that no gift covers
// yet, and wakes it; it returns how many it took.
func (b *bucket) gift(n int) int {
	b.mu.Lock()
	if b.closed {
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
			b.t.log.Warn().Err(err).Str("policy", b.policyID).Int("tokens", n).Msg("returning unused tokens failed")
		}
	}
}

// next is a waiting event taken from a local bucket by a release, to be
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
}

// takeNext takes one waiting event of policyID, not covered by a gift, from
// a local bucket that keeps its tokens in st; nil if there is none.
func takeNext(st any, policyID string) *next {
	local.Lock()
	bs := append([]*bucket(nil), local.m[policyID]...)
	local.Unlock()
	for _, b := range bs {
		if !sameStore(b.t.deps.Store, st) {
			continue
		}
		b.mu.Lock()
		var it Item
		ok := false
		if !b.closed && b.q.Len()-b.gifts > 0 {
			it, ok = b.q.Pop()
		}
		b.mu.Unlock()
		if !ok {
			continue
		}
		p := b.getPolicy()
		now := b.t.deps.Clock.Now()
		return &next{b: b, it: it, p: p, exp: now.Add(b.t.TokenTimeout(p)), at: now}
	}
	return nil
}

// transition is the next event's scheduled → delivering write, applied only
// if the release before it in the same call won.
func (n *next) transition() store.EventTransition {
	exp := n.exp
	return store.EventTransition{ID: n.it.Event.ID, From: model.EventScheduled, Fence: n.it.Fence,
		To: model.EventDelivering, TokenExpiresAt: &exp, At: n.at, RequiresPrevious: true}
}

// putBack returns the event to its bucket's queue: it was not started.
func (n *next) putBack() {
	if n == nil {
		return
	}
	n.b.mu.Lock()
	n.b.q.Push(n.it)
	n.b.mu.Unlock()
	signal(n.b.wake)
}

// dispatch hands the started event (now delivering, holding the token) to
// the bucket's Dispatch without making the release caller wait for it.
func (n *next) dispatch() {
	e := *n.it.Event
	e.Status = model.EventDelivering
	exp := n.exp
	e.TokenExpiresAt = &exp
	e.Fence = n.it.Fence
	it := n.it
	it.Event = &e
	it.Policy = n.p
	go n.b.t.deps.Dispatch([]Item{it})
}
