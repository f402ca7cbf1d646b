package mongo_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// openRaw opens a driver (which builds the indexes) and a plain client on
// the same fresh database.
func openRaw(t *testing.T) *driver.Database {
	t.Helper()
	uri := mongotest.URI(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := mongo.Open(ctx, uri, mongo.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	client, err := driver.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client.Database(dbOf(t, uri))
}

func dbOf(t *testing.T, uri string) string {
	t.Helper()
	i := strings.LastIndex(uri, "/")
	db := uri[i+1:]
	if j := strings.IndexByte(db, '?'); j >= 0 {
		db = db[:j]
	}
	return db
}

// TestEventIndexes checks that Open builds the hot queries' event indexes,
// the claim's partial on MongoDB and plain on FerretDB.
func TestEventIndexes(t *testing.T) {
	t.Parallel()
	db := openRaw(t)
	specs, err := db.Collection("events").Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, sp := range specs {
		have[sp.Name] = true
	}
	claim, lanes, turns := "shard_status_launch_id", "shard_status_lane_launch_index_id", "shard_status_lane_schedule_launch_index_id"
	if mongotest.IsRealMongo() {
		claim, lanes, turns = claim+"_waiting", lanes+"_waiting", turns+"_waiting"
	}
	for _, name := range []string{lanes, turns, claim, "policy_status_launch", "policy_status_token_id", "fire_finished"} {
		if !have[name] {
			t.Errorf("events has no index %s (has %v)", name, have)
		}
	}
	heads, err := db.Collection("eventHeads").Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(heads, func(sp driver.IndexSpecification) bool { return sp.Name == "shard_status_lane_launch_schedule" }) {
		t.Errorf("eventHeads has no index shard_status_lane_launch_schedule (has %v)", heads)
	}
}

// TestHotQueryPlans explains the hot queries on events: none may scan the
// collection or sort in memory. It needs a real MongoDB (FerretDB v1 does
// not plan with indexes):
//
//	SCHEDULER_TEST_MONGO_URI=mongodb://127.0.0.1:27017/?directConnection=true \
//	  go test -run TestHotQueryPlans -v ./store/mongo
func TestHotQueryPlans(t *testing.T) {
	if !mongotest.IsRealMongo() {
		t.Skipf("set %s to a real MongoDB: FerretDB v1 does not plan queries with indexes", mongotest.EnvURI)
	}
	t.Parallel()
	db := openRaw(t)
	now := time.Now().UnixNano()
	find := func(filter, sort bson.D, limit int) bson.D {
		cmd := bson.D{{Key: "find", Value: "events"}, {Key: "filter", Value: filter}}
		if sort != nil {
			cmd = append(cmd, bson.E{Key: "sort", Value: sort})
		}
		if limit > 0 {
			cmd = append(cmd, bson.E{Key: "limit", Value: limit})
		}
		return cmd
	}
	cases := []struct {
		name   string
		cmd    bson.D
		noSort bool
	}{
		{"claim due", find(bson.D{{Key: "shard", Value: 3}, {Key: "launchAt", Value: bson.D{{Key: "$lt", Value: now}}}, {Key: "status", Value: "pending"}},
			bson.D{{Key: "launchAt", Value: 1}, {Key: "_id", Value: 1}}, 1000), true},
		// The claim's walk of the lanes: one index entry a lane.
		{"claim lane walk", find(bson.D{{Key: "shard", Value: 3}, {Key: "status", Value: "pending"}, {Key: "lane", Value: bson.D{{Key: "$gt", Value: "a"}}}},
			bson.D{{Key: "lane", Value: 1}, {Key: "launchAt", Value: 1}}, 1), true},
		{"claim lane", find(bson.D{{Key: "shard", Value: 3}, {Key: "launchAt", Value: bson.D{{Key: "$lt", Value: now}}},
			{Key: "lane", Value: "a"}, {Key: "status", Value: "pending"}},
			bson.D{{Key: "launchAt", Value: 1}, {Key: "index", Value: 1}, {Key: "_id", Value: 1}}, 1000), true},
		// A policy's lane: its due heads, then a schedule's events.
		{"claim turns heads", append(bson.D{{Key: "find", Value: "eventHeads"}}, find(bson.D{{Key: "shard", Value: 3}, {Key: "status", Value: "pending"},
			{Key: "lane", Value: "a"}, {Key: "launchAt", Value: bson.D{{Key: "$lt", Value: now}}}},
			bson.D{{Key: "launchAt", Value: 1}, {Key: "scheduleId", Value: 1}}, 1000)[1:]...), true},
		{"claim turns schedule", find(bson.D{{Key: "shard", Value: 3}, {Key: "status", Value: "pending"}, {Key: "lane", Value: "a"},
			{Key: "scheduleId", Value: "s"}, {Key: "policyId", Value: bson.D{{Key: "$gt", Value: ""}}}},
			bson.D{{Key: "launchAt", Value: 1}, {Key: "index", Value: 1}, {Key: "_id", Value: 1}}, 1001), true},
		{"count lane", bson.D{{Key: "count", Value: "events"}, {Key: "query", Value: bson.D{{Key: "shard", Value: 3},
			{Key: "launchAt", Value: bson.D{{Key: "$lt", Value: now}}}, {Key: "lane", Value: "a"}, {Key: "status", Value: "pending"}}},
			{Key: "limit", Value: 1000}}, true},
		// Scheduled under another fence: few events, so a sort of them is
		// allowed; a scan is not.
		{"claim takeover", find(bson.D{{Key: "shard", Value: 3}, {Key: "fence", Value: bson.D{{Key: "$ne", Value: 7}}}, {Key: "status", Value: "scheduled"}},
			bson.D{{Key: "launchAt", Value: 1}, {Key: "_id", Value: 1}}, 1000), false},
		{"count waiting", bson.D{{Key: "count", Value: "events"}, {Key: "query", Value: bson.D{{Key: "policyId", Value: "p"},
			{Key: "launchAt", Value: bson.D{{Key: "$lte", Value: now}}}, {Key: "status", Value: "pending"}}}}, true},
		{"count holding tokens", bson.D{{Key: "count", Value: "events"}, {Key: "query", Value: bson.D{{Key: "policyId", Value: "p"},
			{Key: "status", Value: "delivering"}}}}, true},
		{"token expired", find(bson.D{{Key: "policyId", Value: "p"}, {Key: "tokenExpiresAt", Value: bson.D{{Key: "$lt", Value: now}}}, {Key: "status", Value: "delivering"}},
			bson.D{{Key: "tokenExpiresAt", Value: 1}, {Key: "_id", Value: 1}}, 500), true},
		{"last finished", find(bson.D{{Key: "fireId", Value: "f"}, {Key: "finishedAt", Value: bson.D{{Key: "$exists", Value: true}}}},
			bson.D{{Key: "finishedAt", Value: -1}}, 1), true},
	}
	for _, c := range cases {
		var res bson.Raw
		err := db.RunCommand(t.Context(), bson.D{{Key: "explain", Value: c.cmd}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&res)
		if err != nil {
			t.Fatalf("%s: explain: %v", c.name, err)
		}
		plan, err := res.LookupErr("queryPlanner", "winningPlan")
		if err != nil {
			t.Fatalf("%s: no winning plan in %s", c.name, res)
		}
		js := plan.String()
		if strings.Contains(js, `"COLLSCAN"`) {
			t.Errorf("%s: the plan scans the collection: %s", c.name, js)
		}
		if c.noSort && strings.Contains(js, `"SORT"`) {
			t.Errorf("%s: the plan sorts in memory: %s", c.name, js)
		}
	}
}
