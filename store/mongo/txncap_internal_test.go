package mongo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// capFires makes fires f0..f(n-1) of count events each, whose payloads
// are payload bytes long.
func capFires(n, count, payload int) []store.FireNew {
	now := time.Unix(1_800_000_000, 0)
	body, _ := json.Marshal(strings.Repeat("x", payload))
	fs := make([]store.FireNew, n)
	for i := range fs {
		f := &model.Fire{ID: fmt.Sprintf("f%d", i), ScheduleID: fmt.Sprintf("s%d", i), TenantID: "t1", FireTime: now,
			Count: count, Decision: model.FireEmitted, CreatedAt: now}
		fs[i].Fire = f
		for k := range count {
			fs[i].Events = append(fs[i].Events, &model.Event{ID: fmt.Sprintf("%s-e%d", f.ID, k), TenantID: "t1",
				ScheduleID: f.ScheduleID, FireID: f.ID, FireTime: now, LaunchAt: now, Index: k, Count: count,
				Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/"}, MaxAttempts: 3,
				Payload: body, Status: model.EventPending, CreatedAt: now, UpdatedAt: now})
		}
	}
	return fs
}

// shape is, per fire, its Remaining and the events kept in the
// transaction and left for after it.
func shape(sp txnSplit) string {
	var parts []string
	for i, fn := range sp.in {
		parts = append(parts, fmt.Sprintf("%s:r%d/in%d/after%d", fn.Fire.ID, fn.Fire.Remaining, len(fn.Events), len(sp.rest[i])))
	}
	return strings.Join(parts, " ")
}

func TestSplitForTxn(t *testing.T) {
	t.Parallel()
	size := eventSize(capFires(1, 1, 100)[0].Events[0])
	for _, tc := range []struct {
		name        string
		fs          []store.FireNew
		docs, bytes int
		want        string
	}{
		{"AllFit", capFires(2, 3, 100), 100, 1 << 20, "f0:r0/in3/after0 f1:r0/in3/after0"},
		// 3 fire documents, then 4 events: f0's 3 and f1's first.
		{"DocsCutInsideAFire", capFires(3, 3, 100), 7, 1 << 20, "f0:r0/in3/after0 f1:r2/in1/after2 f2:r3/in0/after3"},
		{"BytesCutInsideAFire", capFires(2, 3, 100), 100, 4*size + size/2, "f0:r0/in3/after0 f1:r2/in1/after2"},
		{"NothingFitsButFires", capFires(2, 2, 100), 2, 1 << 20, "f0:r2/in0/after2 f1:r2/in0/after2"},
		{"OneEventOverTheBytes", capFires(1, 2, 100), 100, size - 1, "f0:r2/in0/after2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := splitForTxn(tc.fs, tc.docs, tc.bytes)
			if got := shape(sp); got != tc.want {
				t.Fatalf("split %s, want %s", got, tc.want)
			}
			for i, fn := range sp.in {
				if fn.Fire.Remaining != 0 && tc.fs[i].Fire.Remaining != 0 {
					t.Fatalf("the caller's fire %s was changed", fn.Fire.ID)
				}
				for k, e := range append(append([]*model.Event(nil), fn.Events...), sp.rest[i]...) {
					if e.Index != k {
						t.Fatalf("fire %s: event %d has index %d: the split reorders events", fn.Fire.ID, k, e.Index)
					}
				}
			}
		})
	}
	t.Run("NotSplittableKeepsItsEvents", func(t *testing.T) {
		fs := capFires(1, 3, 10)
		fs[0].Events[0], fs[0].Events[1] = fs[0].Events[1], fs[0].Events[0]
		if got := shape(splitForTxn(fs, 2, 1<<20)); got != "f0:r0/in3/after0" {
			t.Fatalf("split %s, want the fire whole", got)
		}
	})
}

