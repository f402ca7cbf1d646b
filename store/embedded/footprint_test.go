package embedded

// Footprint benchmarks: bytes on disk per one-off and per event of a large
// fire, broken down by bucket. Figures are in docs/benchmarks.md (Stores), the
// breakdown in docs/design.md (Where the time goes):
//
//	go test -run='^$' -bench=Footprint -benchtime=1x -v ./store/embedded
//
// SCHEDULERD_BENCH_FOOTPRINT sets the number of one-offs and the size of
// the fire (default 100,000); SCHEDULERD_BENCH_SEED the seed of the ids.
// The one-offs are stored twice: with random ids and with ids that sort in
// creation order.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
	"github.com/schedulerd/schedulerd/store"
)

func footprintN(b *testing.B) int {
	n := 100_000
	if v := os.Getenv("SCHEDULERD_BENCH_FOOTPRINT"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("SCHEDULERD_BENCH_FOOTPRINT=%q: want a positive integer", v)
		}
	}
	return n
}

func footprintRand(b *testing.B) *rand.Rand {
	seed := testseed.Get(b, "SCHEDULERD_BENCH_SEED", 1)
	return rand.New(rand.NewPCG(seed, seed))
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// randomID mimics the master's random ids: prefix + 16 base32 characters.
func randomID(r *rand.Rand, prefix string) string {
	var sb strings.Builder
	sb.WriteString(prefix)
	for range 16 {
		sb.WriteByte(idAlphabet[r.IntN(len(idAlphabet))])
	}
	return sb.String()
}

// orderedID mimics ids that sort in creation order: prefix, the sequence n
// in 8 base32 characters of an alphabet in byte order (most significant
// first), then 8 random ones.
func orderedID(r *rand.Rand, prefix string, n uint64) string {
	const sorted = "234567abcdefghijklmnopqrstuvwxyz"
	var sb strings.Builder
	sb.WriteString(prefix)
	for i := 7; i >= 0; i-- {
		sb.WriteByte(sorted[(n>>(5*i))&31])
	}
	for range 8 {
		sb.WriteByte(idAlphabet[r.IntN(len(idAlphabet))])
	}
	return sb.String()
}

var footprintPayload = json.RawMessage(`{"job":"nightly-report","region":"eu-central-1","batch":42}`)

// BenchmarkDriverFootprintOneOffs stores n one-offs due within a day as the
// master does on save: the schedule and its child with its fire and event
// (ScheduleNew.Fires), in batches, each event with the release token the
// emitter gives it with this store (Store.ReleaseToken); with a policy,
// all of one policy, whose lane keeps each one-off's head.
func BenchmarkDriverFootprintOneOffs(b *testing.B) {
	b.Run("ids=random", func(b *testing.B) { footprintOneOffs(b, false, "") })
	b.Run("ids=ordered", func(b *testing.B) { footprintOneOffs(b, true, "") })
	b.Run("ids=ordered/policy", func(b *testing.B) { footprintOneOffs(b, true, "pol_0000000000000000") })
}

func footprintOneOffs(b *testing.B, ordered bool, policy string) {
	n := footprintN(b)
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		// Without the reserve, which adds the same to any store's file.
		s, err := Open(dir, Options{ReserveBytes: -1})
		if err != nil {
			b.Fatal(err)
		}
		r := footprintRand(b)
		tenant := randomID(r, "ten_")
		now := base()
		b.StartTimer()
		for start := 0; start < n; start += benchBatch {
			items, fires := oneOffs(b, r, tenant, now, start, min(start+benchBatch, n), ordered)
			for i := range items {
				items[i].Fires = fires[i : i+1]
				items[i].Schedule.PolicyID = policy
				for _, e := range fires[i].Events {
					e.ReleaseToken = s.ReleaseToken(e.ID) // as the emitter gives one with this store
					e.PolicyID = policy
				}
			}
			if errs, err := s.ScheduleCreateMany(b.Context(), items); err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
				b.Fatalf("ScheduleCreateMany: %v %v", errs, err)
			}
		}
		b.StopTimer()
		reportFootprint(b, s, dir, n, "job")
		b.StartTimer()
	}
}

