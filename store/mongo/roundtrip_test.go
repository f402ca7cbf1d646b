package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// commandCounter counts the commands a client sends, by name.
type commandCounter struct {
	mu sync.Mutex
	by map[string]int
}

func (c *commandCounter) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.by == nil {
			c.by = map[string]int{}
		}
		c.by[e.CommandName]++
	}}
}

// take returns the counts since the last take, and their total.
func (c *commandCounter) take() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	by := c.by
	c.by = nil
	total := 0
	for _, n := range by {
		total += n
	}
	return by, total
}

func formatCounts(by map[string]int) string {
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, by[n])
	}
	return strings.Join(parts, " ")
}

var rtBase = time.Date(2030, time.March, 4, 5, 0, 0, 0, time.UTC)

// pendingEvents returns n pending events of queue shard 0, due one
// millisecond apart from rtBase.
func pendingEvents(prefix string, n int) []*model.Event {
	fireID := model.FireID("sched-"+prefix, 1, rtBase)
	out := make([]*model.Event, n)
	for i := range out {
		out[i] = &model.Event{
			ID: model.EventID(fireID, i), TenantID: "tenant-1", ScheduleID: "sched-" + prefix,
			FireID: fireID, FireTime: rtBase, Index: i, Count: n,
			LaunchAt: rtBase.Add(time.Duration(i) * time.Millisecond),
			Target:   model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hooks/nightly"},
			Payload:  json.RawMessage(`{"job":"nightly-report"}`), PolicyID: "policy-1",
			MaxAttempts: 5, Shard: 0, Status: model.EventPending, CreatedAt: rtBase, UpdatedAt: rtBase,
		}
	}
	return out
}

func insertEvents(t *testing.T, s *mongo.Store, events []*model.Event) {
	t.Helper()
	n, err := s.EventInsertMany(t.Context(), events)
	if err != nil || n != len(events) {
		t.Fatalf("EventInsertMany: inserted %d of %d, err %v", n, len(events), err)
	}
}

// roundTripBounds are the most commands an operation may take; the counts
// they bound are recorded in docs/benchmarks.md (MongoDB driver).
type roundTripBounds struct{ claim, start, outcome int }

// On MongoDB the claim of one policy's lane of one schedule is six finds
// (scheduled under another fence; the walk of the lanes: the pending lane
// and the end of the pending and of the retrying lanes; the lane's due
// heads; the schedule's events, no count being needed for a lone lane),
// one bulk update, one read-back by _id and the head's move, each find
// asking for all its documents in its first batch (no getMore); a
// transition batch of independent events is one bulk update and one
// read-back. FerretDB takes more: updates of ten statements, getMores
// after its own batch limit, and a read-back of one find per event for a
// transition batch, because it evaluates $in over the whole collection.
var (
	mongoBounds  = roundTripBounds{claim: 6 + 1 + 1 + 1, start: 2, outcome: 2}
	ferretBounds = roundTripBounds{claim: 7 + 2 + 10 + 1, start: 10 + 100, outcome: 10 + 100}
)

