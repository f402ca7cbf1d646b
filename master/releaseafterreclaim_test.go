package master_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// TestReleaseAfterTokenTimeout pins the answers to a consumer's release
// (and extend) that arrives after the token timeout reclaimed its copy's
// token, over HTTP on the embedded store. A delivered event was finished by
// the reclaim: the release answers 200 released and changes nothing. An
// event still delivering was made a retry: its first copy's release answers
// 409 before the retry is sent and while the retry holds the token (under
// the same fence or a newer one), and never gives a token back; the retry's
// own token releases it.
func TestReleaseAfterTokenTimeout(t *testing.T) {
	h := newHarness(t)
	tid, c := h.tenant("late")
	pol := h.policy(c, "late", 1)
	anon := h.client("")
	expired := func(e *model.Event) {
		past := time.Now().UTC().Add(-time.Second)
		e.TokenExpiresAt = &past
	}
	sent := func(attempts int) func(*model.Event) {
		return func(e *model.Event) { e.Fence, e.Attempts = 3, attempts }
	}
	reclaim := func(t *testing.T, e *model.Event) {
		t.Helper()
		res, err := h.st.EventTransition(h.ctx, []store.EventTransition{store.ReclaimToken(e, 3, time.Now().UTC())})
		if err != nil || res[0] != nil {
			t.Fatalf("reclaim: %v, %v", err, res)
		}
		if err := h.st.PolicyReleaseTokens(h.ctx, pol.Id, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	acquire := func(t *testing.T) {
		t.Helper()
		if n, err := h.st.PolicyAcquireTokens(h.ctx, pol.Id, 1); n != 1 || err != nil {
			t.Fatalf("acquire: %d, %v", n, err)
		}
	}
	// want checks the stored event and the policy's count, and that no
	// release gave a token back since released was read.
	want := func(t *testing.T, id string, status model.EventStatus, inUse int, released int64) *model.Event {
		t.Helper()
		e, err := h.st.EventGetByID(h.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		p, err := h.st.PolicyGetByID(h.ctx, pol.Id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != status || p.InUse != inUse || h.released.Load() != released {
			t.Fatalf("event %s, InUse %d, releases that won %d; want %s, %d, %d",
				e.Status, p.InUse, h.released.Load(), status, inUse, released)
		}
		return e
	}
	release := func(t *testing.T, id, token string) *client.ReleaseEventResponse {
		t.Helper()
		r, err := anon.ReleaseEventWithResponse(h.ctx, id, client.ReleaseRequest{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("DeliveredIsFinishedByTheReclaim", func(t *testing.T) {
		acquire(t)
		e := h.insertEvent(tid, "sch_late", pol.Id, model.EventDelivered, sent(1), expired)
		token := model.DeliveryToken(e)
		reclaim(t, e)
		before := want(t, e.ID, model.EventReleased, 0, h.released.Load())
		r := release(t, e.ID, token)
		mustStatus(t, nil, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.Status != client.EventStatusReleased {
			t.Fatalf("late release answered %s, want released", r.JSON200.Status)
		}
		after := want(t, e.ID, model.EventReleased, 0, h.released.Load())
		if !after.TokenTimedOut || !after.FinishedAt.Equal(*before.FinishedAt) {
			t.Fatalf("late release changed the reclaimed event: tokenTimedOut %v, finishedAt %v -> %v",
				after.TokenTimedOut, before.FinishedAt, after.FinishedAt)
		}
		x, err := anon.ExtendEventWithResponse(h.ctx, e.ID, client.ExtendRequest{Token: token})
		wantProblem(t, err, x.HTTPResponse, x.Body, http.StatusConflict, "")
	})

	for _, retryFence := range []int64{3, 4} {
		t.Run("DeliveringIsRetriedUnderFence"+strconv.FormatInt(retryFence, 10), func(t *testing.T) {
			acquire(t)
			e := h.insertEvent(tid, "sch_late", pol.Id, model.EventDelivering, sent(0), expired)
			first := model.DeliveryToken(e)
			if !strings.HasSuffix(first, ".3.1") {
				t.Fatalf("first copy's token %q does not name fence 3, attempt 1", first)
			}
			reclaim(t, e)
			n := h.released.Load()

			// Before the retry is sent.
			r := release(t, e.ID, first)
			wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusConflict, "")
			want(t, e.ID, model.EventRetrying, 0, n)

			// The retry is claimed and takes the token.
			claimed, err := h.st.EventClaimDue(h.ctx, &store.EventClaimParams{Shard: e.Shard, Fence: retryFence,
				DueBefore: time.Now().Add(time.Second), Limit: 100})
			found := false
			for _, ce := range claimed {
				found = found || ce.ID == e.ID
			}
			if err != nil || !found {
				t.Fatalf("claim the retry: %v, found %v", err, found)
			}
			acquire(t)
			now := time.Now().UTC()
			res, err := h.st.EventTransition(h.ctx, []store.EventTransition{store.StartDelivery(e.ID, retryFence, now.Add(time.Hour), now)})
			if err != nil || res[0] != nil {
				t.Fatalf("start the retry: %v, %v", err, res)
			}
			retry := want(t, e.ID, model.EventDelivering, 1, n)
			second := model.DeliveryToken(retry)
			if second == first {
				t.Fatalf("the retry carries the first copy's token %q", first)
			}

			// While the retry is delivering, then delivered: the first
			// copy's release and extend are refused and change nothing.
			r = release(t, e.ID, first)
			wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusConflict, "")
			x, err := anon.ExtendEventWithResponse(h.ctx, e.ID, client.ExtendRequest{Token: first})
			wantProblem(t, err, x.HTTPResponse, x.Body, http.StatusConflict, "")
			if got := want(t, e.ID, model.EventDelivering, 1, n); !got.TokenExpiresAt.Equal(*retry.TokenExpiresAt) {
				t.Fatalf("the first copy's extend moved the retry's expiry to %v", got.TokenExpiresAt)
			}
			res, err = h.st.EventTransition(h.ctx, []store.EventTransition{store.Delivered(e.ID, retryFence, 2, time.Now().UTC())})
			if err != nil || res[0] != nil {
				t.Fatalf("record the retry delivered: %v, %v", err, res)
			}
			r = release(t, e.ID, first)
			wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusConflict, "")
			want(t, e.ID, model.EventDelivered, 1, n)

			// The retry's own release.
			r = release(t, e.ID, second)
			mustStatus(t, nil, r.StatusCode(), r.Body, http.StatusOK)
			want(t, e.ID, model.EventReleased, 0, n+1)
		})
	}
}
