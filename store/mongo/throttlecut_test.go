package mongo_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
	"github.com/schedulerd/schedulerd/throttle"
)

// allShards owns every queue shard under fence 1.
type allShards struct{}

func (allShards) Held() map[int]int64 {
	m := map[int]int64{}
	for i := range 16 {
		m[i] = 1
	}
	return m
}
func (allShards) Owns(int, int64) bool { return true }

// TestThrottleCut runs a throttle over the driver and cuts its k-th write
// command, for every k until a run ends before the k-th write: six events of
// a policy of three tokens are each dispatched once, never more than three
// at a time, and all end released with no token held.
func TestThrottleCut(t *testing.T) {
	t.Parallel()
	uri, faults := faultServer(t)
	const events, maxInFlight, maxK = 6, 3, 40
	for _, mode := range []mongotest.FaultMode{mongotest.FailWrite, mongotest.DropReply} {
		for k := 1; ; k++ {
			if k > maxK {
				t.Fatalf("mode %d: the run still had a %dth write: the test never reached its control run", mode, maxK)
			}
			var hit bool
			t.Run(fmt.Sprintf("mode%d_k%d", mode, k), func(t *testing.T) {
				throttleCutRun(t, uri, faults, mode, k, events, maxInFlight, &hit)
			})
			if !hit || t.Failed() {
				break
			}
		}
	}
}

// throttleCutRun sets *hit to whether the k-th write came (also when it
// skips).
func throttleCutRun(t *testing.T, uri string, faults *mongotest.Faults, mode mongotest.FaultMode, k, n, maxInFlight int, hit *bool) {
	s := openOn(t, uri, mongotest.DatabaseName(t))
	ctx := t.Context()
	p := &model.Policy{ID: "policy-1", TenantID: "tenant-1", Name: "p", MaxInFlight: maxInFlight, TokenTimeout: time.Minute, Version: 1}
	if err := s.PolicyCreate(ctx, p); err != nil {
		t.Fatalf("PolicyCreate: %v", err)
	}
	evs := pendingEvents("thr", n)
	insertEvents(t, s, evs)
	claimed, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: rtBase.Add(time.Hour), Limit: n})
	if err != nil || len(claimed) != n {
		t.Fatalf("claim: %d events, err %v", len(claimed), err)
	}

	thr, err := throttle.New(throttle.Config{ReconcileInterval: 100 * time.Millisecond, ReconcileSettle: 20 * time.Millisecond},
		throttle.Deps{Store: s, Shards: allShards{}})
	if err != nil {
		t.Fatal(err)
	}
	for sh := range thr.Config().Shards {
		thr.MarkSettled(sh, 1)
	}
	if err := thr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer thr.Stop()

	var mu sync.Mutex
	inFlight, most := 0, 0
	dispatched := map[string]int{}
	released := make(chan string, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	faults.Arm(k, mode)
	for _, e := range claimed {
		thr.Enqueue(throttle.Item{Event: e, Shard: 0, Fence: 1})
	}
	deadline := time.After(15 * time.Second) // a guard, not a synchronisation
	for done := 0; done < n; {
		select {
		case it := <-thr.Dispatched():
			mu.Lock()
			dispatched[it.Event.ID]++
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			wg.Go(func() {
				// The consumer's work ends here: the release call that
				// follows may hand its token on before it returns.
				mu.Lock()
				inFlight--
				mu.Unlock()
				// The deliverer releases until the store answers; a release
				// whose reply was lost finds its event released.
				for try := 0; ; try++ {
					_, err := thr.Release(ctx, it.Event, time.Now())
					if err == nil || try == 20 || !errors.Is(err, model.ErrUnavailable) {
						if err != nil {
							t.Errorf("release %s: %v", it.Event.ID, err)
						}
						break
					}
				}
				released <- it.Event.ID
			})
		case <-released:
			done++
		case <-deadline:
			*hit = faults.Disarm()
			mu.Lock()
			defer mu.Unlock()
			st := statuses(t, s, idsOf(claimed))
			startedUnsent := 0
			for _, e := range claimed {
				if dispatched[e.ID] == 0 && st[e.ID] == model.EventDelivering {
					startedUnsent++
				}
			}
			t.Fatalf("%d of %d events released, %d started but never dispatched; dispatched %v; in the store %v",
				done, n, startedUnsent, dispatched, st)
		}
	}
	*hit = faults.Disarm()

	mu.Lock()
	defer mu.Unlock()
	if most > maxInFlight {
		t.Errorf("%d events in flight at once, policy allows %d", most, maxInFlight)
	}
	for _, e := range claimed {
		if dispatched[e.ID] != 1 {
			t.Errorf("event %s dispatched %d times", e.ID, dispatched[e.ID])
		}
	}
	got := statuses(t, s, idsOf(claimed))
	for id, st := range got {
		if st != model.EventReleased {
			t.Errorf("event %s is %s, want released", id, st)
		}
	}
	if h, err := s.EventCountHoldingTokens(ctx, p.ID); err != nil || h != 0 {
		t.Errorf("%d events hold tokens after all were released (err %v)", h, err)
	}
}

func idsOf(events []*model.Event) []string {
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	return ids
}
