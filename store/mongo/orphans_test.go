package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	driver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
	"github.com/schedulerd/schedulerd/store/storetest"
)

func testSchedule(id string) *model.Schedule {
	return &model.Schedule{ID: id, TenantID: "t1", Name: id, Cron: "0 3 * * *", Timezone: "UTC", EventCount: 1,
		PolicyID: "p1", Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/"}, MaxAttempts: 3,
		Misfire: model.MisfirePolicy("skip"), Overlap: model.OverlapPolicy("allow"), State: model.ScheduleState("active"), Version: 1}
}

func testChildren(id string, version int64, n int) []model.Child {
	out := make([]model.Child, n)
	for i := range out {
		out[i] = model.Child{ScheduleID: id, TenantID: "t1", ScheduleVersion: version, Timezone: "UTC",
			LaunchExpression: "H:3", Minute: i}
	}
	return out
}

// childCounts counts the stored children per schedule.
func childCounts(t *testing.T, db *driver.Database) map[string]int {
	t.Helper()
	cur, err := db.Collection("children").Find(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ScheduleID string `bson:"scheduleId"`
	}
	if err := cur.All(t.Context(), &docs); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range docs {
		out[d.ScheduleID]++
	}
	return out
}

func requireCounts(t *testing.T, got, want map[string]int, what string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: children per schedule %v, want %v", what, got, want)
	}
}

