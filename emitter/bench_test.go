package emitter_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// Benchmarks on the embedded store. They only run with -bench; see
// docs/benchmarks.md (Emitter) for the command and the figures.
//
// The data: benchDue schedules fire at minute 1 of every hour ("1 * * * *"
// in UTC, Europe/Berlin, America/New_York and Asia/Tokyo, all whole-hour
// offsets, so they are due at UTC :01); every other active schedule fires at
// other minutes (daily, hourly, weekly and monthly at minutes 2-59), so it is
// never due in a :01 window. Each iteration scans a fresh :01 window (the
// next hour), so every iteration emits 10,000 new fires.
//
// Loading: the embedded driver has no bulk path, so schedules are written
// with ScheduleCreate (one bbolt transaction and fsync each). To fit in a few
// minutes the data is loaded in a directory on tmpfs (/dev/shm, where fsync
// costs nothing) and the finished file is copied to a directory on disk,
// where the measured passes run. SCHEDULERD_BENCH_ACTIVE overrides the
// largest number of active schedules (default 1,000,000);
// SCHEDULERD_BENCH_CALENDARS=P makes P% of the schedules (due or not) name
// an exclusion calendar that excludes weekends in Europe/Berlin, which the
// measured windows (Mondays) are not: the passes read and apply it and
// still emit every due fire. SCHEDULERD_BENCH_INTERVALS=P makes P% of the
// schedules (due or not; i/7 picks them, so that calendars and intervals
// overlap only in part) interval schedules: the due ones every hour from
// :01, found through the index of next fires, the others with their next
// fire after the measured windows.

const benchDue = 10000

var benchTZ = []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"}

// benchSchedule is the i-th benchmark schedule: due at :01 if i < benchDue.
func benchSchedule(i int) *model.Schedule {
	id := fmt.Sprintf("s%07d", i)
	r := rand.New(rand.NewPCG(uint64(i), 7))
	tz := benchTZ[i%len(benchTZ)]
	expr := "1 * * * *"
	if i >= benchDue {
		m, h := 2+r.IntN(58), r.IntN(24)
		switch k := r.IntN(20); {
		case k < 10:
			expr = fmt.Sprintf("%d %d * * *", m, h)
		case k < 14:
			expr = fmt.Sprintf("%d * * * *", m)
		case k < 17:
			expr = fmt.Sprintf("%d %d * * %d", m, h, r.IntN(7))
		default:
			expr = fmt.Sprintf("%d %d %d * *", m, h, 1+r.IntN(28))
		}
	}
	s := &model.Schedule{
		ID: id, TenantID: tenant, Name: id, Cron: expr, Timezone: tz, EventCount: 1,
		Target:      model.Target{Type: model.TargetHTTP, URL: "http://consumer.internal/hook"},
		Payload:     []byte(`{"backup":"` + id + `"}`),
		MaxAttempts: 3, Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow,
		State: model.ScheduleActive, Partition: model.PartitionOf(id, 16), Version: 1,
	}
	if p := benchCalendarPercent(); p > 0 && i%(100/p) == 0 {
		s.ExcludeCalendars = []string{benchCalendar.ID}
	}
	if p := benchIntervalPercent(); p > 0 && (i/7)%(100/p) == 0 {
		// Every hour from :01 (due), or daily from a minute 2-59 of a day
		// after the measured windows: where the index of a running
		// service has moved an interval schedule not due now.
		first := utc("2025-06-02T00:01:00Z")
		s.Cron, s.Interval = "", time.Hour
		if i >= benchDue {
			first = utc("2025-06-03T00:00:00Z").Add(time.Duration(r.IntN(24))*time.Hour + time.Duration(2+r.IntN(58))*time.Minute)
			s.Interval = 24 * time.Hour
		}
		s.StartAt = &first
	}
	return s
}

// benchIntervalPercent is SCHEDULERD_BENCH_INTERVALS=P: P% of the
// schedules, due or not, fire on an interval.
func benchIntervalPercent() int {
	if v, err := strconv.Atoi(os.Getenv("SCHEDULERD_BENCH_INTERVALS")); err == nil && v > 0 && v <= 100 {
		return v
	}
	return 0
}

// benchCalendar is the calendar that SCHEDULERD_BENCH_CALENDARS names.
var benchCalendar = model.Calendar{ID: "cal_bench", TenantID: tenant, Name: "weekends", Timezone: "Europe/Berlin",
	Weekly: []model.WeeklyRule{{Days: []string{"sat", "sun"}}}, Version: 1}

func benchCalendarPercent() int {
	if v, err := strconv.Atoi(os.Getenv("SCHEDULERD_BENCH_CALENDARS")); err == nil && v > 0 && v <= 100 {
		return v
	}
	return 0
}

