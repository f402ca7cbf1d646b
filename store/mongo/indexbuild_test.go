package mongo_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// indexNames lists the names of coll's indexes.
func indexNames(t *testing.T, db *driver.Database, coll string) []string {
	t.Helper()
	specs, err := db.Collection(coll).Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sp := range specs {
		names = append(names, sp.Name)
	}
	return names
}

// TestOpenDoesNotWaitForIndexBuilds starts an instance on a populated
// database that misses an index, with the proxy holding every
// createIndexes (a build that takes long): Open returns while the build is
// held, IndexStatus names the index, and once the build is let through
// the indexes exist, IndexStatus is empty and the superseded indexes
// (policy_status, a prefix of policy_status_launch, and the lane index
// before the events' index in their fires was in it) are dropped.
func TestOpenDoesNotWaitForIndexBuilds(t *testing.T) {
	t.Parallel()
	uri, faults := faultServer(t)
	const dbName = "ixbuild"
	openOn(t, uri, dbName) // builds every index on the empty collections
	u, err := mongotest.WithDatabase(uri, dbName)
	if err != nil {
		t.Fatal(err)
	}
	client, err := driver.Connect(options.Client().ApplyURI(u))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(dbName)
	ctx := t.Context()
	if _, err := db.Collection("events").InsertOne(ctx, bson.D{{Key: "_id", Value: "e1"}, {Key: "status", Value: "pending"}}); err != nil {
		t.Fatal(err)
	}
	lanes, oldLanes := "shard_status_lane_launch_index_id", "shard_status_lane_launch_id"
	if mongotest.IsRealMongo() {
		lanes, oldLanes = lanes+"_waiting", oldLanes+"_waiting"
	}
	for _, name := range []string{"fire_finished", lanes} {
		if err := db.Collection("events").Indexes().DropOne(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	// Indexes of an earlier version that current ones make redundant.
	for _, m := range []driver.IndexModel{
		{Keys: bson.D{{Key: "policyId", Value: 1}, {Key: "status", Value: 1}}, Options: options.Index().SetName("policy_status")},
		{Keys: bson.D{{Key: "shard", Value: 1}, {Key: "status", Value: 1}, {Key: "lane", Value: 1}, {Key: "launchAt", Value: 1}, {Key: "_id", Value: 1}},
			Options: options.Index().SetName(oldLanes)},
	} {
		if _, err := db.Collection("events").Indexes().CreateOne(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	arrived, release := faults.Hold("createIndexes")
	defer release()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := mongo.Open(octx, u, mongo.Options{OperationTimeout: time.Minute})
	if err != nil {
		t.Fatalf("Open waited for the held index build: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	want := []string{"events.fire_finished", "events." + lanes}
	if building, err := s.IndexStatus(); !slices.Equal(slices.Sorted(slices.Values(building)), want) || err != nil {
		t.Fatalf("IndexStatus while the build is held: %v, %v; want %v, nil", building, err, want)
	}
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		t.Fatal("the background build never sent its createIndexes")
	}
	select {
	case <-s.IndexesDone():
		t.Fatal("IndexesDone closed while the build is held")
	default:
	}
	release()
	select {
	case <-s.IndexesDone():
	case <-time.After(2 * time.Minute):
		t.Fatal("the background build did not end after the release")
	}
	if building, err := s.IndexStatus(); len(building) != 0 || err != nil {
		t.Fatalf("IndexStatus after the build: %v, %v; want none", building, err)
	}
	names := indexNames(t, db, "events")
	if !slices.Contains(names, "fire_finished") || !slices.Contains(names, lanes) || slices.Contains(names, "policy_status") || slices.Contains(names, oldLanes) {
		t.Fatalf("events indexes after the build: %v; want fire_finished and %s, and neither policy_status nor %s", names, lanes, oldLanes)
	}
}

// TestBuildIndexes builds the indexes of a store opened with SkipIndexes
// in the foreground, reporting each one, as schedulerd mongo-indexes does.
func TestBuildIndexes(t *testing.T) {
	t.Parallel()
	uri := mongotest.URI(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := mongo.Open(ctx, uri, mongo.Options{SkipIndexes: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	client, err := driver.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(dbOf(t, uri))
	if names := indexNames(t, db, "events"); slices.Contains(names, "fire_finished") {
		t.Fatalf("SkipIndexes built indexes: %v", names)
	}
	var built []string
	if err := s.BuildIndexes(ctx, func(ix string) { built = append(built, ix) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(built, "events.fire_finished") || !slices.Contains(indexNames(t, db, "events"), "fire_finished") {
		t.Fatalf("BuildIndexes reported %v; events has %v", built, indexNames(t, db, "events"))
	}
	built = nil
	if err := s.BuildIndexes(ctx, func(ix string) { built = append(built, ix) }); err != nil || len(built) != 0 {
		t.Fatalf("BuildIndexes again: built %v, %v; want nothing", built, err)
	}
}