// TestRoundTrips counts the commands of the hot path's store operations: a
// claim of 1,000 due events, the start of 100 throttled events (one
// transition batch) and the outcome of their 100 deliveries.
func TestRoundTrips(t *testing.T) {
	if raceDetector {
		// It counts commands, which the race detector does not change, and
		// FerretDB's claim of 1,000 events under it takes minutes; the test
		// script runs it without.
		t.Skip("counts commands; run without -race")
	}
	t.Parallel()
	const claimed, batch = 1000, 100
	var counter commandCounter
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	s, err := mongo.OpenMonitored(ctx, mongotest.URI(t), mongo.Options{OperationTimeout: 10 * time.Minute}, counter.monitor())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	bounds := ferretBounds
	if mongotest.IsRealMongo() {
		bounds = mongoBounds
	}

	insertEvents(t, s, pendingEvents("rt", claimed))
	counter.take()

	got, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: rtBase.Add(time.Hour), Limit: claimed})
	if err != nil || len(got) != claimed {
		t.Fatalf("EventClaimDue: %d events, err %v; want %d", len(got), err, claimed)
	}
	by, n := counter.take()
	t.Logf("claim of %d: %d commands (%s)", claimed, n, formatCounts(by))
	if n > bounds.claim {
		t.Errorf("claim of %d took %d commands (%s), want at most %d", claimed, n, formatCounts(by), bounds.claim)
	}

	now := rtBase.Add(time.Hour)
	ts := make([]store.EventTransition, batch)
	for i := range ts {
		ts[i] = store.StartDelivery(got[i].ID, 1, now.Add(time.Minute), now)
	}
	checkBatch(t, s, ts)
	by, n = counter.take()
	t.Logf("start of %d: %d commands (%s)", batch, n, formatCounts(by))
	if n > bounds.start {
		t.Errorf("start of %d took %d commands (%s), want at most %d", batch, n, formatCounts(by), bounds.start)
	}

	for i := range ts {
		ts[i] = store.DeliveredReleased(got[i].ID, model.EventDelivering, 1, 1, true, now)
	}
	checkBatch(t, s, ts)
	by, n = counter.take()
	t.Logf("outcome of %d: %d commands (%s)", batch, n, formatCounts(by))
	if n > bounds.outcome {
		t.Errorf("outcome of %d took %d commands (%s), want at most %d", batch, n, formatCounts(by), bounds.outcome)
	}
}

// checkBatch applies ts, all of which must win.
func checkBatch(t *testing.T, s *mongo.Store, ts []store.EventTransition) {
	t.Helper()
	res, err := s.EventTransition(t.Context(), ts)
	if err != nil {
		t.Fatalf("EventTransition: %v", err)
	}
	for i, e := range res {
		if e != nil {
			t.Fatalf("transition %d (%s→%s): %v", i, ts[i].From, ts[i].To, e)
		}
	}
}

// TestClaimRoundTripsPerLane counts the commands of claims over 2 and 6
// due lanes (tenants) of 10 pending events each, the limit taking half
// of each: a lane without a policy costs three (one find of the walk of
// the lanes, one count, one find of its take), a policy's lane of one
// schedule four (its due heads' find, then its schedule's events' find),
// and a claim five more (the older fences' find, the walk's end in each of
// the two statuses, the update and the read-back) and one with policies'
// lanes a sixth (the heads' moves). FerretDB takes a getMore more after
// each find of a lane's events and after the read-back: it closes a
// cursor only when asked for more.
func TestClaimRoundTripsPerLane(t *testing.T) {
	t.Parallel()
	var counter commandCounter
	ctx := t.Context()
	s, err := mongo.OpenMonitored(ctx, mongotest.URI(t), mongo.Options{OperationTimeout: 10 * time.Minute}, counter.monitor())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for _, policy := range []string{"", "policy-1"} {
		for _, lanes := range []int{2, 6} {
			shard := lanes
			if policy != "" {
				shard += 10
			}
			var events []*model.Event
			for l := range lanes {
				tenant := fmt.Sprintf("lanes%d-t%d", shard, l)
				es := pendingEvents(tenant, 10)
				for _, e := range es {
					e.TenantID, e.Shard, e.PolicyID = tenant, shard, policy
				}
				events = append(events, es...)
			}
			insertEvents(t, s, events)
			counter.take()
			limit := 5 * lanes
			got, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: shard, Fence: 1, DueBefore: rtBase.Add(time.Hour), Limit: limit})
			if err != nil || len(got) != limit {
				t.Fatalf("EventClaimDue over %d lanes of policy %q: %d events, err %v; want %d", lanes, policy, len(got), err, limit)
			}
			by, n := counter.take()
			t.Logf("claim over %d lanes of policy %q: %d commands (%s)", lanes, policy, n, formatCounts(by))
			want := 5 + 3*lanes
			if policy != "" {
				want = 6 + 4*lanes
			}
			if !mongotest.IsRealMongo() {
				want += lanes + 1
			}
			if n != want {
				t.Errorf("claim over %d lanes of policy %q took %d commands (%s), want %d", lanes, policy, n, formatCounts(by), want)
			}
		}
	}
}
