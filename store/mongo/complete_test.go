package mongo_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// TestFillEnds: schedules written before endsAt existed get it at the
// next Open (while its index is missing), so that their one-offs complete.
func TestFillEnds(t *testing.T) {
	t.Parallel()
	uri := mongotest.URI(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	client, err := driver.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(dbOf(t, uri))
	runAt := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	s, err := mongo.Open(ctx, uri, mongo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	sc := &model.Schedule{ID: "o1", TenantID: "A", Name: "o1", RunAt: &runAt, Timezone: "UTC", EventCount: 1,
		Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/hook"}, MaxAttempts: 3,
		Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow, State: model.ScheduleActive, Version: 1}
	if err := storetest.CreateSchedule(ctx, s, sc, nil); err != nil {
		t.Fatal(err)
	}
	// As an older version left it: no endsAt, no index of it.
	if r, err := db.Collection("schedules").UpdateOne(ctx, bson.D{{Key: "_id", Value: "o1"}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "endsAt", Value: ""}}}}); err != nil || r.ModifiedCount != 1 {
		t.Fatalf("unset endsAt: %v %+v", err, r)
	}
	if err := db.Collection("schedules").Indexes().DropOne(ctx, "ends_id"); err != nil {
		t.Fatal(err)
	}
	s2, err := mongo.Open(ctx, uri, mongo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	now := runAt.Add(2 * time.Hour)
	res, err := s2.ScheduleComplete(ctx, &store.ScheduleCompleteParams{Now: now, MissedBefore: now, At: now, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 1 {
		t.Fatalf("completed %d after reopening, want 1", res.Completed)
	}
}