func benchActive() int {
	if v, err := strconv.Atoi(os.Getenv("SCHEDULERD_BENCH_ACTIVE")); err == nil && v >= 100000 {
		return v
	}
	return 1000000
}

func benchSizes() []int {
	if a := benchActive(); a > 100000 {
		return []int{100000, a}
	}
	return []int{100000}
}

// benchWorkers lists Config.Workers values to compare
// (SCHEDULERD_BENCH_WORKERS="4,32"); by default only the default.
func benchWorkers() []int {
	var out []int
	for _, f := range strings.Split(os.Getenv("SCHEDULERD_BENCH_WORKERS"), ",") {
		if v, err := strconv.Atoi(f); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return []int{0}
	}
	return out
}

// benchStores loads, once per process, snapshots of stores holding the due
// schedules among 100,000 and among benchActive() active schedules.
var benchStores struct {
	once  sync.Once
	dir   string
	snaps map[int]string // active count -> directory with the snapshot
	err   error
}

func loadBenchStores(b *testing.B) map[int]string {
	b.Helper()
	benchStores.once.Do(func() {
		base := "/dev/shm"
		if _, err := os.Stat(base); err != nil {
			base = ""
		}
		dir, err := os.MkdirTemp(base, "schedulerd-emitter-bench-")
		if err != nil {
			benchStores.err = err
			return
		}
		benchStores.dir = dir
		benchStores.snaps = map[int]string{}
		work := filepath.Join(dir, "work")
		st, err := embedded.Open(work, embedded.Options{})
		if err != nil {
			benchStores.err = err
			return
		}
		defer st.Close()
		ctx := context.Background()
		if benchCalendarPercent() > 0 {
			if err := st.CalendarCreate(ctx, &benchCalendar); err != nil {
				benchStores.err = err
				return
			}
		}
		sizes := benchSizes()
		loaded := 0
		began := time.Now()
		for _, size := range sizes {
			// Concurrent creates share the store's group commits.
			var next atomic.Int64
			next.Store(int64(loaded))
			var wg sync.WaitGroup
			var errOnce sync.Once
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1) - 1)
						if i >= size {
							return
						}
						s := benchSchedule(i)
						if err := storetest.CreateSchedule(ctx, st, s, childrenOf(b, s)); err != nil {
							errOnce.Do(func() { benchStores.err = err })
							return
						}
						if i%100000 == 0 && i > 0 {
							fmt.Fprintf(os.Stderr, "loaded %d schedules in %s\n", i, time.Since(began).Round(time.Second))
						}
					}
				}()
			}
			wg.Wait()
			if benchStores.err != nil {
				return
			}
			loaded = size
			snap := filepath.Join(dir, strconv.Itoa(size))
			if err := st.Close(); err != nil {
				benchStores.err = err
				return
			}
			if err := copyDir(work, snap); err != nil {
				benchStores.err = err
				return
			}
			benchStores.snaps[size] = snap
			if st, err = embedded.Open(work, embedded.Options{}); err != nil {
				benchStores.err = err
				return
			}
		}
		fmt.Fprintf(os.Stderr, "loaded %d schedules + children in %s (ScheduleCreate, tmpfs)\n", loaded, time.Since(began).Round(time.Second))
	})
	if benchStores.err != nil {
		b.Fatalf("load benchmark stores: %v", benchStores.err)
	}
	return benchStores.snaps
}

func copyDir(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		in, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		out, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			in.Close()
			return err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchStores.dir != "" {
		_ = os.RemoveAll(benchStores.dir)
	}
	os.Exit(code)
}

// BenchmarkScanMinute scans and emits one window in which the 10,000 due
// schedules fire, among 100,000 and among 1,000,000 active schedules
// (invariant 4 as a figure: compare scan-ms/op of the two).
func BenchmarkScanMinute(b *testing.B) {
	snaps := loadBenchStores(b)
	for _, active := range benchSizes() {
		for _, workers := range benchWorkers() {
			name := "active=" + strconv.Itoa(active)
			if workers > 0 {
				name += "/workers=" + strconv.Itoa(workers)
			}
			b.Run(name, func(b *testing.B) { benchScan(b, snaps[active], workers) })
		}
	}
}

// BenchmarkScanOnly is invariant 4 as a figure without the writes: the same
// passes as BenchmarkScanMinute, on a store whose fire, event and watermark
// writes do nothing, so that ns/op is the scan (eligible keys,
// ChildrenFind, ScheduleGetMany) plus making the fires' events in memory.
func BenchmarkScanOnly(b *testing.B) {
	snaps := loadBenchStores(b)
	for _, active := range benchSizes() {
		b.Run("active="+strconv.Itoa(active), func(b *testing.B) { benchScanWith(b, snaps[active], 0, true) })
	}
}

func benchScan(b *testing.B, snap string, workers int) { benchScanWith(b, snap, workers, false) }

// readOnlyStore drops the emitter's writes.
type readOnlyStore struct{ emitter.Store }