// TestWriteRest writes fires as a capped transaction would (the fires with
// the events that fit, then the rest after the commit) on a server without
// transactions: every event of the inserted fires exists once, every
// fire's Remaining is back to 0, a fire that existed gets no events, and
// writing the rest again (the emitter completing a fire at the same time)
// changes nothing.
func TestWriteRest(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := open(ctx, mongotest.URI(t), Options{OperationTimeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	fs := capFires(3, 1500, 10)
	// Fire f2 exists already, without events (those are its writer's to
	// ensure): the create writes none of its events.
	if _, _, err := s.FireInsertMany(ctx, []store.FireNew{{Fire: fs[2].Fire}}); err != nil {
		t.Fatal(err)
	}
	// 3 fires and 1,597 events in the transaction, more than a chunk
	// (txnMaxDocs) of f1's after it.
	sp := splitForTxn(fs, 1600, txnMaxBytes)
	if got, want := shape(sp), "f0:r0/in1500/after0 f1:r1403/in97/after1403 f2:r1500/in0/after1500"; got != want {
		t.Fatalf("split %s, want %s", got, want)
	}
	inserted, n, err := s.FireInsertMany(ctx, sp.in)
	if err != nil {
		t.Fatal(err)
	}
	if inserted[2] {
		t.Fatal("fire f2 existed and was inserted again")
	}
	m, err := s.writeRest(ctx, sp, inserted)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1500*2 - n; m != want {
		t.Fatalf("writeRest stored %d events, want %d (the transaction stored %d)", m, want, n)
	}
	check := func(what string) {
		t.Helper()
		for i, fn := range fs {
			cnt, err := s.events.CountDocuments(ctx, bson.D{{Key: "fireId", Value: fn.Fire.ID}})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int64{true: 1500, false: 0}[inserted[i]]; cnt != want {
				t.Fatalf("%s: fire %s (inserted %v) has %d events, want %d", what, fn.Fire.ID, inserted[i], cnt, want)
			}
			var d fireDoc
			if err := s.fires.FindOne(ctx, bson.D{{Key: "_id", Value: fn.Fire.ID}}).Decode(&d); err != nil {
				t.Fatal(err)
			}
			if d.model().Remaining != 0 {
				t.Fatalf("%s: fire %s has Remaining %d, want 0", what, fn.Fire.ID, d.model().Remaining)
			}
		}
	}
	check("after the rest")
	if m, err := s.writeRest(ctx, sp, inserted); err != nil || m != 0 {
		t.Fatalf("writeRest again: %d events, %v; want 0", m, err)
	}
	check("after writing the rest again")
}

// TestLargeCreate creates a one-off schedule with two fires of 1,500
// events each (3,000 events, three times what a transaction takes), then a
// batch of two such items: every event is stored once, every fire's
// Remaining is 0, and on a replica set the transactions' inserts carry at
// most txnMaxDocs documents (the rest written after the commit).
func TestLargeCreate(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inTxn := 0 // documents inserted inside transactions
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName != "insert" {
			return
		}
		if v, err := e.Command.LookupErr("autocommit"); err != nil || v.Boolean() {
			return
		}
		docs, _ := e.Command.Lookup("documents").Array().Values()
		mu.Lock()
		inTxn += len(docs)
		mu.Unlock()
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	s, err := open(ctx, mongotest.URI(t), Options{OperationTimeout: 5 * time.Minute}, mon)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	sched := func(id string) *model.Schedule {
		return &model.Schedule{ID: id, TenantID: "t1", Name: id, Cron: "0 3 * * *", Timezone: "UTC", EventCount: 1500,
			Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/"}, MaxAttempts: 3,
			State: model.ScheduleActive, Version: 1}
	}
	check := func(what string, fs []store.FireNew) {
		t.Helper()
		for _, fn := range fs {
			n, err := s.events.CountDocuments(ctx, bson.D{{Key: "fireId", Value: fn.Fire.ID}})
			if err != nil {
				t.Fatal(err)
			}
			f, err := s.FireGet(ctx, "t1", fn.Fire.ID)
			if err != nil {
				t.Fatal(err)
			}
			if n != 1500 || f.Remaining != 0 {
				t.Fatalf("%s: fire %s has %d events and Remaining %d, want 1500 and 0", what, fn.Fire.ID, n, f.Remaining)
			}
		}
	}
	rename := func(fs []store.FireNew, prefix string) []store.FireNew {
		for _, fn := range fs {
			fn.Fire.ID = prefix + fn.Fire.ID
			fn.Fire.ScheduleID = prefix
			for _, e := range fn.Events {
				e.ID, e.FireID, e.ScheduleID = prefix+e.ID, fn.Fire.ID, prefix
			}
		}
		return fs
	}
	fs := rename(capFires(2, 1500, 100), "one")
	if err := storetest.CreateSchedule(ctx, s, sched("one"), nil, fs...); err != nil {
		t.Fatalf("create one: %v", err)
	}
	check("one-off", fs)
	a, b := rename(capFires(1, 1500, 100), "a"), rename(capFires(1, 1500, 100), "b")
	res, err := s.ScheduleCreateMany(ctx, []store.ScheduleNew{{Schedule: sched("a"), Fires: a}, {Schedule: sched("b"), Fires: b}})
	if err != nil || res[0] != nil || res[1] != nil {
		t.Fatalf("ScheduleCreateMany: %v, %v", res, err)
	}
	check("batch", append(a, b...))
	if !s.Transactions() {
		t.Skipf("the capped transaction needs a replica set: set %s (all events written without one, checked)", mongotest.EnvURI)
	}
	mu.Lock()
	defer mu.Unlock()
	// Two creates, each at most txnMaxDocs documents in its transaction.
	if inTxn > 2*txnMaxDocs {
		t.Fatalf("the transactions inserted %d documents, more than %d per create", inTxn, txnMaxDocs)
	}
}
