package throttle

import "time"

// Events taken over after their launch time (Item.HoldUntil).
//
// With EarlyDispatch an owner sends the event a release hands its token to
// before the write that starts it (early.go). Killed in between, it leaves
// that event scheduled though its consumer has it. The shard's next owner
// claims it again, and the consumer's retried release of that copy
// acknowledges it if it lands before the event is sent again
// (acknowledgeSent). The releases of the events that still hold tokens come
// in meanwhile, and the first event those tokens would go to is just such
// an event: each was the next of its key (schedule, or concurrency key
// value) when it was sent, and at most as many as the key's bound were sent
// so. So the bucket sets aside the first taken-over events of each key it
// would hand a token to, up to the policy's maxInFlight per key, until
// their hold ends (the handler's TakeoverGrace after the claim), and the
// tokens go to the events behind them. Then they wait first again, and an
// acknowledged one loses its start (a compare-and-set from scheduled), its
// token going back. Events claimed for the first time, and the rest of a
// key's taken-over ones, are not held.

// popLocked is q.Pop with the set-aside applied. Called with b.mu held.
func (b *bucket) popLocked() (Item, bool) {
	for {
		it, ok := b.q.Pop()
		if !ok || !b.setAsideLocked(it) {
			return it, ok
		}
	}
}

// popNLocked is q.PopN with the set-aside applied: up to n items. Called
// with b.mu held.
func (b *bucket) popNLocked(n int) []Item {
	out := make([]Item, 0, min(n, b.q.Len()))
	for len(out) < n {
		it, ok := b.popLocked()
		if !ok {
			break
		}
		out = append(out, it)
	}
	return out
}

// popEligibleLocked is q.PopEligible with the set-aside applied. Called
// with b.mu held.
func (b *bucket) popEligibleLocked(ok func(key string) bool) (Item, string, bool) {
	for {
		it, k, found := b.q.PopEligible(ok)
		if !found || !b.setAsideLocked(it) {
			return it, k, found
		}
	}
}

// setAsideLocked reports whether it, just popped, is set aside until its
// HoldUntil: a taken-over event among the first of its key, while its hold
// lasts. Called with b.mu held.
func (b *bucket) setAsideLocked(it Item) bool {
	if it.HoldUntil.IsZero() || !b.t.cfg.EarlyDispatch || b.asideDone {
		return false
	}
	clock := b.t.deps.Clock
	if !it.HoldUntil.After(clock.Now()) {
		return false
	}
	bound := 1
	if b.policy != nil {
		bound = max(bound, b.policy.MaxInFlight)
	}
	k := b.q.keyOf(it.Event)
	if b.asideBy[k] >= bound {
		return false
	}
	if b.asideBy == nil {
		b.asideBy = map[string]int{}
	}
	b.asideBy[k]++
	b.aside = append(b.aside, it)
	if b.asideTimer == nil {
		b.asideTimer = clock.AfterFunc(it.HoldUntil.Sub(clock.Now()), b.returnAside)
	}
	return true
}

// returnAside puts the set-aside items whose hold ended back into the
// queue, where they come first again, and wakes the bucket; it runs again
// for the others at the end of the earliest hold left.
func (b *bucket) returnAside() {
	clock := b.t.deps.Clock
	b.mu.Lock()
	b.asideTimer = nil
	if b.asideDone {
		b.mu.Unlock()
		return
	}
	now := clock.Now()
	var next time.Time
	kept := b.aside[:0]
	for _, it := range b.aside {
		if it.HoldUntil.After(now) {
			kept = append(kept, it)
			if next.IsZero() || it.HoldUntil.Before(next) {
				next = it.HoldUntil
			}
			continue
		}
		b.q.Push(it)
	}
	clear(b.aside[len(kept):])
	b.aside = kept
	if len(kept) > 0 {
		b.asideTimer = clock.AfterFunc(next.Sub(now), b.returnAside)
	}
	b.mu.Unlock()
	signal(b.wake)
}

// dropAsideLocked returns the set-aside items, stops their timer and sets
// nothing aside any more: the bucket stops, or its policy is gone. Called
// with b.mu held.
func (b *bucket) dropAsideLocked() []Item {
	if b.asideTimer != nil {
		b.asideTimer.Stop()
		b.asideTimer = nil
	}
	out := b.aside
	b.aside, b.asideDone = nil, true
	return out
}
