package mongo_test

// Benchmarks of the MongoDB driver, the same shapes as the embedded engine's
// (store/embedded/engine_bench_test.go), but through the store.Driver
// methods the services call:
//
//   - EventInsertMany: 100,000 events in batches of 1,000 (events/s).
//   - EventClaimComplete: 100,000 due events over 8 queue shards; one
//     goroutine per shard claims 1,000 at a time and moves each to released
//     by compare-and-set (events/s).
//   - ChildrenFind: the children of one eligible key among 1,000,000
//     children (10 timezones x 1,440 hour/minute keys), through the
//     (partition, timezone, launchExpression, minute) index.
//
// They skip unless SCHEDULER_TEST_MONGO_URI names a real MongoDB: FerretDB v1
// scans whole collections, so its timings would say nothing about MongoDB's.
// See docs/benchmarks.md (MongoDB driver). Run with:
//
//	SCHEDULER_TEST_MONGO_URI=mongodb://127.0.0.1:27017/?directConnection=true \
//	  go test -run='^$' -bench=. -benchtime=1x ./store/mongo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
	"github.com/schedulerd/schedulerd/store/storetest"
)

const (
	benchEvents = 100_000 // events per insert and claim run
	benchBatch  = 1_000
	benchShards = 8
)

var benchBase = time.Date(2030, time.January, 2, 3, 0, 0, 0, time.UTC)

func requireRealMongo(b *testing.B) {
	b.Helper()
	if !mongotest.IsRealMongo() {
		b.Skipf("set %s to a real MongoDB to run; FerretDB timings are not MongoDB's", mongotest.EnvURI)
	}
}

// benchEvent is the embedded benchmark's event: ~1,000 events per fire,
// 997 schedules, 50 tenants, 8 shards.
func benchEvent(i int) *model.Event {
	fire := benchBase.Add(time.Duration(i/1000) * time.Minute)
	sched := fmt.Sprintf("sched-%04d", i%997)
	fireID := model.FireID(sched, 1, fire)
	return &model.Event{
		ID: model.EventID(fireID, i), TenantID: fmt.Sprintf("tenant-%02d", i%50),
		ScheduleID: sched, FireID: fireID, FireTime: fire,
		Index: i % 1000, Count: 1000, LaunchAt: fire.Add(time.Duration(i%1000) * time.Millisecond),
		Target:      model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hooks/nightly"},
		Payload:     json.RawMessage(`{"job":"nightly-report","region":"eu-central-1","batch":42}`),
		MaxAttempts: 5, Shard: i % benchShards, Status: model.EventPending,
		CreatedAt: benchBase, UpdatedAt: benchBase,
	}
}

// insertBenchEvents inserts events 0..n-1 in batches.
func insertBenchEvents(tb testing.TB, s *mongo.Store, n, batchSize int) {
	tb.Helper()
	ctx := context.Background()
	batch := make([]*model.Event, 0, batchSize)
	for i := range n {
		batch = append(batch, benchEvent(i))
		if len(batch) == batchSize || i == n-1 {
			inserted, err := s.EventInsertMany(ctx, batch)
			if err != nil {
				tb.Fatal(err)
			}
			if inserted != len(batch) {
				tb.Fatalf("inserted %d of %d", inserted, len(batch))
			}
			batch = batch[:0]
		}
	}
}

