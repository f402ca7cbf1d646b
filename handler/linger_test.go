package handler_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// outcomeWrites counts the store calls that write outcomes of unthrottled
// deliveries (scheduled → released) and the outcomes they carry.
type outcomeWrites struct {
	*embedded.Store
	mu              sync.Mutex
	calls, outcomes int
}

func (s *outcomeWrites) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	if len(ts) > 0 && ts[0].From == model.EventScheduled && ts[0].To == model.EventReleased {
		s.mu.Lock()
		s.calls++
		s.outcomes += len(ts)
		s.mu.Unlock()
	}
	return s.Store.EventTransition(ctx, ts)
}

// Events of a spread fire are delivered one at a time; their outcomes wait
// (OutcomeLinger) to share store writes instead of one write each.
func TestSpreadOutcomesShareWrites(t *testing.T) {
	spreadOutcomeWrites(t, 100*time.Millisecond)
}

// The default OutcomeLinger groups the outcomes of a spread fire launched
// every 5 ms into a few writes: a 10 ms linger takes about one write per
// two or three events (over 20 here).
func TestSpreadOutcomesShareWritesByDefault(t *testing.T) {
	spreadOutcomeWrites(t, 0)
}

func spreadOutcomeWrites(t *testing.T, linger time.Duration) {
	t.Helper()
	const n = 60
	base := openStore(t)
	st := &outcomeWrites{Store: base}
	srv := consumer(t, func(_ delivery.Message, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	// One event every 5 ms over 300 ms, launched from 200 ms on.
	evs := makeEvents(n, evOpts{schedule: "s1", url: srv.URL, launch: time.Now().Add(200 * time.Millisecond), spread: 300 * time.Millisecond})
	insert(t, base, evs)
	startHandler(t, handler.Config{OutcomeLinger: linger, PrefetchInterval: 50 * time.Millisecond},
		handler.Deps{Store: st, Shards: allShards(1),
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})
	waitFor(t, 10*time.Second, "all released", func() bool { return allIn(t, base, evs, model.EventReleased) })
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.outcomes != n {
		t.Fatalf("%d outcomes written, want %d", st.outcomes, n)
	}
	// 300 ms of launches and a linger of 100 ms make about 3-4 writes;
	// one write per event would be 60.
	if st.calls > n/4 {
		t.Fatalf("%d outcomes took %d store writes; want them to share writes (at most %d)", n, st.calls, n/4)
	}
}
