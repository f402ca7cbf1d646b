package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// faultServer starts a FerretDB of the test's own behind the proxy, with
// faults to cut its write commands, and returns its URI (no database).
func faultServer(t *testing.T) (string, *mongotest.Faults) {
	t.Helper()
	if mongotest.IsRealMongo() {
		t.Skip("the fault-injecting proxy runs in front of the embedded FerretDB only")
	}
	faults := &mongotest.Faults{}
	uri, stop, err := mongotest.StartConfig(t.Context(), mongotest.Config{
		Dir: t.TempDir(), SerializeWrites: true, Faults: faults,
	})
	if err != nil {
		t.Fatalf("start FerretDB: %v", err)
	}
	t.Cleanup(stop)
	return uri, faults
}

// openOn opens a driver on database db of the server at uri.
func openOn(t *testing.T, uri, db string) *mongo.Store {
	t.Helper()
	u, err := mongotest.WithDatabase(uri, db)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := mongo.Open(ctx, u, mongo.Options{OperationTimeout: time.Minute})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// cutBatch is a transition batch of three rounds over 12 claimed events:
// eight starts that win, two under a stale fence and one of a missing event
// (11 statements, two update commands on FerretDB), the release of event 0
// (round two) and the start of event 11 that its token goes to (round three).
func cutBatch(ids []string, now time.Time) []store.EventTransition {
	exp := now.Add(time.Minute)
	var ts []store.EventTransition
	for i := range 8 {
		ts = append(ts, store.StartDelivery(ids[i], 1, exp, now))
	}
	ts = append(ts,
		store.StartDelivery(ids[8], 2, exp, now),
		store.StartDelivery(ids[9], 2, exp, now),
		store.StartDelivery("missing", 1, exp, now),
		store.DeliveredReleased(ids[0], model.EventDelivering, 1, 1, true, now),
		store.StartDelivery(ids[11], 1, exp, now).AfterPrevious(),
	)
	return ts
}

// cutBatchWrites is how many write commands cutBatch takes on FerretDB.
const cutBatchWrites = 4

// TestTransitionCut cuts the k-th write command of an EventTransition batch,
// for every k, both before the write reaches the server and by dropping its
// reply: the call returns per-item results that match the store, or
// ErrUnavailable; never ErrNotApplied when something applied, and never
// an event in a state no transition of the batch leads to.
func TestTransitionCut(t *testing.T) {
	t.Parallel()
	uri, faults := faultServer(t)
	now := rtBase.Add(time.Hour)
	for _, mode := range []mongotest.FaultMode{mongotest.FailWrite, mongotest.DropReply} {
		for k := 1; k <= cutBatchWrites+1; k++ {
			name := fmt.Sprintf("mode%d_k%d", mode, k)
			t.Run(name, func(t *testing.T) {
				s := openOn(t, uri, mongotest.DatabaseName(t))
				ctx := t.Context()
				events := pendingEvents("cut", 12)
				insertEvents(t, s, events)
				ids := make([]string, len(events))
				for i, e := range events {
					ids[i] = e.ID
				}
				if got, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: now, Limit: 100}); err != nil || len(got) != len(events) {
					t.Fatalf("claim: %d events, err %v", len(got), err)
				}
				before := statuses(t, s, ids)
				ts := cutBatch(ids, now)

				faults.Arm(k, mode)
				res, err := s.EventTransition(ctx, ts)
				hit := faults.Disarm()
				after := statuses(t, s, ids) // the store works again after a cut

				if hit != (k <= cutBatchWrites) {
					t.Fatalf("cut of write %d happened: %v; the batch takes %d writes", k, hit, cutBatchWrites)
				}
				// reachable[id]: the statuses the event may have after any
				// prefix of its transitions applied.
				reachable := map[string][]model.EventStatus{}
				for _, id := range ids {
					reachable[id] = []model.EventStatus{before[id]}
				}
				for _, tr := range ts {
					if _, ok := reachable[tr.ID]; ok && tr.Fence != 2 {
						reachable[tr.ID] = append(reachable[tr.ID], tr.To)
					}
				}
				for _, id := range ids {
					if !contains(reachable[id], after[id]) {
						t.Errorf("event %s is %s, which no prefix of its transitions leads to (%v)", id, after[id], reachable[id])
					}
				}

				if err != nil {
					if !hit {
						t.Fatalf("EventTransition without a cut: %v", err)
					}
					if !errors.Is(err, model.ErrUnavailable) {
						t.Fatalf("EventTransition cut at write %d: %v, want ErrUnavailable", k, err)
					}
					if errors.Is(err, model.ErrNotApplied) {
						for _, id := range ids {
							if after[id] != before[id] {
								t.Errorf("ErrNotApplied, but event %s went from %s to %s", id, before[id], after[id])
							}
						}
					}
					return
				}
				if hit {
					t.Fatalf("EventTransition cut at write %d returned no error", k)
				}
				// Every result matches the store.
				want := map[string]model.EventStatus{}
				for id, st := range before {
					want[id] = st
				}
				for i, tr := range ts {
					wantErr := error(nil)
					switch {
					case tr.ID == "missing":
						wantErr = model.ErrNotFound
					case tr.Fence == 2:
						wantErr = model.ErrConflict
					}
					if !errors.Is(res[i], wantErr) || (wantErr == nil) != (res[i] == nil) {
						t.Errorf("result %d (%s %s→%s): %v, want %v", i, tr.ID, tr.From, tr.To, res[i], wantErr)
					}
					if res[i] == nil {
						want[tr.ID] = tr.To
					}
				}
				for _, id := range ids {
					if after[id] != want[id] {
						t.Errorf("event %s is %s; the results say %s", id, after[id], want[id])
					}
				}
			})
		}
	}
}

func statuses(t *testing.T, s *mongo.Store, ids []string) map[string]model.EventStatus {
	t.Helper()
	got, err := s.EventGetMany(t.Context(), ids)
	if err != nil {
		t.Fatalf("EventGetMany: %v", err)
	}
	out := make(map[string]model.EventStatus, len(got))
	for id, e := range got {
		out[id] = e.Status
	}
	if len(out) != len(ids) {
		t.Fatalf("EventGetMany: %d of %d events", len(out), len(ids))
	}
	return out
}

func contains[T comparable](vs []T, v T) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}
