package throttle

import (
	"context"
	"sync"
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