// oneOffs returns one-offs lo..hi-1 of tenant due within a day of now, as
// the master saves them: the schedules with their children, and their fires
// with one event each (with a release token of 32 hex digits).
func oneOffs(tb testing.TB, r *rand.Rand, tenant string, now time.Time, lo, hi int, ordered bool) ([]store.ScheduleNew, []store.FireNew) {
	tb.Helper()
	items := make([]store.ScheduleNew, 0, hi-lo)
	fires := make([]store.FireNew, 0, hi-lo)
	for i := lo; i < hi; i++ {
		runAt := now.Add(time.Duration(r.Int64N(int64(24 * time.Hour)))).Truncate(time.Millisecond)
		id := randomID(r, "sch_")
		if ordered {
			id = orderedID(r, "sch_", uint64(i))
		}
		sc := &model.Schedule{
			ID: id, TenantID: tenant, Name: "report", RunAt: &runAt,
			Timezone: "UTC", EventCount: 1, Target: model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hooks/nightly"},
			Payload: footprintPayload, MaxAttempts: 5, Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow,
			State: model.ScheduleActive, Version: 1, CreatedAt: now, UpdatedAt: now,
		}
		sc.Partition = model.PartitionOf(sc.ID, 16)
		c, err := schedule.FromSchedule(sc, 100)
		if err != nil {
			tb.Fatal(err)
		}
		items = append(items, store.ScheduleNew{Schedule: sc, Children: c.Children(sc)})
		f := &model.Fire{
			ID: model.FireID(sc.ID, sc.Version, runAt), ScheduleID: sc.ID, TenantID: tenant, FireTime: runAt,
			LocalTime: runAt.Format(localLayout), Count: 1, Decision: model.FireEmitted, CreatedAt: now,
		}
		e := &model.Event{
			ID: model.EventID(f.ID, 0), TenantID: tenant, ScheduleID: sc.ID, FireID: f.ID, FireTime: runAt,
			Count: 1, LaunchAt: runAt, Target: sc.Target, Payload: sc.Payload, MaxAttempts: 5,
			Shard: r.IntN(8), Status: model.EventPending, CreatedAt: now, UpdatedAt: now,
			ReleaseToken: fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64()), // as the emitter gives one
		}
		fires = append(fires, store.FireNew{Fire: f, Events: []*model.Event{e}})
	}
	return items, fires
}

// BenchmarkDriverFootprintFire stores one fire of n events as the emitter's
// fan-out does: the fire, then its events (each with the release token the emitter gives it with this store) in
// batches of 1,000.
func BenchmarkDriverFootprintFire(b *testing.B) {
	n := footprintN(b)
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		// Without the reserve, which adds the same to any store's file.
		s, err := Open(dir, Options{ReserveBytes: -1})
		if err != nil {
			b.Fatal(err)
		}
		r := footprintRand(b)
		tenant, sched := randomID(r, "ten_"), randomID(r, "sch_")
		fireTime := base()
		deadline := fireTime.Add(time.Hour)
		f := &model.Fire{
			ID: model.FireID(sched, 1, fireTime), ScheduleID: sched, TenantID: tenant, FireTime: fireTime,
			LocalTime: fireTime.Format(time.RFC3339), Count: n, Decision: model.FireEmitted, Remaining: n, CreatedAt: fireTime,
		}
		b.StartTimer()
		if _, err := s.FireInsert(b.Context(), f); err != nil {
			b.Fatal(err)
		}
		batch := make([]*model.Event, 0, benchBatch)
		for i := range n {
			batch = append(batch, &model.Event{
				ID: model.EventID(f.ID, i), TenantID: tenant, ScheduleID: sched, FireID: f.ID, FireTime: fireTime,
				Index: i, Count: n, LaunchAt: fireTime.Add(time.Duration(i) * time.Hour / time.Duration(n)), Deadline: &deadline,
				Target:  model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hooks/nightly"},
				Payload: footprintPayload, MaxAttempts: 5, Shard: i % 8, Status: model.EventPending, CreatedAt: fireTime, UpdatedAt: fireTime,
				ReleaseToken: s.ReleaseToken(model.EventID(f.ID, i)), // as the emitter gives one with this store
			})
			if len(batch) == benchBatch || i == n-1 {
				if got, err := s.EventInsertMany(b.Context(), batch); err != nil || got != len(batch) {
					b.Fatalf("EventInsertMany: %d, %v", got, err)
				}
				batch = batch[:0]
			}
		}
		if err := s.FireSetRemaining(b.Context(), f.ID, 0); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		reportFootprint(b, s, dir, n, "event")
		b.StartTimer()
	}
}

// reportFootprint closes s, reports file bytes per unit and logs a table of
// the buckets: keys, leaf and branch pages, bytes in use, and page fill.
func reportFootprint(b *testing.B, s *Store, dir string, n int, unit string) {
	b.Helper()
	var rows []string
	var inuse, alloc int
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			st := bk.Stats()
			if st.KeyN == 0 {
				return nil
			}
			use := st.LeafInuse + st.BranchInuse
			all := st.LeafAlloc + st.BranchAlloc
			inuse, alloc = inuse+use, alloc+all
			rows = append(rows, fmt.Sprintf("%-32s %9d %7d %6d %10.1f %10.1f %5.0f%%",
				name, st.KeyN, st.LeafPageN+st.LeafOverflowN, st.BranchPageN,
				float64(use)/float64(n), float64(all)/float64(n), 100*float64(use)/float64(max(all, 1))))
			return nil
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	free := s.db.Stats().FreePageN
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, fileName))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size())/float64(n), "file-B/"+unit)
	b.ReportMetric(float64(alloc)/float64(n), "pages-B/"+unit)
	b.ReportMetric(float64(inuse)/float64(n), "inuse-B/"+unit)
	b.Logf("%d %ss: file %d bytes (%.0f per %s), %d free pages", n, unit, fi.Size(), float64(fi.Size())/float64(n), unit, free)
	b.Logf("%-32s %9s %7s %6s %10s %10s %6s", "bucket", "keys", "leaves", "branch", "inuse/"+unit, "pages/"+unit, "fill")
	for _, r := range rows {
		b.Log(r)
	}
}