// claimCompleteAll runs one handler per shard that claims batchSize due
// events at a time and releases each by compare-and-set, until its shard is
// empty; it returns how many events were completed.
func claimCompleteAll(tb testing.TB, s *mongo.Store, batchSize int) int {
	tb.Helper()
	ctx := context.Background()
	due := benchBase.Add(24 * time.Hour)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for shard := range benchShards {
		wg.Go(func() {
			for {
				claimed, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: shard, Fence: 1, DueBefore: due, Limit: batchSize})
				if err != nil {
					tb.Error(err)
					return
				}
				if len(claimed) == 0 {
					return
				}
				ts := make([]store.EventTransition, len(claimed))
				for i, e := range claimed {
					ts[i] = store.EventTransition{ID: e.ID, From: model.EventScheduled, Fence: 1,
						To: model.EventReleased, FinishedAt: &due, At: due}
				}
				errs, err := s.EventTransition(ctx, ts)
				if err != nil {
					tb.Error(err)
					return
				}
				for _, err := range errs {
					if err != nil {
						tb.Error(err)
						return
					}
				}
				mu.Lock()
				done += len(claimed)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return done
}

var benchTimezones = []string{"Europe/Berlin", "UTC", "America/New_York", "Asia/Tokyo", "Europe/London",
	"America/Los_Angeles", "Australia/Sydney", "Asia/Kolkata", "America/Sao_Paulo", "Africa/Cairo"}

// loadChildren creates schedules with perSchedule children each: schedule i
// lives in one of 10 timezones and its children cover perSchedule of the
// 1,440 (hour, minute) keys from a schedule-dependent offset.
func loadChildren(tb testing.TB, s *mongo.Store, schedules, perSchedule int) {
	tb.Helper()
	ctx := context.Background()
	for i := range schedules {
		sc := &model.Schedule{
			ID: fmt.Sprintf("sched-%04d", i), TenantID: fmt.Sprintf("tenant-%02d", i%50), Name: "bench",
			Cron: "* * * * *", Timezone: benchTimezones[i%len(benchTimezones)], EventCount: 1,
			Target: model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/"}, MaxAttempts: 1,
			Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow, State: model.ScheduleActive,
			Version: 1, CreatedAt: benchBase, UpdatedAt: benchBase,
		}
		children := make([]model.Child, perSchedule)
		for j := range children {
			k := (i*7 + j) % 1440
			children[j] = model.Child{ScheduleID: sc.ID, TenantID: sc.TenantID, ScheduleVersion: 1,
				Timezone: sc.Timezone, LaunchExpression: fmt.Sprintf("H:%d", k/60), Minute: k % 60}
		}
		if err := storetest.CreateSchedule(ctx, s, sc, children); err != nil {
			tb.Fatal(err)
		}
	}
}

// eligibleKey is the key ChildrenFind looks up: 03:00 in Berlin.
var eligibleKey = store.ChildrenFindParams{Timezone: "Europe/Berlin", Keys: []model.ChildKey{{LaunchExpression: "H:3", Minute: 0}}}

func BenchmarkEventInsertMany(b *testing.B) {
	requireRealMongo(b)
	var elapsed time.Duration
	for range b.N {
		b.StopTimer()
		s := newStore(b)
		b.StartTimer()
		start := time.Now()
		insertBenchEvents(b, s, benchEvents, benchBatch)
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(benchEvents*b.N)/elapsed.Seconds(), "events/s")
}

func BenchmarkEventClaimComplete(b *testing.B) {
	requireRealMongo(b)
	var elapsed time.Duration
	for range b.N {
		b.StopTimer()
		s := newStore(b)
		insertBenchEvents(b, s, benchEvents, benchBatch)
		b.StartTimer()
		start := time.Now()
		if n := claimCompleteAll(b, s, benchBatch); n != benchEvents {
			b.Fatalf("completed %d of %d events", n, benchEvents)
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(benchEvents*b.N)/elapsed.Seconds(), "events/s")
}

func BenchmarkChildrenFind(b *testing.B) {
	requireRealMongo(b)
	ctx := context.Background()
	s := newStore(b)
	loadChildren(b, s, 1_000, 1_000) // 1,000,000 children
	b.ResetTimer()
	var found int
	for range b.N {
		got, err := s.ChildrenFind(ctx, &eligibleKey)
		if err != nil {
			b.Fatal(err)
		}
		found = len(got)
	}
	b.ReportMetric(float64(found), "children/op")
}

// TestBenchmarkWorkloads runs the benchmarks' workloads at a tiny scale so
// that their code is checked on every run, not only where a real MongoDB is.
func TestBenchmarkWorkloads(t *testing.T) {
	t.Parallel()

	t.Run("InsertClaimComplete", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insertBenchEvents(t, s, 24, 10)
		if n := claimCompleteAll(t, s, 2); n != 24 {
			t.Fatalf("completed %d of 24 events", n)
		}
	})

	t.Run("ChildrenFind", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		loadChildren(t, s, 20, 50)
		// Schedules 0 and 10 are in Berlin and cover the keys 0-49 and
		// 70-119: 00:30 is one of schedule 0's, 01:30 one of schedule 10's.
		got, err := s.ChildrenFind(context.Background(), &store.ChildrenFindParams{
			Timezone: "Europe/Berlin",
			Keys:     []model.ChildKey{{LaunchExpression: "H:0", Minute: 30}, {LaunchExpression: "H:1", Minute: 30}, {LaunchExpression: "H:3", Minute: 0}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ScheduleID == got[1].ScheduleID {
			t.Fatalf("ChildrenFind: got %+v, want one child each of sched-0000 and sched-0010", got)
		}
	})
}
