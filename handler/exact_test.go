package handler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// TestNeverBeforeLaunch emits random one-offs, fan-outs and spread windows
// due at sub-second instants through the emitter, delivers them with a
// handler to an HTTP consumer on 127.0.0.1, and checks that every event
// arrives at or after its launch instant, and that no launch instant is
// before the schedule's runAt. HANDLER_TEST_SEED picks another draw.
func TestNeverBeforeLaunch(t *testing.T) {
	seed := testseed.Get(t, "HANDLER_TEST_SEED", 1)
	r := rand.New(rand.NewPCG(seed, seed))

	st := openStore(t)
	rec := &recorder{}
	srv := consumer(t, func(m delivery.Message, _ http.ResponseWriter, _ *http.Request) { rec.add(m) })
	em, err := emitter.New(emitter.Config{Partitions: 1, Shards: testShards, Owner: "exact", BatchSize: 100}, emitter.Deps{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	// Prefetch often, so that events are claimed both well before and
	// right at their launch instants.
	startHandler(t, handler.Config{PrefetchInterval: 50 * time.Millisecond}, handler.Deps{Store: st, Shards: allShards(1),
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}})

	ctx := context.Background()
	runAt := map[string]time.Time{}
	total := 0
	start := time.Now()
	for i := range 24 {
		id := fmt.Sprintf("exact-%d", i)
		// Due 300ms to 1.8s from now, at any nanosecond.
		at := start.Add(300*time.Millisecond + time.Duration(r.Int64N(int64(1500*time.Millisecond)))).UTC()
		s := &model.Schedule{
			ID: id, TenantID: "t1", Name: id, RunAt: &at, Timezone: "UTC", EventCount: 1,
			Target:  model.Target{Type: model.TargetHTTP, URL: srv.URL},
			Payload: []byte(`{"k":1}`), MaxAttempts: 3, Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow,
			State: model.ScheduleActive, Partition: 0, Version: 1,
		}
		switch i % 3 {
		case 1: // fan-out: every event at the fire instant
			s.EventCount = 2 + r.IntN(30)
		case 2: // spread over a window
			s.EventCount = 2 + r.IntN(30)
			s.Window, s.Spread = time.Second+time.Duration(r.IntN(1000))*time.Millisecond, true
		}
		if err := storetest.CreateSchedule(ctx, st, s, nil); err != nil {
			t.Fatal(err)
		}
		if err := em.Saved(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
		runAt[id] = at
		total += s.EventCount
	}
	waitFor(t, 20*time.Second, fmt.Sprintf("%d deliveries", total), func() bool { return rec.len() >= total })

	launches := map[string]time.Time{}
	for id, at := range runAt {
		fs, err := st.FireList(ctx, &store.FireListParams{TenantID: "t1", ScheduleID: id, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 1 {
			t.Fatalf("%s: %d fires, want 1", id, len(fs))
		}
		if ft := fs[0].FireTime; ft.Before(at) || ft.Sub(at) >= time.Millisecond {
			t.Errorf("%s: fire time %s for runAt %s: want runAt rounded up to the millisecond", id, ft.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
		}
		for i := range fs[0].Count {
			e := statusOf(t, st, model.EventID(fs[0].ID, i))
			if e.LaunchAt.Before(at) {
				t.Errorf("%s: launch %s before runAt %s", e.ID, e.LaunchAt.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
			}
			launches[e.ID] = e.LaunchAt
		}
	}
	seen := map[string]bool{}
	for _, rc := range rec.all() {
		launch, ok := launches[rc.msg.EventID]
		if !ok {
			t.Errorf("unexpected delivery of %s", rc.msg.EventID)
			continue
		}
		seen[rc.msg.EventID] = true
		if rc.at.Before(launch) {
			t.Errorf("%s received %s before its launch instant %s", rc.msg.EventID, launch.Sub(rc.at), launch.Format(time.RFC3339Nano))
		}
	}
	if len(seen) != total || len(launches) != total {
		t.Errorf("%d events delivered, %d emitted, want %d", len(seen), len(launches), total)
	}
}
