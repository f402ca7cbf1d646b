package mongo_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// laneEvents returns n pending events of tenant on shard 0, due one
// millisecond apart from at.
func laneEvents(tenant string, n int, at time.Time) []*model.Event {
	out := pendingEvents(tenant, n)
	for i, e := range out {
		e.TenantID, e.LaunchAt = tenant, at.Add(time.Duration(i)*time.Millisecond)
	}
	return out
}

// rawDB is a plain client's handle on the database of uri.
func rawDB(t *testing.T, uri string) *driver.Database {
	t.Helper()
	client, err := driver.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client.Database(dbOf(t, uri))
}

// unsetLanes makes the events as a version before lanes wrote them.
func unsetLanes(t *testing.T, db *driver.Database) {
	t.Helper()
	res, err := db.Collection("events").UpdateMany(t.Context(), bson.D{}, bson.D{{Key: "$unset", Value: bson.D{{Key: "lane", Value: ""}}}})
	if err != nil || res.ModifiedCount == 0 {
		t.Fatalf("unset lanes: %v, %+v", err, res)
	}
}

// countLaneless counts the events without a lane.
func countLaneless(t *testing.T, db *driver.Database) int64 {
	t.Helper()
	n, err := db.Collection("events").CountDocuments(t.Context(), bson.D{{Key: "lane", Value: bson.D{{Key: "$exists", Value: false}}}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func claimIDs(t *testing.T, s *mongo.Store, p *store.EventClaimParams) []string {
	t.Helper()
	got, err := s.EventClaimDue(t.Context(), p)
	if err != nil {
		t.Fatalf("EventClaimDue: %v", err)
	}
	ids := make([]string, len(got))
	for i, e := range got {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	return ids
}

func sortedIDs(es ...*model.Event) []string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	return ids
}

// TestClaimGivesOldEventsTheirLanes claims events that a version before
// lanes wrote: each claim gives the earliest due ones, at most its limit,
// their lanes and claims them; events not due keep none.
func TestClaimGivesOldEventsTheirLanes(t *testing.T) {
	t.Parallel()
	uri := mongotest.URI(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := mongo.Open(ctx, uri, mongo.Options{OperationTimeout: 10 * time.Minute, ClientClock: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	db := rawDB(t, uri)

	a := laneEvents("A", 4, rtBase)
	b := laneEvents("B", 2, rtBase.Add(time.Second))
	later := laneEvents("C", 1, rtBase.Add(time.Hour))
	insertEvents(t, s, slices.Concat(a, b, later))
	unsetLanes(t, db)

	due := rtBase.Add(time.Minute)
	if got, want := claimIDs(t, s, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: due, Limit: 2}), sortedIDs(a[:2]...); !slices.Equal(got, want) {
		t.Fatalf("first claim: %v, want the two earliest %v", got, want)
	}
	if n := countLaneless(t, db); n != 5 {
		t.Fatalf("%d events without a lane after a claim of 2, want 5", n)
	}
	if got, want := claimIDs(t, s, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: due, Limit: 100}), sortedIDs(slices.Concat(a[2:], b)...); !slices.Equal(got, want) {
		t.Fatalf("second claim: %v, want the rest of the due ones %v", got, want)
	}
	if n := countLaneless(t, db); n != 1 {
		t.Fatalf("%d events without a lane after the claims, want 1 (not due)", n)
	}
}

// TestOpenFillsLanesBeforeTheLaneIndex opens an instance on events that a
// version before lanes wrote, without the lane index: the background
// build gives every event its lane before it builds the index; while the
// build runs, claims take the due events in launch order, and once it is
// done they share them over the lanes.
func TestOpenFillsLanesBeforeTheLaneIndex(t *testing.T) {
	t.Parallel()
	uri, faults := faultServer(t)
	const dbName = "lanefill"
	old := openOn(t, uri, dbName)
	big := laneEvents("big", 6, rtBase)
	small := laneEvents("small", 1, rtBase.Add(time.Second))
	insertEvents(t, old, slices.Concat(big, small))
	u, err := mongotest.WithDatabase(uri, dbName)
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, u)
	unsetLanes(t, db)
	laneIdx := "shard_status_lane_launch_index_id"
	if err := db.Collection("events").Indexes().DropOne(t.Context(), laneIdx); err != nil {
		t.Fatal(err)
	}

	s, release := openHeldBuild(t, uri, dbName, faults, laneIdx)
	defer release()
	if n := countLaneless(t, db); n != 0 {
		t.Fatalf("%d events without a lane when the lane index's build began, want 0", n)
	}
	due := rtBase.Add(time.Minute)
	if got, want := claimIDs(t, s, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: due, Limit: 2}), sortedIDs(big[:2]...); !slices.Equal(got, want) {
		t.Fatalf("claim while the lane index builds: %v, want the two earliest %v", got, want)
	}

	release()
	waitBuilt(t, s)
	if got, want := claimIDs(t, s, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: due, Limit: 2}), sortedIDs(big[2], small[0]); !slices.Equal(got, want) {
		t.Fatalf("claim after the build: %v, want one of each tenant %v", got, want)
	}
}

// openHeldBuild opens an instance on dbName whose background build of the
// events' index idx, the only one missing, is held at its createIndexes
// until release is called.
func openHeldBuild(t *testing.T, uri, dbName string, faults *mongotest.Faults, idx string) (*mongo.Store, func()) {
	t.Helper()
	arrived, release := faults.Hold("createIndexes")
	s := openOn(t, uri, dbName)
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		release()
		t.Fatal("the background build never sent its createIndexes")
	}
	if building, _ := s.IndexStatus(); !slices.Equal(building, []string{"events." + idx}) {
		release()
		t.Fatalf("IndexStatus while the build is held: %v, want %s", building, idx)
	}
	return s, release
}

// waitBuilt waits for s's background build to end.
func waitBuilt(t *testing.T, s *mongo.Store) {
	t.Helper()
	select {
	case <-s.IndexesDone():
	case <-time.After(2 * time.Minute):
		t.Fatal("the background build did not end after the release")
	}
}