func (readOnlyStore) FireLatestBefore(context.Context, string, time.Time) (*model.Fire, error) {
	return nil, model.ErrNotFound
}
func (readOnlyStore) FireInsert(context.Context, *model.Fire) (bool, error) { return true, nil }
func (readOnlyStore) FireInsertMany(_ context.Context, fs []store.FireNew) ([]bool, int, error) {
	inserted, n := make([]bool, len(fs)), 0
	for i, f := range fs {
		inserted[i], n = true, n+len(f.Events)
	}
	return inserted, n, nil
}
func (readOnlyStore) EventInsertMany(_ context.Context, evs []*model.Event) (int, error) {
	return len(evs), nil
}
func (readOnlyStore) WatermarkAdvance(context.Context, model.Watermark) error { return nil }
func (readOnlyStore) ScheduleIntervalAdvance(context.Context, *store.ScheduleIntervalAdvanceParams) error {
	return nil
}

func benchScanWith(b *testing.B, snap string, workers int, readOnly bool) {
	{
		{
			dir := b.TempDir() // on disk
			if err := copyDir(snap, dir); err != nil {
				b.Fatal(err)
			}
			st, err := embedded.Open(dir, embedded.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			clk := newClock(utc("2025-06-01T00:00:00Z")) // setClock moves it by a Duration: not from the zero time
			var est emitter.Store = st
			if readOnly {
				est = readOnlyStore{st}
			}
			e, err := emitter.New(emitter.Config{Owner: "bench", Workers: workers}, emitter.Deps{Store: est, Clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			cfg := e.Config()
			var scan, total time.Duration
			read := 0
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				// A fresh :01 window each iteration: the next hour.
				w0 := utc("2025-06-02T00:01:00Z").Add(time.Duration(i) * time.Hour)
				for p := range cfg.Partitions {
					if err := st.WatermarkAdvance(ctx, model.Watermark{Partition: p, Until: w0}); err != nil {
						b.Fatal(err)
					}
				}
				setClock(clk, w0.Add(time.Second-cfg.Lead)) // the pass covers exactly [w0, w0+1m)
				runtime.GC()
				b.StartTimer()
				ps, err := e.RunPass(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if ps.Fires != benchDue || ps.Windows != cfg.Partitions {
					b.Fatalf("pass: %+v", ps)
				}
				scan += ps.ScanTime
				total += ps.Duration
				read += ps.ChildrenRead
			}
			b.ReportMetric(float64(scan.Microseconds())/1000/float64(b.N), "scan-ms/op")
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "pass-ms/op")
			b.ReportMetric(float64(read)/float64(b.N), "children-read/op")
			b.ReportMetric(float64(benchDue)/(float64(read)/float64(b.N)), "due/read")
			b.ReportMetric(float64(benchDue), "fires/op")
		}
	}
}

// BenchmarkFanOut emits one fire of n = 1,000,000 events (Trigger) into an
// empty embedded store on disk and reports events/s and the peak Go heap.
func BenchmarkFanOut(b *testing.B) {
	n := 1000000
	if v, err := strconv.Atoi(os.Getenv("SCHEDULERD_BENCH_FANOUT")); err == nil && v > 0 {
		n = v
	}
	st, err := embedded.Open(b.TempDir(), embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	clk := newClock(utc("2025-06-02T10:00:00Z"))
	e, err := emitter.New(emitter.Config{Owner: "bench"}, emitter.Deps{Store: st, Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	s := benchSchedule(0)
	s.EventCount, s.Window, s.Spread = n, 2*time.Hour, true
	ctx := context.Background()

	var peak uint64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
			}
		}
	}()
	b.ResetTimer()
	began := time.Now()
	for i := range b.N {
		f, err := e.Trigger(ctx, s, clk.Now().Add(time.Duration(i)*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		if f.Count != n {
			b.Fatalf("fire count %d", f.Count)
		}
	}
	elapsed := time.Since(began)
	b.StopTimer()
	close(stop)
	<-done
	b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(base)/(1<<20), "base-heap-MB")
}

// BenchmarkPlanCreates plans the fire and event of a new one-off of one
// event, as a create does for each of its items (the write and done are
// not part of it).
func BenchmarkPlanCreates(b *testing.B) {
	now := utc("2025-06-02T10:00:30Z")
	e := newEmitter(b, openEmbedded(b), newClock(now), nil)
	ctx := context.Background()
	ss := []*model.Schedule{oneOff("o1", now.Add(90*time.Minute), 1)}
	keys := [][]cron.Key{nil}
	b.ReportAllocs()
	for b.Loop() {
		fs, done, err := e.PlanCreates(ctx, ss, keys)
		if err != nil || done == nil || len(fs[0]) != 1 {
			b.Fatalf("PlanCreates: %v, %v", fs, err)
		}
	}
}
