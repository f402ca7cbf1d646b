package handler_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/lease"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// lostReplies is the real embedded store, except that the next n claims are
// applied and then answered with ErrUnavailable, as when the connection to a
// MongoDB drops after the server applied the update.
type lostReplies struct {
	*embedded.Store
	n atomic.Int32
}

func (s *lostReplies) EventClaimDue(ctx context.Context, p *store.EventClaimParams) ([]*model.Event, error) {
	evs, err := s.Store.EventClaimDue(ctx, p)
	if err == nil && len(evs) > 0 && s.n.Add(-1) >= 0 {
		return nil, model.ErrUnavailable
	}
	return evs, err
}

// TestLostClaimReplyIsRecovered: events claimed by a call whose answer was
// lost are held by nobody; the handler takes the shard again under a new
// fence so that they are claimed and delivered (invariant 1).
func TestLostClaimReplyIsRecovered(t *testing.T) {
	st := &lostReplies{Store: openStore(t)}
	st.n.Store(2)
	bal, err := lease.New(lease.Config{Group: "handler", Units: testShards, Owner: "h1", TTL: 2 * time.Second, Interval: 100 * time.Millisecond}, lease.Deps{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := bal.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bal.Stop() })

	var mu sync.Mutex
	got := map[string]bool{}
	all := make(chan struct{})
	const n = 40
	srv := consumer(t, func(m delivery.Message, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		got[m.EventID] = true
		if len(got) == n {
			close(all)
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	evs := makeEvents(n, evOpts{schedule: "s1", url: srv.URL, launch: time.Now().Add(300 * time.Millisecond)})
	insert(t, st.Store, evs)
	startHandler(t, handler.Config{Horizon: 5 * time.Second, PrefetchInterval: 100 * time.Millisecond},
		handler.Deps{Store: st, Shards: bal, Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d events delivered after two claim replies were lost", len(got), n)
	}
	if st.n.Load() > 0 {
		t.Fatal("no claim reply was lost: the test proved nothing")
	}
}
