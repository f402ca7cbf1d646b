package throttle_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/throttletest"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/throttle"
)

// An instance that sent an event early (before the write that starts it)
// and died before that write leaves the event scheduled under the fence it
// was sent under, and the token with the event whose release handed it on.
// The sent event's release, served after the restart and before the shard
// is claimed again, acknowledges it: released, not sent again by the
// shard's next owner, and no token goes back for it (it holds none); the
// token comes back with the other event's release.
func TestReleaseOfEarlySentEventAfterCrash(t *testing.T) {
	ctx := context.Background()
	st := throttletest.NewMemStore()
	newPolicy(t, st, "p", 1, time.Minute)
	items := scheduledEvents(t, st, "p", "s", 2, 1)
	if n, _ := st.PolicyAcquireTokens(ctx, "p", 1); n != 1 {
		t.Fatalf("acquired %d", n)
	}
	now := time.Now()
	exp := now.Add(time.Minute)
	holder, sent := items[0].Event.ID, items[1].Event.ID
	if _, err := st.EventTransition(ctx, transition(holder, model.EventScheduled, model.EventDelivered, &exp)); err != nil {
		t.Fatal(err)
	}
	thr := startThrottle(t, st, throttle.Config{EarlyDispatch: true}, func([]throttle.Item) {}, nil)

	e, _ := st.EventGetByID(ctx, sent)
	if got, err := throttle.Release(ctx, st, e, now); err != nil || got {
		t.Fatalf("release through the store alone = %v, %v; want false: only the bucket's process serves it behind its slot", got, err)
	}
	if got, err := thr.Release(ctx, e, now); err != nil || !got {
		t.Fatalf("release of the early-sent event = %v, %v; want released", got, err)
	}
	e, _ = st.EventGetByID(ctx, sent)
	if e.Status != model.EventReleased || e.FinishedAt == nil {
		t.Fatalf("early-sent event after its release: %+v", e)
	}
	if n := inUse(t, st, "p"); n != 1 {
		t.Fatalf("InUse = %d after the early-sent event's release, want 1 (the holder's)", n)
	}
	if got, err := thr.Release(ctx, e, now); err != nil || got {
		t.Fatalf("second release = %v, %v; want false", got, err)
	}
	h, _ := st.EventGetByID(ctx, holder)
	if got, err := thr.Release(ctx, h, now); err != nil || !got {
		t.Fatalf("release of the token's holder = %v, %v", got, err)
	}
	if n := inUse(t, st, "p"); n != 0 {
		t.Fatalf("InUse = %d after both releases, want 0", n)
	}
}

// The early-sent event may have been claimed again (a newer fence) after
// its consumer's release read it. Claimed by another process, it may wait
// in that process's bucket, which can send it early whatever the store
// says: the release leaves it alone.
func TestReleaseOfEarlySentEventClaimedElsewhere(t *testing.T) {
	ctx := context.Background()
	st := throttletest.NewMemStore()
	newPolicy(t, st, "p", 1, time.Minute)
	items := scheduledEvents(t, st, "p", "s", 1, 1)
	thr := startFenced(t, st, 1, func([]throttle.Item) {})
	e, _ := st.EventGetByID(ctx, items[0].Event.ID)
	if claimed, err := st.EventClaimDue(ctx, &store.EventClaimParams{Shard: e.Shard, Fence: 2, DueBefore: time.Now().Add(time.Hour), Limit: 10}); err != nil || len(claimed) != 1 {
		t.Fatalf("claim again: %d, %v", len(claimed), err)
	}
	if got, err := thr.Release(ctx, e, time.Now()); err != nil || got {
		t.Fatalf("release = %v, %v; want false", got, err)
	}
	if e, _ = st.EventGetByID(ctx, e.ID); e.Status != model.EventScheduled || e.Fence != 2 {
		t.Fatalf("after the release: %s under fence %d, want scheduled under 2", e.Status, e.Fence)
	}
}

// Claimed again by this process (restarted under a newer fence), the
// early-sent event waits in its bucket: the release acknowledges it, and
// the release that next hands a token on does not send it early but finds
// its start lost, and the token goes back.
func TestReleaseOfEarlySentEventClaimedHere(t *testing.T) {
	synctest.Test(t, testReleaseOfEarlySentEventClaimedHere)
}