// TestOrphanCleanup removes stale children over several pages of the
// index walk, on the holder of the clean-up's lease only, and keeps young
// children of a missing schedule for the grace period.
func TestOrphanCleanup(t *testing.T) {
	t.Parallel()
	a, db, uri := openWith(t, "", mongo.Options{Owner: "a"})
	a.SetOrphanPage(2)
	ctx := t.Context()
	for i, n := range []int{3, 1, 1, 1, 1} {
		id := fmt.Sprintf("s%d", i+1)
		if err := storetest.CreateSchedule(ctx, a, testSchedule(id), testChildren(id, 1, n)); err != nil {
			t.Fatal(err)
		}
	}
	// A schedule gone without its children (a crash between the two
	// deletes where there are no transactions).
	if err := storetest.CreateSchedule(ctx, a, testSchedule("gone"), testChildren("gone", 1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("schedules").DeleteOne(ctx, bson.D{{Key: "_id", Value: "gone"}}); err != nil {
		t.Fatal(err)
	}
	// Updated without children: theirs go stale.
	for _, id := range []string{"s1", "s3", "s5"} {
		if err := a.ScheduleUpdate(ctx, testSchedule(id), 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	n, err := a.ChildrenDeleteOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("ChildrenDeleteOrphans: %d, want 5 (s1's 3, s3's, s5's)", n)
	}
	requireCounts(t, childCounts(t, db), map[string]int{"gone": 1, "s2": 1, "s4": 1}, "after the first clean-up")

	// Another instance while a holds the lease: nothing.
	if err := a.ScheduleUpdate(ctx, testSchedule("s2"), 1, nil); err != nil {
		t.Fatal(err)
	}
	c, _, _ := openWith(t, uri, mongo.Options{Owner: "c"})
	if n, err := c.ChildrenDeleteOrphans(ctx); err != nil || n != 0 {
		t.Fatalf("ChildrenDeleteOrphans on a non-holder: %d, %v; want 0", n, err)
	}
	requireCounts(t, childCounts(t, db), map[string]int{"gone": 1, "s2": 1, "s4": 1}, "after the non-holder's clean-up")

	if a.ServerClock() {
		// The lease expires on the server's clock, which a test cannot
		// move: the holder goes on.
		if n, err := a.ChildrenDeleteOrphans(ctx); err != nil || n != 1 {
			t.Fatalf("ChildrenDeleteOrphans again: %d, %v; want 1", n, err)
		}
		requireCounts(t, childCounts(t, db), map[string]int{"gone": 1, "s4": 1}, "after the second clean-up")
		return
	}
	// Past the lease's ttl and the grace, another instance takes over.
	later := clockwork.NewFakeClockAt(time.Now().Add(20 * time.Minute))
	b, _, _ := openWith(t, uri, mongo.Options{Owner: "b", Clock: later})
	b.SetOrphanPage(2)
	if n, err := b.ChildrenDeleteOrphans(ctx); err != nil || n != 2 {
		t.Fatalf("ChildrenDeleteOrphans after the holder's lease expired: %d, %v; want 2 (s2's, gone's)", n, err)
	}
	requireCounts(t, childCounts(t, db), map[string]int{"s4": 1}, "after the takeover's clean-up")
	if n, err := a.ChildrenDeleteOrphans(ctx); err != nil || n != 0 {
		t.Fatalf("ChildrenDeleteOrphans on the former holder: %d, %v; want 0", n, err)
	}
}

// TestOrphanQueryPlan explains the clean-up's page query on MongoDB: it
// reads the (scheduleId, scheduleVersion) index only, no collection scan
// and no child document.
func TestOrphanQueryPlan(t *testing.T) {
	if !mongotest.IsRealMongo() {
		t.Skipf("set %s to a real MongoDB: FerretDB v1 does not plan queries with indexes", mongotest.EnvURI)
	}
	t.Parallel()
	db := openRaw(t)
	for _, filter := range []bson.D{{}, {{Key: "$or", Value: bson.A{
		bson.D{{Key: "scheduleId", Value: bson.D{{Key: "$gt", Value: "s1"}}}},
		bson.D{{Key: "scheduleId", Value: "s1"}, {Key: "scheduleVersion", Value: bson.D{{Key: "$gt", Value: 1}}}},
	}}}} {
		cmd := bson.D{{Key: "find", Value: "children"}, {Key: "filter", Value: filter},
			{Key: "sort", Value: bson.D{{Key: "scheduleId", Value: 1}, {Key: "scheduleVersion", Value: 1}}},
			{Key: "projection", Value: bson.D{{Key: "_id", Value: 0}, {Key: "scheduleId", Value: 1}, {Key: "scheduleVersion", Value: 1}}},
			{Key: "limit", Value: 1000}}
		var res bson.Raw
		if err := db.RunCommand(t.Context(), bson.D{{Key: "explain", Value: cmd}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&res); err != nil {
			t.Fatal(err)
		}
		plan := res.Lookup("queryPlanner", "winningPlan").String()
		for _, stage := range []string{`"COLLSCAN"`, `"FETCH"`} {
			if strings.Contains(plan, stage) {
				t.Errorf("filter %v: the plan has %s: %s", filter, stage, plan)
			}
		}
	}
}

// txnRecorder records whether the writes to schedules, children, fires and
// events ran in a transaction (autocommit: false).
type txnRecorder struct {
	mu     sync.Mutex
	writes []string // "insert schedules txn" / "insert children plain"
}

func (r *txnRecorder) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		switch e.CommandName {
		case "insert", "update", "delete":
		default:
			return
		}
		coll, _ := e.Command.Lookup(e.CommandName).StringValueOK()
		if !slices.Contains([]string{"schedules", "children", "fires", "events"}, coll) {
			return
		}
		mode := "plain"
		if v, err := e.Command.LookupErr("autocommit"); err == nil && !v.Boolean() {
			mode = "txn"
		}
		r.mu.Lock()
		r.writes = append(r.writes, e.CommandName+" "+coll+" "+mode)
		r.mu.Unlock()
	}}
}

func (r *txnRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.writes
	r.writes = nil
	return out
}

// TestScheduleTransactions checks that a schedule and its children are
// written in one transaction on a replica set, and without one elsewhere
// (FerretDB, a standalone server). Run on a replica set with
// SCHEDULER_TEST_MONGO_URI (see docs/operating.md).
func TestScheduleTransactions(t *testing.T) {
	t.Parallel()
	rec := &txnRecorder{}
	uri := mongotest.URI(t)
	s, err := mongo.OpenMonitored(t.Context(), uri, mongo.Options{}, rec.monitor())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	mode := "plain"
	if s.Transactions() {
		mode = "txn"
	}
	check := func(what string, want ...string) {
		t.Helper()
		got := rec.take()
		for i := range want {
			want[i] += " " + mode
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: writes %v, want %v", what, got, want)
		}
	}
	rec.take()
	if err := storetest.CreateSchedule(ctx, s, testSchedule("s1"), testChildren("s1", 1, 2)); err != nil {
		t.Fatal(err)
	}
	if mode == "txn" {
		check("ScheduleCreate", "insert schedules", "insert children")
	} else {
		check("ScheduleCreate", "insert children", "insert schedules")
	}
	sc := testSchedule("s1")
	if err := s.ScheduleUpdate(ctx, sc, 1, testChildren("s1", 2, 1)); err != nil {
		t.Fatal(err)
	}
	if mode == "txn" {
		check("ScheduleUpdate", "update schedules", "delete children", "insert children")
	} else {
		check("ScheduleUpdate", "insert children", "update schedules", "delete children")
	}
	// A lost compare-and-set writes nothing that stays.
	if err := s.ScheduleUpdate(ctx, testSchedule("s1"), 1, testChildren("s1", 2, 1)); err == nil {
		t.Fatal("ScheduleUpdate with a stale version: got nil error")
	}
	rec.take()
	if err := s.ScheduleDelete(ctx, "t1", "s1"); err != nil {
		t.Fatal(err)
	}
	check("ScheduleDelete", "delete schedules", "delete children")

	// A one-off's schedule, children, fire and events.
	now := time.Now()
	fire := &model.Fire{ID: "f1", ScheduleID: "s2", TenantID: "t1", FireTime: now, Count: 1, CreatedAt: now}
	ev := &model.Event{ID: "e1", TenantID: "t1", ScheduleID: "s2", FireID: "f1", FireTime: now, LaunchAt: now,
		Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/"}, MaxAttempts: 3,
		Status: model.EventPending, CreatedAt: now, UpdatedAt: now}
	if err := storetest.CreateSchedule(ctx, s, testSchedule("s2"), testChildren("s2", 1, 1),
		store.FireNew{Fire: fire, Events: []*model.Event{ev}}); err != nil {
		t.Fatalf("create one: %v", err)
	}
	if n, err := s.EventCountByFire(ctx, "f1"); err != nil || n[model.EventPending] != 1 {
		t.Fatalf("events of the created fire: %v, %v; want 1", n, err)
	}
	if mode == "txn" {
		check("create one", "insert schedules", "insert children", "insert fires", "insert events")
	} else {
		check("create one", "insert children", "insert schedules", "insert fires", "insert events")
	}
	// Its id taken: nothing of it stays.
	fire2 := &model.Fire{ID: "f2", ScheduleID: "s2", TenantID: "t1", FireTime: now.Add(time.Hour), Count: 1, CreatedAt: now}
	if err := storetest.CreateSchedule(ctx, s, testSchedule("s2"), testChildren("s2", 1, 1),
		store.FireNew{Fire: fire2}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("create of an existing id: %v, want ErrConflict", err)
	}
	if _, err := s.FireGet(ctx, "t1", "f2"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the fire of a conflicting create: %v, want ErrNotFound", err)
	}

	// A batch's schedules, children, fires and events; the item whose id
	// is taken writes no fire.
	fire3 := &model.Fire{ID: "f3", ScheduleID: "s3", TenantID: "t1", FireTime: now, Count: 1, CreatedAt: now}
	ev3 := *ev
	ev3.ID, ev3.ScheduleID, ev3.FireID = "e3", "s3", "f3"
	fire4 := &model.Fire{ID: "f4", ScheduleID: "s2", TenantID: "t1", FireTime: now.Add(2 * time.Hour), Count: 1, CreatedAt: now}
	rec.take()
	res, err := s.ScheduleCreateMany(ctx, []store.ScheduleNew{
		{Schedule: testSchedule("s3"), Children: testChildren("s3", 1, 1), Fires: []store.FireNew{{Fire: fire3, Events: []*model.Event{&ev3}}}},
		{Schedule: testSchedule("s2"), Fires: []store.FireNew{{Fire: fire4}}},
	})
	if err != nil || len(res) != 2 || res[0] != nil || !errors.Is(res[1], model.ErrConflict) {
		t.Fatalf("ScheduleCreateMany: %v, %v; want [nil ErrConflict]", res, err)
	}
	if mode == "txn" {
		check("ScheduleCreateMany", "insert schedules", "insert children", "insert fires", "insert events")
	} else {
		check("ScheduleCreateMany", "insert children", "insert schedules", "insert fires", "insert events")
	}
	if _, err := s.FireGet(ctx, "t1", "f3"); err != nil {
		t.Fatalf("the fire of a batch item: %v", err)
	}
	if _, err := s.FireGet(ctx, "t1", "f4"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the fire of a conflicting batch item: %v, want ErrNotFound", err)
	}
	if mode != "txn" {
		t.Skipf("transactions need a replica set: set %s (the writes without one, checked)", mongotest.EnvURI)
	}
}

// TestOrphanLeaseReleasedOnClose closes the clean-up's holder: another
// instance takes the clean-up over at its next pass, within the lease's
// ttl, instead of waiting for the lease to expire.
func TestOrphanLeaseReleasedOnClose(t *testing.T) {
	t.Parallel()
	a, db, uri := openWith(t, "", mongo.Options{Owner: "a"})
	ctx := t.Context()
	if err := storetest.CreateSchedule(ctx, a, testSchedule("gone"), testChildren("gone", 1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("schedules").DeleteOne(ctx, bson.D{{Key: "_id", Value: "gone"}}); err != nil {
		t.Fatal(err)
	}
	// a takes the lease; its orphans are still within their grace.
	if n, err := a.ChildrenDeleteOrphans(ctx); err != nil || n != 0 {
		t.Fatalf("ChildrenDeleteOrphans on the first holder: %d, %v; want 0", n, err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Past the grace, well inside the lease's ttl.
	later := clockwork.NewFakeClockAt(time.Now().Add(11 * time.Minute))
	b, _, _ := openWith(t, uri, mongo.Options{Owner: "b", Clock: later})
	if n, err := b.ChildrenDeleteOrphans(ctx); err != nil || n != 2 {
		t.Fatalf("ChildrenDeleteOrphans after the holder closed: %d, %v; want 2", n, err)
	}
	requireCounts(t, childCounts(t, db), map[string]int{}, "after the takeover's clean-up")
	// A store that never held the lease closes without touching it.
	c, _, _ := openWith(t, uri, mongo.Options{Owner: "c"})
	if err := c.Close(); err != nil {
		t.Fatalf("Close of a non-holder: %v", err)
	}
	if n, err := b.ChildrenDeleteOrphans(ctx); err != nil || n != 0 {
		t.Fatalf("ChildrenDeleteOrphans on the holder after a non-holder closed: %d, %v; want 0", n, err)
	}
}
