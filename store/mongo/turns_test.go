package mongo_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// scheduleEvents returns n pending events of schedule sched of one tenant
// and policy on shard 0, due one millisecond apart from at.
func scheduleEvents(sched string, n int, at time.Time) []*model.Event {
	out := pendingEvents(sched, n)
	for i, e := range out {
		e.TenantID, e.LaunchAt = "turns", at.Add(time.Duration(i)*time.Millisecond)
	}
	return out
}

// headSchedules returns the schedule ids of the heads stored, sorted.
func headSchedules(t *testing.T, db *driver.Database) []string {
	t.Helper()
	cur, err := db.Collection("eventHeads").Find(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ScheduleID string `bson:"scheduleId"`
	}
	if err := cur.All(t.Context(), &docs); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.ScheduleID)
	}
	slices.Sort(ids)
	return ids
}

func dropHeads(t *testing.T, db *driver.Database) {
	t.Helper()
	if _, err := db.Collection("eventHeads").DeleteMany(t.Context(), bson.D{}); err != nil {
		t.Fatal(err)
	}
}

func openTurns(t *testing.T) (*mongo.Store, *driver.Database) {
	t.Helper()
	uri := mongotest.URI(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := mongo.Open(ctx, uri, mongo.Options{OperationTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, rawDB(t, uri)
}

// TestClaimFindsALostHead claims a policy's lane whose heads were lost (a
// write that failed between events and their heads): nothing is left
// behind; each schedule's events are claimed in the lane's order once
// one of them is the lane's earliest, whose head the walk of the lanes
// writes again.
func TestClaimFindsALostHead(t *testing.T) {
	t.Parallel()
	s, db := openTurns(t)
	backlog := scheduleEvents("backlog", 3, rtBase)
	small := scheduleEvents("small", 1, rtBase.Add(time.Second))
	insertEvents(t, s, slices.Concat(backlog, small))
	if got := headSchedules(t, db); !slices.Equal(got, []string{"sched-backlog", "sched-small"}) {
		t.Fatalf("heads after the inserts: %v, want both schedules'", got)
	}
	dropHeads(t, db)

	due := rtBase.Add(time.Minute)
	p := &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: due, Limit: 2}
	if got, want := claimIDs(t, s, p), sortedIDs(backlog[:2]...); !slices.Equal(got, want) {
		t.Fatalf("first claim: %v, want the lane's earliest two %v", got, want)
	}
	if got := headSchedules(t, db); !slices.Equal(got, []string{"sched-backlog"}) {
		t.Fatalf("heads after the first claim: %v, want the backlog's, written again and moved", got)
	}
	p.Limit = 100
	if got, want := claimIDs(t, s, p), sortedIDs(backlog[2]); !slices.Equal(got, want) {
		t.Fatalf("second claim: %v, want the backlog's last %v", got, want)
	}
	if got, want := claimIDs(t, s, p), sortedIDs(small...); !slices.Equal(got, want) {
		t.Fatalf("third claim: %v, want the schedule without a head, now the lane's earliest %v", got, want)
	}
	if got := headSchedules(t, db); len(got) != 0 {
		t.Fatalf("heads after every event is claimed: %v, want none", got)
	}
	// A rescan's insert of the same events inserts none, and writes no
	// head for them.
	if n, err := s.EventInsertMany(t.Context(), slices.Concat(backlog, small)); err != nil || n != 0 {
		t.Fatalf("EventInsertMany again: %d, %v; want 0 inserted", n, err)
	}
	if got := headSchedules(t, db); len(got) != 0 {
		t.Fatalf("heads after the events were inserted again: %v, want none", got)
	}
}

// TestClaimMovesStaleHeads claims a lane in which one schedule's events
// were cancelled, which leaves its head where it was: the claim takes the
// other schedule's events and removes the stale head.
func TestClaimMovesStaleHeads(t *testing.T) {
	t.Parallel()
	s, db := openTurns(t)
	backlog := scheduleEvents("backlog", 3, rtBase.Add(time.Second))
	gone := scheduleEvents("gone", 2, rtBase)
	insertEvents(t, s, slices.Concat(backlog, gone))
	if _, err := s.EventCancelPending(t.Context(), "sched-gone", "", rtBase); err != nil {
		t.Fatalf("EventCancelPending: %v", err)
	}
	if got := headSchedules(t, db); !slices.Equal(got, []string{"sched-backlog", "sched-gone"}) {
		t.Fatalf("heads after the cancel: %v, want both, the cancelled one's stale", got)
	}
	p := &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: rtBase.Add(time.Minute), Limit: 2}
	if got, want := claimIDs(t, s, p), sortedIDs(backlog[:2]...); !slices.Equal(got, want) {
		t.Fatalf("claim: %v, want the backlog's first two %v", got, want)
	}
	if got := headSchedules(t, db); !slices.Equal(got, []string{"sched-backlog"}) {
		t.Fatalf("heads after the claim: %v, want the stale one removed", got)
	}
}

// TestOpenFillsHeadsBeforeTheTurnsIndex opens an instance on a policy's
// lane that a version before turns wrote (no heads, no turns index): the
// background build writes every schedule's head before it builds the
// index; while the build runs, claims take the lane in its order, and
// once it is done its schedules take turns.
func TestOpenFillsHeadsBeforeTheTurnsIndex(t *testing.T) {
	t.Parallel()
	uri, faults := faultServer(t)
	const dbName = "headfill"
	old := openOn(t, uri, dbName)
	backlog := scheduleEvents("backlog", 6, rtBase)
	small := scheduleEvents("small", 1, rtBase.Add(time.Second))
	insertEvents(t, old, slices.Concat(backlog, small))
	u, err := mongotest.WithDatabase(uri, dbName)
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, u)
	dropHeads(t, db)
	specs, err := db.Collection("events").Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	turnsIdx := ""
	for _, sp := range specs {
		if strings.HasPrefix(sp.Name, "shard_status_lane_schedule_") {
			turnsIdx = sp.Name
		}
	}
	if turnsIdx == "" {
		t.Fatalf("no turns index among %v", specs)
	}
	if err := db.Collection("events").Indexes().DropOne(t.Context(), turnsIdx); err != nil {
		t.Fatal(err)
	}

	s, release := openHeldBuild(t, uri, dbName, faults, turnsIdx)
	defer release()
	if got := headSchedules(t, db); !slices.Equal(got, []string{"sched-backlog", "sched-small"}) {
		t.Fatalf("heads when the turns index's build began: %v, want both schedules'", got)
	}
	due := rtBase.Add(time.Minute)
	if got, want := claimIDs(t, s, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: due, Limit: 2}), sortedIDs(backlog[:2]...); !slices.Equal(got, want) {
		t.Fatalf("claim while the turns index builds: %v, want the lane's earliest two %v", got, want)
	}

	release()
	waitBuilt(t, s)
	if got, want := claimIDs(t, s, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: due, Limit: 2}), sortedIDs(backlog[2], small[0]); !slices.Equal(got, want) {
		t.Fatalf("claim after the build: %v, want a turn of each schedule %v", got, want)
	}
}