func testReleaseOfEarlySentEventClaimedHere(t *testing.T) {
	ctx := context.Background()
	st := throttletest.NewMemStore()
	newPolicy(t, st, "p", 1, time.Minute)
	items := scheduledEvents(t, st, "p", "s", 2, 1)
	holder, sent := items[0].Event.ID, items[1].Event.ID
	e, _ := st.EventGetByID(ctx, sent) // its consumer's release reads it sent under fence 1
	// The restarted process claims both under fence 2; the holder has the
	// token and is delivered, the sent one waits for it.
	if claimed, err := st.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 2, DueBefore: time.Now().Add(time.Hour), Limit: 10}); err != nil || len(claimed) != 2 {
		t.Fatalf("claim again: %d, %v", len(claimed), err)
	}
	if n, _ := st.PolicyAcquireTokens(ctx, "p", 1); n != 1 {
		t.Fatalf("acquired %d", n)
	}
	exp := time.Now().Add(time.Minute)
	if _, err := st.EventTransition(ctx, transition(holder, model.EventScheduled, model.EventDelivered, &exp)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	thr := startFenced(t, st, 2, func(its []throttle.Item) {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range its {
			got = append(got, it.Event.ID)
		}
	})
	c, _ := st.EventGetByID(ctx, sent)
	thr.Enqueue(throttle.Item{Event: c, Shard: c.Shard, Fence: 2})
	// Every goroutine of the bubble blocked: the bucket waits for a token.
	synctest.Wait()

	if ok, err := thr.Release(ctx, e, time.Now()); err != nil || !ok {
		t.Fatalf("release of the early-sent event = %v, %v; want released", ok, err)
	}
	if c, _ = st.EventGetByID(ctx, sent); c.Status != model.EventReleased {
		t.Fatalf("early-sent event %s, want released", c.Status)
	}
	h, _ := st.EventGetByID(ctx, holder)
	if ok, err := thr.Release(ctx, h, time.Now()); err != nil || !ok {
		t.Fatalf("release of the holder = %v, %v", ok, err)
	}
	waitFor(t, 5*time.Second, "the token back", func() bool { return inUse(t, st, "p") == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 0 {
		t.Fatalf("dispatched %v, want nothing (the acknowledged event is not sent again)", got)
	}
}

// fencedShards holds every shard under fence, and only under it.
type fencedShards struct{ oneShard }

func (f fencedShards) Owns(_ int, fence int64) bool { return fence == f.fence }

// startFenced runs a Throttle with EarlyDispatch that holds every shard
// under fence, passing what it dispatches to dispatch.
func startFenced(t *testing.T, st *throttletest.MemStore, fence int64, dispatch func([]throttle.Item)) *throttle.Throttle {
	t.Helper()
	thr, err := throttle.New(throttle.Config{EarlyDispatch: true}, throttle.Deps{Store: st, Shards: fencedShards{oneShard{fence: fence}}})
	if err != nil {
		t.Fatal(err)
	}
	for s := range thr.Config().Shards {
		thr.MarkSettled(s, fence)
	}
	runThrottle(t, thr, dispatch)
	return thr
}

// A release of a scheduled event with the token of an earlier attempt (a
// copy superseded by a retry) does not acknowledge it.
func TestReleaseOfScheduledEventNeedsItsAttempt(t *testing.T) {
	ctx := context.Background()
	st := throttletest.NewMemStore()
	newPolicy(t, st, "p", 1, time.Minute)
	items := scheduledEvents(t, st, "p", "s", 1, 1)
	thr := startThrottle(t, st, throttle.Config{EarlyDispatch: true}, func([]throttle.Item) {}, nil)
	e, _ := st.EventGetByID(ctx, items[0].Event.ID)
	// The caller read it in attempt 1; it has counted that attempt since.
	stale := *e
	if _, err := st.EventTransition(ctx, []store.EventTransition{{ID: e.ID, From: model.EventScheduled, To: model.EventScheduled, Attempts: 1}}); err != nil {
		t.Fatal(err)
	}
	if got, err := thr.Release(ctx, &stale, time.Now()); err != nil || got {
		t.Fatalf("release of attempt 1 after it was counted = %v, %v; want false", got, err)
	}
	if e, _ = st.EventGetByID(ctx, e.ID); e.Status != model.EventScheduled {
		t.Fatalf("status %s, want scheduled", e.Status)
	}
}
