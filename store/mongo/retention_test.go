package mongo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// openWith opens a driver with opts on a fresh database (or on uri's, if
// given) and a plain client on the same database.
func openWith(t *testing.T, uri string, opts mongo.Options) (*mongo.Store, *driver.Database, string) {
	t.Helper()
	if uri == "" {
		uri = mongotest.URI(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if opts.OperationTimeout == 0 {
		opts.OperationTimeout = 5 * time.Minute
	}
	s, err := mongo.Open(ctx, uri, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	client, err := driver.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return s, client.Database(dbOf(t, uri)), uri
}

// rawDoc reads one document as stored.
func rawDoc(t *testing.T, db *driver.Database, coll string, filter bson.D) bson.M {
	t.Helper()
	var m bson.M
	if err := db.Collection(coll).FindOne(t.Context(), filter).Decode(&m); err != nil {
		t.Fatalf("read %s %v: %v", coll, filter, err)
	}
	return m
}

// requireDate checks that field of m is the BSON date of want
// (milliseconds), or absent when want is zero.
func requireDate(t *testing.T, m bson.M, field string, want time.Time, what string) {
	t.Helper()
	v, ok := m[field]
	if want.IsZero() {
		if ok {
			t.Fatalf("%s: %s is %v, want it absent", what, field, v)
		}
		return
	}
	d, isDate := v.(bson.DateTime)
	if !isDate {
		t.Fatalf("%s: %s is %T %v, want a BSON date", what, field, v, v)
	}
	if d.Time().UnixMilli() != want.UnixMilli() {
		t.Fatalf("%s: %s is %s, want %s", what, field, d.Time().UTC(), want.UTC())
	}
}

// TestRetentionDates checks the Date fields the TTL indexes read: set by
// the transitions into released and cancelled (with the finish instant),
// removed by a transition out of them, on idempotency records from their
// creation, and on member leases (not on unit leases) from their expiry.
func TestRetentionDates(t *testing.T) {
	t.Parallel()
	s, db, _ := openWith(t, "", mongo.Options{})
	ctx := t.Context()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	ev := func(id string) *model.Event {
		return &model.Event{ID: id, TenantID: "t1", ScheduleID: "s1", FireID: "f1", FireTime: at, LaunchAt: at,
			PolicyID: "p1", Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/"}, MaxAttempts: 3,
			Status: model.EventPending, CreatedAt: at, UpdatedAt: at}
	}
	if _, err := s.EventInsertMany(ctx, []*model.Event{ev("e1"), ev("e2"), ev("e3")}); err != nil {
		t.Fatal(err)
	}
	requireDate(t, rawDoc(t, db, "events", bson.D{{Key: "_id", Value: "e1"}}), "finishedDate", time.Time{}, "pending event")

	// Released by the consumer of an unthrottled event.
	released := at.Add(time.Minute)
	res, err := s.EventTransition(ctx, []store.EventTransition{store.Acknowledge("e1", model.EventPending, released)})
	if err != nil || res[0] != nil {
		t.Fatalf("Acknowledge: %v %v", err, res)
	}
	requireDate(t, rawDoc(t, db, "events", bson.D{{Key: "_id", Value: "e1"}}), "finishedDate", released, "released event")

	// Dead is kept until redriven: no date.
	dead := at.Add(2 * time.Minute)
	res, err = s.EventTransition(ctx, []store.EventTransition{store.Dead("e2", model.EventPending, 0, 1, "boom", false, dead)})
	if err != nil || res[0] != nil {
		t.Fatalf("Dead: %v %v", err, res)
	}
	requireDate(t, rawDoc(t, db, "events", bson.D{{Key: "_id", Value: "e2"}}), "finishedDate", time.Time{}, "dead event")

	// Cancelled with the schedule's waiting events.
	cancelled := at.Add(3 * time.Minute)
	if n, err := s.EventCancelPending(ctx, "s1", "", cancelled); err != nil || n != 1 {
		t.Fatalf("EventCancelPending: %d %v, want 1", n, err)
	}
	requireDate(t, rawDoc(t, db, "events", bson.D{{Key: "_id", Value: "e3"}}), "finishedDate", cancelled, "cancelled event")

	// A delivery that lands after the cancel finishes it as released, anew.
	late := at.Add(4 * time.Minute)
	res, err = s.EventTransition(ctx, []store.EventTransition{store.DeliveredAfterCancel("e3", 1, late, late)})
	if err != nil || res[0] != nil {
		t.Fatalf("DeliveredAfterCancel: %v %v", err, res)
	}
	requireDate(t, rawDoc(t, db, "events", bson.D{{Key: "_id", Value: "e3"}}), "finishedDate", late, "released after cancel")

	// Out of released (a retry of e1, as a redrive would): no longer expires.
	res, err = s.EventTransition(ctx, []store.EventTransition{{ID: "e1", From: model.EventReleased, To: model.EventPending, At: late}})
	if err != nil || res[0] != nil {
		t.Fatalf("released→pending: %v %v", err, res)
	}
	requireDate(t, rawDoc(t, db, "events", bson.D{{Key: "_id", Value: "e1"}}), "finishedDate", time.Time{}, "event back to pending")

	// Idempotency records.
	if _, err := s.IdempotencyPut(ctx, &model.IdempotencyRecord{TenantID: "t1", Key: "k1", RequestHash: "h", Status: 201, CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	requireDate(t, rawDoc(t, db, "idempotency", bson.D{{Key: "key", Value: "k1"}}), "createdDate", at, "idempotency record")
	if _, err := s.IdempotencyPutMany(ctx, []*model.IdempotencyRecord{{TenantID: "t1", Key: "k2", RequestHash: "h", Status: 201, CreatedAt: released}}); err != nil {
		t.Fatal(err)
	}
	requireDate(t, rawDoc(t, db, "idempotency", bson.D{{Key: "key", Value: "k2"}}), "createdDate", released, "idempotency record (many)")

	// Leases: the member's expiry, on insert, on renewal by acquire, on
	// takeover; units never.
	now := time.Now()
	member := "handler/member/a"
	if _, err := s.LeaseAcquire(ctx, member, "a", now, time.Minute); err != nil {
		t.Fatal(err)
	}
	requireDate(t, rawDoc(t, db, "leases", bson.D{{Key: "_id", Value: member}}), "expiresDate", now.Add(time.Minute), "new member lease")
	if !s.ServerClock() {
		// On the server's clock the date is the server's: checked by
		// TestServerClockLeases.
		if _, err := s.LeaseAcquire(ctx, member, "a", now.Add(time.Second), time.Minute); err != nil {
			t.Fatal(err)
		}
		requireDate(t, rawDoc(t, db, "leases", bson.D{{Key: "_id", Value: member}}), "expiresDate", now.Add(time.Second+time.Minute), "renewed member lease")
	}
	unit := "handler/unit/3"
	if _, err := s.LeaseAcquire(ctx, unit, "a", now, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseAcquire(ctx, unit, "a", now.Add(time.Second), time.Minute); err != nil {
		t.Fatal(err)
	}
	requireDate(t, rawDoc(t, db, "leases", bson.D{{Key: "_id", Value: unit}}), "expiresDate", time.Time{}, "unit lease")

	// A released member lease expires from the server's now.
	l, err := s.LeaseAcquire(ctx, member, "a", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Millisecond)
	if err := s.LeaseRelease(ctx, member, "a", l.Fence); err != nil {
		t.Fatal(err)
	}
	d, ok := rawDoc(t, db, "leases", bson.D{{Key: "_id", Value: member}})["expiresDate"].(bson.DateTime)
	if !ok || d.Time().Before(before) {
		t.Fatalf("released member lease: expiresDate %v, want a date not before the release (%s)", d, before)
	}
}

// TestTTLIndexes checks the TTL indexes and their expireAfterSeconds on
// MongoDB, and that a start with another retention changes them in place;
// FerretDB v1 refuses TTL indexes, so it has none.
func TestTTLIndexes(t *testing.T) {
	t.Parallel()
	s, db, uri := openWith(t, "", mongo.Options{EventRetention: 90 * time.Minute, IdempotencyRetention: 1500 * time.Millisecond})
	// The application runs the purge jobs as a backstop only where this
	// is true (app.retentionInterval).
	if s.RetentionByTTL() != mongotest.IsRealMongo() {
		t.Fatalf("RetentionByTTL %v on a real MongoDB %v", s.RetentionByTTL(), mongotest.IsRealMongo())
	}
	ttl := func() map[string]int32 {
		t.Helper()
		out := map[string]int32{}
		for _, coll := range []string{"events", "idempotency", "leases"} {
			specs, err := db.Collection(coll).Indexes().ListSpecifications(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, sp := range specs {
				if sp.ExpireAfterSeconds != nil {
					out[coll+"."+sp.Name] = *sp.ExpireAfterSeconds
				}
			}
		}
		return out
	}
	got := ttl()
	if !mongotest.IsRealMongo() {
		if len(got) != 0 {
			t.Fatalf("TTL indexes on FerretDB: %v, want none", got)
		}
		t.Skipf("TTL indexes and their retention need a real MongoDB: set %s (FerretDB v1 has none, checked)", mongotest.EnvURI)
	}
	want := map[string]int32{"events.finished_partial_ttl": 5400, "idempotency.created_partial_ttl": 2, "leases.member_expires_partial_ttl": 3600}
	requireTTL(t, got, want, "first start")

	_, _, _ = openWith(t, uri, mongo.Options{EventRetention: 48 * time.Hour, IdempotencyRetention: time.Hour})
	want = map[string]int32{"events.finished_partial_ttl": 172800, "idempotency.created_partial_ttl": 3600, "leases.member_expires_partial_ttl": 3600}
	requireTTL(t, ttl(), want, "start with other retentions")
}

func requireTTL(t *testing.T, got, want map[string]int32, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: TTL indexes %v, want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: TTL indexes %v, want %v", what, got, want)
		}
	}
}

// TestServerClockLeases takes a lease from an instance whose clock runs an
// hour behind. Judged by the callers' clocks (FerretDB), an instance with
// the right time takes it at once, from under its holder; judged by the
// server's (MongoDB), it cannot until the lease's ttl has passed on the
// server.
func TestServerClockLeases(t *testing.T) {
	t.Parallel()
	behind := clockwork.NewFakeClockAt(time.Now().Add(-time.Hour))
	slow, _, uri := openWith(t, "", mongo.Options{Clock: behind, Owner: "slow"})
	right, _, _ := openWith(t, uri, mongo.Options{Owner: "right"})
	if slow.ServerClock() != mongotest.IsRealMongo() {
		t.Fatalf("ServerClock: %v on a real MongoDB %v", slow.ServerClock(), mongotest.IsRealMongo())
	}
	ctx := t.Context()
	held, err := slow.LeaseAcquire(ctx, "emitter/unit/0", "slow", behind.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !held.ExpiresAt.Equal(behind.Now().Add(time.Minute)) {
		t.Fatalf("ExpiresAt %s, want the holder's now+ttl %s", held.ExpiresAt, behind.Now().Add(time.Minute))
	}
	_, err = right.LeaseAcquire(ctx, "emitter/unit/0", "right", time.Now(), time.Minute)
	if !right.ServerClock() {
		if err != nil {
			t.Fatalf("client clocks: the lease of a clock an hour behind is expired to the others: got %v", err)
		}
		t.Skipf("leases on the server's clock need a real MongoDB: set %s (FerretDB v1 judges by the callers' clocks, checked)", mongotest.EnvURI)
	}
	if err == nil {
		t.Fatal("server clock: a lease an hour behind's holder took a minute ago was taken")
	}
	// Renewal by the slow holder stays on the server's clock as well.
	if _, err := slow.LeaseRenew(ctx, "emitter/unit/0", "slow", held.Fence, behind.Now(), time.Minute); err != nil {
		t.Fatalf("LeaseRenew: %v", err)
	}
	if _, err := right.LeaseAcquire(ctx, "emitter/unit/0", "right", time.Now(), time.Minute); err == nil {
		t.Fatal("server clock: the lease was taken right after its renewal")
	}
	// An instant two minutes on, moved onto the server's clock, is past
	// the lease's expiry there.
	if _, err := right.LeaseAcquire(ctx, "emitter/unit/0", "right", time.Now().Add(2*time.Minute), time.Minute); err != nil {
		t.Fatalf("server clock: two minutes on, the lease is still held: %v", err)
	}
}

// TestServerClockTokens judges token expiry with a clock an hour ahead:
// by the caller's clock every token of the last hour has expired; by the
// server's, a token stamped to expire in a minute has not.
func TestServerClockTokens(t *testing.T) {
	t.Parallel()
	ahead := clockwork.NewFakeClockAt(time.Now().Add(time.Hour))
	s, _, _ := openWith(t, "", mongo.Options{Clock: ahead})
	ctx := t.Context()
	now := time.Now()
	e := &model.Event{ID: "e1", TenantID: "t1", ScheduleID: "s1", FireID: "f1", FireTime: now, LaunchAt: now,
		PolicyID: "p1", Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/"}, MaxAttempts: 3,
		Status: model.EventDelivering, TokenExpiresAt: ptrTime(now.Add(time.Minute)), CreatedAt: now, UpdatedAt: now}
	if _, err := s.EventInsertMany(ctx, []*model.Event{e}); err != nil {
		t.Fatal(err)
	}
	got, err := s.EventFindTokenExpired(ctx, "p1", ahead.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	want := 1
	if s.ServerClock() {
		want = 0
	}
	if len(got) != want {
		t.Fatalf("EventFindTokenExpired on a clock an hour ahead (server clock %v): %d events, want %d", s.ServerClock(), len(got), want)
	}
	// Every token, whatever the clock: the reconciliation's question.
	got, err = s.EventFindTokenExpired(ctx, "p1", time.Unix(0, 1<<63-1), 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("EventFindTokenExpired at the last instant: %d events, %v; want 1", len(got), err)
	}
	if !s.ServerClock() {
		t.Skipf("token expiries on the server's clock need a real MongoDB: set %s (FerretDB v1 judges by the callers' clocks, checked)", mongotest.EnvURI)
	}
}

// TestServerClockTokenStamp starts a delivery from an instance whose clock
// runs an hour behind, with a token for a minute. Stamped on the server's
// clock, the token expires a minute from now for every instance; stamped
// on the caller's (FerretDB), it expired an hour ago to an instance whose
// clock is right.
func TestServerClockTokenStamp(t *testing.T) {
	t.Parallel()
	behind := clockwork.NewFakeClockAt(time.Now().Add(-time.Hour))
	s, _, uri := openWith(t, "", mongo.Options{Clock: behind})
	right, _, _ := openWith(t, uri, mongo.Options{})
	ctx := t.Context()
	now := time.Now()
	e := &model.Event{ID: "e1", TenantID: "t1", ScheduleID: "s1", FireID: "f1", FireTime: now, LaunchAt: now,
		PolicyID: "p1", Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/"}, MaxAttempts: 3,
		Status: model.EventScheduled, Fence: 1, CreatedAt: now, UpdatedAt: now}
	if _, err := s.EventInsertMany(ctx, []*model.Event{e}); err != nil {
		t.Fatal(err)
	}
	res, err := s.EventTransition(ctx, []store.EventTransition{store.StartDelivery("e1", 1, behind.Now().Add(time.Minute), behind.Now())})
	if err != nil || res[0] != nil {
		t.Fatalf("StartDelivery: %v, %v", res, err)
	}
	found, err := right.EventFindTokenExpired(ctx, "p1", time.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if !s.ServerClock() {
		if len(found) != 1 {
			t.Fatalf("client clocks: the token of a clock an hour behind: %d expired, want 1", len(found))
		}
		t.Skipf("token stamps on the server's clock need a real MongoDB: set %s (FerretDB v1 stamps the caller's instant, checked)", mongotest.EnvURI)
	}
	if len(found) != 0 {
		t.Fatalf("server clock: a token stamped for a minute by a clock an hour behind is expired to the others")
	}
	if found, err := right.EventFindTokenExpired(ctx, "p1", time.Now().Add(2*time.Minute), 10); err != nil || len(found) != 1 {
		t.Fatalf("server clock: two minutes on, the token is not expired: %d, %v", len(found), err)
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

// TestServerClockReclaim reclaims a token that expired a minute ago from
// an instance whose clock runs an hour behind. On the server's clock the
// read finds it and the reclaim's transition (TokenExpiredBy) applies, on
// the same clock; on the callers' clocks neither does, until the caller's
// clock has passed the expiry.
func TestServerClockReclaim(t *testing.T) {
	t.Parallel()
	behind := clockwork.NewFakeClockAt(time.Now().Add(-time.Hour))
	s, _, _ := openWith(t, "", mongo.Options{Clock: behind})
	ctx := t.Context()
	now := time.Now()
	e := &model.Event{ID: "e1", TenantID: "t1", ScheduleID: "s1", FireID: "f1", FireTime: now, LaunchAt: now,
		PolicyID: "p1", Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/"}, MaxAttempts: 3,
		Status: model.EventDelivering, TokenExpiresAt: ptrTime(now.Add(-time.Minute)), CreatedAt: now, UpdatedAt: now}
	if _, err := s.EventInsertMany(ctx, []*model.Event{e}); err != nil {
		t.Fatal(err)
	}
	found, err := s.EventFindTokenExpired(ctx, "p1", behind.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]int{true: 1, false: 0}[s.ServerClock()]; len(found) != want {
		t.Fatalf("EventFindTokenExpired on a clock an hour behind (server clock %v): %d events, want %d", s.ServerClock(), len(found), want)
	}
	results, err := s.EventTransition(ctx, []store.EventTransition{store.ReclaimToken(e, 3, behind.Now())})
	if err != nil {
		t.Fatal(err)
	}
	if s.ServerClock() {
		if results[0] != nil {
			t.Fatalf("server clock: the reclaim of a token its read found expired: %v", results[0])
		}
		got, err := s.EventGetByID(ctx, "e1")
		if err != nil || got.Status != model.EventRetrying || got.TokenExpiresAt != nil {
			t.Fatalf("after the reclaim: %+v, %v; want retrying without a token", got, err)
		}
		return
	}
	if !errors.Is(results[0], model.ErrConflict) {
		t.Fatalf("client clock: the reclaim of a token not expired by the caller's clock: %v, want ErrConflict", results[0])
	}
	// A caller whose clock is right reclaims it.
	results, err = s.EventTransition(ctx, []store.EventTransition{store.ReclaimToken(e, 3, time.Now())})
	if err != nil || results[0] != nil {
		t.Fatalf("client clock: the reclaim by the right time: %v, %v", results, err)
	}
	t.Skipf("the reclaim on the server's clock needs a real MongoDB: set %s (FerretDB v1 judges by the callers' clocks, checked)", mongotest.EnvURI)
}

// TestServerClockTokenPlan explains the reclaim's read on the server's
// clock: the $expr leaves the (policyId, status, tokenExpiresAt, _id) index
// in use, with no collection scan and no sort in memory.
func TestServerClockTokenPlan(t *testing.T) {
	if !mongotest.IsRealMongo() {
		t.Skipf("set %s to a real MongoDB: FerretDB v1 has no $expr and does not plan queries with indexes", mongotest.EnvURI)
	}
	t.Parallel()
	db := openRaw(t)
	expired := bson.D{{Key: "$lt", Value: bson.A{"$tokenExpiresAt", bson.D{{Key: "$add", Value: bson.A{
		bson.D{{Key: "$multiply", Value: bson.A{bson.D{{Key: "$toLong", Value: "$$NOW"}}, int64(time.Millisecond)}}}, int64(0)}}}}}}
	cmd := bson.D{{Key: "find", Value: "events"},
		{Key: "filter", Value: bson.D{{Key: "policyId", Value: "p"}, {Key: "tokenExpiresAt", Value: bson.D{{Key: "$exists", Value: true}}},
			{Key: "$expr", Value: expired}, {Key: "status", Value: "delivering"}}},
		{Key: "sort", Value: bson.D{{Key: "tokenExpiresAt", Value: 1}, {Key: "_id", Value: 1}}}, {Key: "limit", Value: 500}}
	var res bson.Raw
	if err := db.RunCommand(t.Context(), bson.D{{Key: "explain", Value: cmd}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&res); err != nil {
		t.Fatal(err)
	}
	plan := res.Lookup("queryPlanner", "winningPlan").String()
	for _, stage := range []string{`"COLLSCAN"`, `"SORT"`} {
		if strings.Contains(plan, stage) {
			t.Errorf("the plan has %s: %s", stage, plan)
		}
	}
}
