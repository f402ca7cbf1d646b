package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/throttle"
)

// With early dispatch an instance sends the event that a release hands its
// token to before the write that records both; killed in between, it
// leaves that event scheduled though its consumer has it, and the token
// with the released event. After the restart (the shard claimed again
// under a newer fence) the consumers' retried releases come in any order:
// the released event's frees the token before the sent event's own
// acknowledges it. The restarted instance holds the event it took over
// back for the takeover grace instead of giving it that token, and the
// sent copy's release, which arrives after the claim, acknowledges it
// through the real master: delivered once.
func TestTakeoverHoldsBackEventSentEarly(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	start := time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(start)
	createPolicy(t, st, &model.Policy{ID: "pol_e", MaxInFlight: 2, TokenTimeout: time.Hour})

	got := make(chan delivery.Message, 8)
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) { got <- m })
	var api atomic.Pointer[http.Handler]
	masterSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*api.Load()).ServeHTTP(w, r) }))
	t.Cleanup(masterSrv.Close)

	// Before the kill (fence 1): the holder was delivered and holds one of
	// the two tokens, and its consumer's release handed it to the sent
	// one, which went early; the write of both was lost. The fresh one is
	// due and was not claimed yet.
	evs := makeEvents(4, evOpts{schedule: "s1", policy: "pol_e", url: srv.URL, launch: start.Add(-time.Second)})
	holder, sent, fresh, later := evs[0], evs[1], evs[2], evs[3]
	fresh.LaunchAt = sent.LaunchAt.Add(time.Millisecond) // after sent in its bucket
	insert(t, st, []*model.Event{holder, sent})
	if _, err := st.EventClaimDue(ctx, &store.EventClaimParams{Shard: holder.Shard, Fence: 1, DueBefore: start, Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.PolicyAcquireTokens(ctx, "pol_e", 1); n != 1 || err != nil {
		t.Fatalf("acquire: %d, %v", n, err)
	}
	exp := start.Add(time.Hour)
	res, err := st.EventTransition(ctx, []store.EventTransition{
		store.StartDelivery(holder.ID, 1, exp, start), store.Delivered(holder.ID, 1, 1, start).AfterPrevious()})
	if err != nil || res[0] != nil || res[1] != nil {
		t.Fatalf("deliver the holder: %v, %v", err, res)
	}
	// Due just after the grace: it goes in the same round as the
	// held-back event, so its delivery shows that round is over.
	const grace = 10 * time.Second
	later.LaunchAt = start.Add(grace + time.Millisecond)
	insert(t, st, []*model.Event{fresh, later})

	// The restart: fence 2.
	dl, err := httpdelivery.New(httpdelivery.Config{SigningSecret: []byte("test-secret"), ReleaseBaseURL: masterSrv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dl.Close)
	h := startHandler(t, handler.Config{TakeoverGrace: grace}, handler.Deps{Store: st, Shards: allShards(2), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: dl}},
		func(c *throttle.Config, _ *throttle.Deps) { c.EarlyDispatch = true })
	m, err := master.New(master.Config{AdminKey: "admin-key-for-tests-0123456789", Partitions: 4}, master.Deps{Store: st, Tokens: throttleOf(h)})
	if err != nil {
		t.Fatal(err)
	}
	mh := m.Handler()
	api.Store(&mh)

	release := func(id, token string) (int, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"token": token})
		resp, err := http.Post(masterSrv.URL+"/v1/events/"+id+"/release", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	copyToken := func(e *model.Event, fence int64) string {
		c := *e
		c.Fence, c.Attempts = fence, 0
		return model.DeliveryToken(&c)
	}
	receive := func(want string) delivery.Message {
		t.Helper()
		select {
		case m := <-got:
			if m.EventID != want {
				t.Fatalf("the restarted instance sent %s, want %s (the event its predecessor sent is sent again before its release could land)", m.EventID, want)
			}
			return m
		case <-time.After(10 * time.Second):
			t.Fatalf("%s was not sent", want)
		}
		return delivery.Message{}
	}

	// The free token goes to the fresh event; the sent one waits.
	fm := receive(fresh.ID)
	// Its consumer's release of the copy it got under fence 1 arrives
	// after the claim: it acknowledges it.
	if code, body := release(sent.ID, copyToken(sent, 1)); code != http.StatusOK {
		t.Fatalf("release of the copy sent before the restart: %d %s, want 200", code, body)
	}
	if e := statusOf(t, st, sent.ID); e.Status != model.EventReleased {
		t.Fatalf("sent event %s after its release, want released", e.Status)
	}
	for _, r := range []struct{ id, token string }{{holder.ID, copyToken(holder, 1)}, {fresh.ID, fm.Release.Token}} {
		if code, body := release(r.id, r.token); code != http.StatusOK {
			t.Fatalf("release of %s: %d %s", r.id, code, body)
		}
	}
	// The grace ends: the sent event's start loses, the later one, in
	// the same start write, goes.
	clock.Advance(grace + time.Millisecond)
	lm := receive(later.ID)
	if code, body := release(later.ID, lm.Release.Token); code != http.StatusOK {
		t.Fatalf("release of %s: %d %s", later.ID, code, body)
	}
	// Nothing waits and no token is out: the sent event's turn came and
	// it was not started (started, it would hold its token).
	waitFor(t, 5*time.Second, "nothing waiting and every token back", func() bool {
		p, err := st.PolicyGetByID(ctx, "pol_e")
		return err == nil && p.InUse == 0 && throttleOf(h).Waiting("pol_e") == 0 && h.Scheduled() == 0
	})
	h.Stop() // drains: every send made has reached the consumer
	select {
	case m := <-got:
		t.Fatalf("%s delivered again (attempt %d)", m.EventID, m.Attempt)
	default:
	}
}
