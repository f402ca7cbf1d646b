package handler_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

// Two tenants of weights 3 and 1 (tenant records in the store) each have a
// backlog to one consumer host that takes 4 deliveries at a time: while both
// have events waiting, the consumer receives about 3 of the heavier
// tenant's events for each of the lighter one's.
func TestTenantWeightsShareDelivery(t *testing.T) {
	const backlog, counted = 400, 320 // each tenant's; arrivals counted
	st := openStore(t)
	ctx := context.Background()
	for _, tn := range []*model.Tenant{{ID: "tHeavy", Name: "heavy", Weight: 3}, {ID: "tLight", Name: "light", Weight: 1}} {
		if err := st.TenantCreate(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var order []string // the backlog's tenants in order of arrival
	warm := make(chan string, 2)
	srv := consumer(t, func(m delivery.Message, _ http.ResponseWriter, _ *http.Request) {
		sched, _, _ := strings.Cut(m.EventID, ".")
		if tenant, ok := strings.CutPrefix(sched, "warm-"); ok {
			warm <- tenant
			return
		}
		mu.Lock()
		order = append(order, sched)
		mu.Unlock()
	})

	// One event of each tenant first: its delivery reads the tenant's
	// record, so that the backlogs are shared by the stored weights from
	// their first round (an unread tenant has the default weight).
	instant := time.Now().Add(3*time.Second + 2*backlog*claimTimePerEvent)
	var evs []*model.Event
	for _, tenant := range []string{"tHeavy", "tLight"} {
		w := makeEvents(1, evOpts{schedule: "warm-" + tenant, url: srv.URL, launch: time.Now()})
		b := makeEvents(backlog, evOpts{schedule: tenant, url: srv.URL, launch: instant})
		for _, e := range append(w, b...) {
			e.TenantID = tenant
		}
		evs = append(append(evs, w...), b...)
	}
	insert(t, st, evs)
	h := startHandler(t, handler.Config{Horizon: time.Minute, MaxPerHost: 4}, handler.Deps{Store: st, Shards: allShards(1), Tenants: st,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 10*time.Second)}})
	for range 2 {
		select {
		case <-warm:
		case <-time.After(time.Until(instant)):
			t.Fatal("the tenants' first events did not arrive before their backlogs were due")
		}
	}
	waitFor(t, time.Until(instant), "both backlogs claimed before their instant", func() bool { return h.Scheduled() == 2*backlog })
	waitFor(t, time.Until(instant)+time.Minute, "every event delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 2*backlog
	})

	// The first arrivals: neither backlog can drain within them.
	got := map[string]int{}
	for _, tenant := range order[:counted] {
		got[tenant]++
	}
	heavy, light := got["tHeavy"], got["tLight"]
	t.Logf("of the first %d arrivals: weight 3 %d, weight 1 %d", counted, heavy, light)
	if light == 0 || heavy < 2*light || heavy > 4*light {
		t.Errorf("of the first %d arrivals, weight 3 got %d and weight 1 got %d: want 2 to 4 times as many", counted, heavy, light)
	}
}
