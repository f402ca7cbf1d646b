package embedded

// Driver benchmarks; they only run with -bench. Figures and the command
// lines are in docs/benchmarks.md (Stores):
//
//	go test -run='^$' -bench='Driver' ./store/embedded
//
// Each one-shot workload takes longer than the default -benchtime, so b.Loop
// runs it once.

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

const (
	benchEvents = 100_000
	benchBatch  = 1_000
)

// benchEvent returns event i of the workload. Like the emitter, a batch of
// 1,000 consecutive events is the n events of one fire of one schedule, so
// ids and launch times are clustered; shards spread them over 8 queues.
func benchEvent(i int) *model.Event {
	f := i / benchBatch
	scheduleID := fmt.Sprintf("sched-%04d", f%997)
	fire := base().Add(time.Duration(f) * time.Minute)
	fireID := model.FireID(scheduleID, 1, fire)
	return &model.Event{
		ID: model.EventID(fireID, i%benchBatch), TenantID: fmt.Sprintf("tenant-%02d", f%50),
		ScheduleID: scheduleID, FireID: fireID, FireTime: fire,
		Index: i % benchBatch, Count: benchBatch, LaunchAt: fire.Add(time.Duration(i%benchBatch) * 10 * time.Millisecond),
		Target:      model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hooks/nightly"},
		Payload:     json.RawMessage(`{"job":"nightly-report","region":"eu-central-1","batch":42}`),
		MaxAttempts: 5, Shard: i % 8, Status: model.EventPending, CreatedAt: base(), UpdatedAt: base(),
	}
}

func base() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }

func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func insertWorkload(b *testing.B, s *Store) {
	b.Helper()
	batch := make([]*model.Event, 0, benchBatch)
	for i := range benchEvents {
		batch = append(batch, benchEvent(i))
		if len(batch) == benchBatch {
			n, err := s.EventInsertMany(b.Context(), batch)
			if err != nil || n != len(batch) {
				b.Fatalf("EventInsertMany: %d, %v", n, err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkDriverEventInsert inserts 100,000 events (with all their index
// keys) in batches of 1,000, each batch one durable commit.
func BenchmarkDriverEventInsert(b *testing.B) {
	var elapsed time.Duration
	runs := 0
	for b.Loop() {
		b.StopTimer()
		s := openBench(b)
		b.StartTimer()
		start := time.Now()
		insertWorkload(b, s)
		elapsed += time.Since(start)
		runs++
	}
	b.ReportMetric(float64(benchEvents*runs)/elapsed.Seconds(), "events/s")
}

// BenchmarkDriverClaimComplete claims 100,000 due events shard by shard,
// 1,000 per EventClaimDue, and completes each batch with one EventTransition
// call (scheduled -> released), as a handler does.
func BenchmarkDriverClaimComplete(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("shards-in-parallel=%d", workers), func(b *testing.B) {
			var elapsed time.Duration
			runs := 0
			for b.Loop() {
				b.StopTimer()
				s := openBench(b)
				insertWorkload(b, s)
				b.StartTimer()
				start := time.Now()
				claimCompleteAll(b, s, workers)
				elapsed += time.Since(start)
				runs++
			}
			b.ReportMetric(float64(benchEvents*runs)/elapsed.Seconds(), "events/s")
		})
	}
}

// claimCompleteAll drains the 8 shards with workers goroutines, each owning
// whole shards like handler instances do.
func claimCompleteAll(b *testing.B, s *Store, workers int) {
	b.Helper()
	ctx := b.Context()
	due := base().Add(1000 * time.Hour)
	var done sync.WaitGroup
	var mu sync.Mutex
	total := 0
	shards := make(chan int, 8)
	for shard := range 8 {
		shards <- shard
	}
	close(shards)
	for range workers {
		done.Go(func() {
			for shard := range shards {
				for {
					claimed, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: shard, Fence: 1, DueBefore: due, Limit: benchBatch})
					if err != nil {
						b.Error(err)
						return
					}
					if len(claimed) == 0 {
						break
					}
					ts := make([]store.EventTransition, len(claimed))
					for i, e := range claimed {
						finished := e.LaunchAt.Add(time.Second)
						ts[i] = store.EventTransition{ID: e.ID, From: model.EventScheduled, Fence: 1, To: model.EventReleased,
							Attempts: 1, DeliveredAt: &finished, FinishedAt: &finished, At: finished}
					}
					res, err := s.EventTransition(ctx, ts)
					if err != nil {
						b.Error(err)
						return
					}
					for _, r := range res {
						if r != nil {
							b.Error(r)
							return
						}
					}
					mu.Lock()
					total += len(claimed)
					mu.Unlock()
				}
			}
		})
	}
	done.Wait()
	if total != benchEvents {
		b.Fatalf("completed %d events, want %d", total, benchEvents)
	}
}

// The children fixture: 1,000,000 children over 4 partitions, 10 timezones
// and every minute of the day as an H-class key, so one eligible key holds
// about 17 children. b.Loop runs the benchmark function once, so the
// fixture is built once per run and its time is not measured.
const (
	childCount      = 1_000_000
	childPartitions = 4
)

var childTimezones = []string{"America/Chicago", "America/Los_Angeles", "America/New_York", "Asia/Kolkata",
	"Asia/Tokyo", "Australia/Sydney", "Europe/Berlin", "Europe/London", "Europe/Paris", "UTC"}

// buildChildren bulk-loads the children fixture into a new store in dir.
// It writes 100,000 children per transaction straight into the buckets
// (ScheduleCreate would commit once per schedule) and fills the slots in key
// order, which keeps bbolt's pages dense.
func buildChildren(b *testing.B, dir string) {
	b.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	start := time.Now()
	const perTx = 100_000
	slots := childPartitions * len(childTimezones) * 24 * 60
	perSlot := (childCount + slots - 1) / slots
	batch := make([]model.Child, 0, perTx)
	flush := func() {
		if err := s.db.Update(func(tx *bolt.Tx) error { return putChildren(tx, batch, nil) }); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	n := 0
	for p := 0; p < childPartitions; p++ {
		for _, tz := range childTimezones {
			for h := range 24 {
				for m := range 60 {
					for i := 0; i < perSlot && n < childCount; i++ {
						batch = append(batch, model.Child{ScheduleID: fmt.Sprintf("sched-%07d", n), TenantID: fmt.Sprintf("tenant-%03d", n%500),
							ScheduleVersion: 1, Partition: p, Timezone: tz, LaunchExpression: fmt.Sprintf("H:%d", h), Minute: m})
						n++
						if len(batch) == perTx {
							flush()
						}
					}
				}
			}
		}
	}
	if len(batch) > 0 {
		flush()
	}
	b.Logf("built %d children in %s", n, time.Since(start).Round(time.Millisecond))
}

// BenchmarkDriverChildrenFind finds the children of one eligible key among
// 1,000,000 children.
func BenchmarkDriverChildrenFind(b *testing.B) {
	dir := b.TempDir()
	buildChildren(b, dir)
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := b.Context()
	found := 0
	i := 0
	for b.Loop() {
		i++
		got, err := s.ChildrenFind(ctx, &store.ChildrenFindParams{
			Partition: i % childPartitions, Timezone: childTimezones[i%len(childTimezones)],
			Keys: []model.ChildKey{{LaunchExpression: fmt.Sprintf("H:%d", i%24), Minute: i % 60}},
		})
		if err != nil {
			b.Fatal(err)
		}
		found += len(got)
	}
	b.ReportMetric(float64(found)/float64(i), "children/op")
}
