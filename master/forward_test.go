package master_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
)

// fixedOwners names one owner for every event.
type fixedOwners struct {
	url func() string
	err error
}

func (o fixedOwners) TokenOwner(context.Context, *model.Event) (string, error) {
	if o.err != nil {
		return "", o.err
	}
	return o.url(), nil
}

// A release or extend that reaches an instance that does not own the
// event's policy is forwarded to the owner, with the caller's token, and
// the owner's answer is passed on: only the owner's Tokens releases. An
// unknown or unreachable owner, or a forwarded call that finds the policy
// moved again, answers 503 problem+json with Retry-After and releases
// nothing.
func TestForwardTokensToOwner(t *testing.T) {
	var ownerURL atomic.Value
	ownerURL.Store("")
	// a is not the owner; b, on the same store, is.
	a := newHarness(t, func(_ *master.Config, d *master.Deps) {
		d.TokenOwners = fixedOwners{url: func() string { return ownerURL.Load().(string) }}
	})
	var bReleased atomic.Int64
	b, err := master.New(master.Config{AdminKey: testAdminKey, Partitions: 4}, master.Deps{
		Store: a.st, Tokens: countingTokens{st: a.st, n: &bReleased},
		TokenOwners: fixedOwners{url: func() string { return "" }},
		Logger:      zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	var sawForwarded atomic.Int64
	bSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(master.ForwardedHeader) != "" {
			sawForwarded.Add(1)
		}
		b.Handler().ServeHTTP(w, r)
	}))
	defer bSrv.Close()
	ownerURL.Store(bSrv.URL)

	tid, c := a.tenant("fwd")
	pol := a.policy(c, "fwd", 2)
	if n, err := a.st.PolicyAcquireTokens(a.ctx, pol.Id, 2); n != 2 || err != nil {
		t.Fatalf("acquire: %d, %v", n, err)
	}
	anon := a.client("")

	t.Run("ExtendAndReleaseGoToTheOwner", func(t *testing.T) {
		e := a.insertEvent(tid, "sch_fwd", pol.Id, model.EventDelivering)
		tok := model.DeliveryToken(e)
		xr, err := anon.ExtendEventWithResponse(a.ctx, e.ID, client.ExtendRequest{Token: tok, ExtendBy: ptr("1m")})
		mustStatus(t, err, xr.StatusCode(), xr.Body, http.StatusOK)
		r, err := anon.ReleaseEventWithResponse(a.ctx, e.ID, client.ReleaseRequest{Token: tok})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200 == nil || r.JSON200.Status != client.EventStatusReleased {
			t.Fatalf("release answered %s", r.Body)
		}
		if a.released.Load() != 0 || bReleased.Load() != 1 {
			t.Fatalf("releases won: %d at the non-owner, %d at the owner; want 0 and 1", a.released.Load(), bReleased.Load())
		}
		if got := a.srv.TokenForwards(); got != 2 || sawForwarded.Load() != 2 {
			t.Fatalf("%d forwards counted, %d seen by the owner; want 2 and 2", got, sawForwarded.Load())
		}
		// A wrong token is refused where it arrives.
		r, err = anon.ReleaseEventWithResponse(a.ctx, e.ID, client.ReleaseRequest{Token: "rt_wrong"})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusNotFound)
		if got := a.srv.TokenForwards(); got != 2 {
			t.Fatalf("a wrong token was forwarded (%d forwards)", got)
		}
	})

	unavailable := func(t *testing.T, r *client.ReleaseEventResponse, err error) {
		t.Helper()
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusServiceUnavailable)
		if ct := r.HTTPResponse.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
			t.Fatalf("Content-Type %q", ct)
		}
		if ra, _ := strconv.Atoi(r.HTTPResponse.Header.Get("Retry-After")); ra < 1 {
			t.Fatalf("Retry-After %q", r.HTTPResponse.Header.Get("Retry-After"))
		}
		var p struct{ Status int }
		if json.Unmarshal(r.Body, &p) != nil || p.Status != http.StatusServiceUnavailable {
			t.Fatalf("body %s", r.Body)
		}
	}
	held := func(t *testing.T, id string) {
		t.Helper()
		got, err := a.st.EventGetByID(a.ctx, id)
		if err != nil || got.Status != model.EventDelivering {
			t.Fatalf("event %v after a refused release, err %v; want delivering", got.Status, err)
		}
	}

	t.Run("OwnerUnreachable", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		ownerURL.Store(dead.URL)
		defer ownerURL.Store(bSrv.URL)
		e := a.insertEvent(tid, "sch_fwd", pol.Id, model.EventDelivering)
		r, err := anon.ReleaseEventWithResponse(a.ctx, e.ID, client.ReleaseRequest{Token: model.DeliveryToken(e)})
		unavailable(t, r, err)
		held(t, e.ID)
	})

	t.Run("ForwardedToANonOwner", func(t *testing.T) {
		// b believes a owns the policy (it moved): a forwarded call is not
		// forwarded again.
		e := a.insertEvent(tid, "sch_fwd", pol.Id, model.EventDelivering)
		body := strings.NewReader(`{"token":"` + model.DeliveryToken(e) + `"}`)
		req, _ := http.NewRequest(http.MethodPost, a.url+"/v1/events/"+e.ID+"/release", body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(master.ForwardedHeader, "1")
		before := a.srv.TokenForwards()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("forwarded call to a non-owner answered %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if a.srv.TokenForwards() != before {
			t.Fatal("a forwarded call was forwarded again")
		}
		held(t, e.ID)
	})

	t.Run("NoOwnerKnown", func(t *testing.T) {
		na := newHarness(t, func(_ *master.Config, d *master.Deps) {
			d.TokenOwners = fixedOwners{err: model.ErrUnavailable}
		})
		ntid, nc := na.tenant("none")
		np := na.policy(nc, "none", 1)
		e := na.insertEvent(ntid, "sch_none", np.Id, model.EventDelivering)
		r, err := na.client("").ReleaseEventWithResponse(na.ctx, e.ID, client.ReleaseRequest{Token: model.DeliveryToken(e)})
		unavailable(t, r, err)
		if na.released.Load() != 0 {
			t.Fatal("released at an instance that does not know the owner")
		}
	})
}
