package master_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// ownedUnder holds every queue shard under one fence.
type ownedUnder int64

func (f ownedUnder) Held() map[int]int64 {
	held := map[int]int64{}
	for s := range 16 {
		held[s] = int64(f)
	}
	return held
}

func (f ownedUnder) Owns(_ int, fence int64) bool { return fence == int64(f) }

// An instance that sent a throttled event early (before the write that
// starts it) and died before that write leaves the event scheduled; the
// restarted instance claims it again under a newer fence, and the copy's
// release, retried by its consumer, arrives after that claim. It
// acknowledges the event (200 released, no token given back) as long as the
// event still waits to be sent under the new fence by this instance's
// throttle. Once it was sent again, or when it waits at another instance,
// or was retried since, the copy is superseded: 409, nothing changes.
func TestReleaseOfCopySentBeforeTheClaim(t *testing.T) {
	var thr *throttle.Throttle
	h := newHarness(t, func(_ *master.Config, d *master.Deps) {
		var err error
		thr, err = throttle.New(throttle.Config{EarlyDispatch: true},
			throttle.Deps{Store: d.Store.(throttle.Store), Shards: ownedUnder(2)})
		if err != nil {
			t.Fatal(err)
		}
		d.Tokens = thr
	})
	if err := thr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(thr.Stop)
	tid, c := h.tenant("early")
	pol := h.policy(c, "early", 2)
	anon := h.client("")
	under := func(fence int64, attempts int) func(*model.Event) {
		return func(e *model.Event) { e.Fence, e.Attempts = fence, attempts }
	}
	// copyToken is the token of e's copy sent under fence in its
	// attempts+1st attempt.
	copyToken := func(e *model.Event, fence int64, attempts int) string {
		sent := *e
		sent.Fence, sent.Attempts = fence, attempts
		return model.DeliveryToken(&sent)
	}
	release := func(t *testing.T, id, token string) *client.ReleaseEventResponse {
		t.Helper()
		r, err := anon.ReleaseEventWithResponse(h.ctx, id, client.ReleaseRequest{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	stored := func(t *testing.T, id string) *model.Event {
		t.Helper()
		e, err := h.st.EventGetByID(h.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	inUse := func(t *testing.T) int {
		t.Helper()
		p, err := h.st.PolicyGetByID(h.ctx, pol.Id)
		if err != nil {
			t.Fatal(err)
		}
		return p.InUse
	}

	t.Run("WaitingHereIsAcknowledged", func(t *testing.T) {
		e := h.insertEvent(tid, "sch_e", pol.Id, model.EventScheduled, under(2, 0))
		tok := copyToken(e, 1, 0)
		r := release(t, e.ID, tok)
		mustStatus(t, nil, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.Status != client.EventStatusReleased {
			t.Fatalf("release answered %s, want released", r.Body)
		}
		if got := stored(t, e.ID); got.Status != model.EventReleased || got.FinishedAt == nil {
			t.Fatalf("stored %s (finishedAt %v), want released", got.Status, got.FinishedAt)
		}
		if n := inUse(t); n != 0 {
			t.Fatalf("InUse %d, want 0: the copy held no token", n)
		}
		again := release(t, e.ID, tok)
		mustStatus(t, nil, again.StatusCode(), again.Body, http.StatusOK)
	})
	t.Run("SentAgainIsSuperseded", func(t *testing.T) {
		e := h.insertEvent(tid, "sch_e", pol.Id, model.EventDelivering, under(2, 0))
		r := release(t, e.ID, copyToken(e, 1, 0))
		wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusConflict, "")
		if got := stored(t, e.ID); got.Status != model.EventDelivering || got.TokenExpiresAt == nil {
			t.Fatalf("stored %s, want delivering with its token", got.Status)
		}
	})
	t.Run("WaitingElsewhereIsSuperseded", func(t *testing.T) {
		e := h.insertEvent(tid, "sch_e", pol.Id, model.EventScheduled, under(3, 0))
		r := release(t, e.ID, copyToken(e, 1, 0))
		wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusConflict, "")
		if got := stored(t, e.ID); got.Status != model.EventScheduled {
			t.Fatalf("stored %s, want scheduled", got.Status)
		}
	})
	t.Run("EarlierAttemptIsSuperseded", func(t *testing.T) {
		// The copy's attempt was counted since (it failed, or its token
		// timed out): its release says nothing of the next attempt.
		e := h.insertEvent(tid, "sch_e", pol.Id, model.EventScheduled, under(2, 1))
		r := release(t, e.ID, copyToken(e, 1, 0))
		wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusConflict, "")
		if got := stored(t, e.ID); got.Status != model.EventScheduled {
			t.Fatalf("stored %s, want scheduled", got.Status)
		}
	})
}
