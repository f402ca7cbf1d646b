package embedded

// The benchmarks in this file chose the engine under the embedded driver.
// They run the driver's representative workload directly on bbolt and on
// pebble, with the same keys and values and durable (fsynced) commits:
//
//   - Insert: 100,000 events, each a JSON row plus three secondary index
//     keys (shard/status/launch, fire/status, tenant), in batches of 1,000.
//   - ClaimComplete: read 1,000 due keys from the status index, then
//     compare-and-set each row (check status, write the new row, move its
//     index keys), one durable commit per batch, until all 100,000 are done.
//
// bbolt gets the atomic read-check-write from its transaction. pebble has no
// transactions, so its compare-and-set needs a lock of our own around the
// read and the batch (held here as a mutex; across several processes it
// would not exist at all). Results and the decision are in
// BENCHMARKS-store.md. Run with:
//
//	go test -run='^$' -bench=Engine -benchtime=1x ./store/embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

const (
	engineEvents = 100_000
	engineBatch  = 1_000
)

// engine is the narrow surface the two workloads need.
type engine interface {
	insert(events []*model.Event) error
	// claimComplete moves up to n pending events to released and reports
	// how many it moved.
	claimComplete(n int) (int, error)
	close() error
}

// engineEvent returns event i of the workload. Like the emitter, a batch of
// 1,000 consecutive events is the n events of one fire of one schedule, so
// ids and launch times are clustered; shards spread them over 8 queues.
func engineEvent(i int) *model.Event {
	f := i / engineBatch
	scheduleID := fmt.Sprintf("sched-%04d", f%997)
	fire := base().Add(time.Duration(f) * time.Minute)
	fireID := model.FireID(scheduleID, 1, fire)
	return &model.Event{
		ID: model.EventID(fireID, i%engineBatch), TenantID: fmt.Sprintf("tenant-%02d", f%50),
		ScheduleID: scheduleID, FireID: fireID, FireTime: fire,
		Index: i % engineBatch, Count: engineBatch, LaunchAt: fire.Add(time.Duration(i%engineBatch) * 10 * time.Millisecond),
		Target:      model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hooks/nightly"},
		Payload:     json.RawMessage(`{"job":"nightly-report","region":"eu-central-1","batch":42}`),
		MaxAttempts: 5, Shard: i % 8, Status: model.EventPending, CreatedAt: base(), UpdatedAt: base(),
	}
}

func base() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }

// engineKeys returns the index keys of e, as the driver builds them.
func engineKeys(e *model.Event) [][]byte {
	return [][]byte{dueKey(nil, e), fireKey(e), tenantKey(e)}
}

// ---- bbolt

type boltEngine struct{ db *bolt.DB }

var engineBuckets = [][]byte{[]byte("rows"), []byte("due"), []byte("fire"), []byte("tenant")}

func openBolt(b *testing.B, dir string) engine {
	db, err := bolt.Open(dir+"/bench.db", 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		b.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range engineBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return &boltEngine{db: db}
}

func (e *boltEngine) insert(events []*model.Event) error {
	return e.db.Update(func(tx *bolt.Tx) error {
		rows := tx.Bucket(engineBuckets[0])
		for _, ev := range events {
			raw, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if err := rows.Put([]byte(ev.ID), raw); err != nil {
				return err
			}
			for i, k := range engineKeys(ev) {
				if err := tx.Bucket(engineBuckets[i+1]).Put(k, nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func (e *boltEngine) claimComplete(n int) (int, error) {
	moved := 0
	err := e.db.Update(func(tx *bolt.Tx) error {
		moved = 0
		var ids [][]byte
		for shard := 0; shard < 8 && len(ids) < n; shard++ {
			prefix := duePrefix(shard, model.EventPending)
			c := tx.Bucket(engineBuckets[1]).Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(ids) < n; k, _ = c.Next() {
				ids = append(ids, bytes.Clone(k[len(prefix)+timeLen:]))
			}
		}
		rows := tx.Bucket(engineBuckets[0])
		for _, id := range ids {
			var ev model.Event
			if err := json.Unmarshal(rows.Get(id), &ev); err != nil {
				return err
			}
			if ev.Status != model.EventPending {
				continue
			}
			for i, k := range engineKeys(&ev) {
				if err := tx.Bucket(engineBuckets[i+1]).Delete(k); err != nil {
					return err
				}
			}
			ev.Status = model.EventReleased
			raw, err := json.Marshal(&ev)
			if err != nil {
				return err
			}
			if err := rows.Put(id, raw); err != nil {
				return err
			}
			for i, k := range engineKeys(&ev) {
				if err := tx.Bucket(engineBuckets[i+1]).Put(k, nil); err != nil {
					return err
				}
			}
			moved++
		}
		return nil
	})
	return moved, err
}

func (e *boltEngine) close() error { return e.db.Close() }

// ---- pebble

type pebbleEngine struct {
	db *pebble.DB
	mu sync.Mutex // makes read-check-write atomic; pebble has no transactions
}

var pebblePrefixes = [][]byte{[]byte("r/"), []byte("d/"), []byte("f/"), []byte("t/")}

func openPebble(b *testing.B, dir string) engine {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	return &pebbleEngine{db: db}
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func pk(prefix, k []byte) []byte { return append(bytes.Clone(prefix), k...) }

func (e *pebbleEngine) insert(events []*model.Event) error {
	batch := e.db.NewBatch()
	defer batch.Close()
	for _, ev := range events {
		raw, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if err := batch.Set(pk(pebblePrefixes[0], []byte(ev.ID)), raw, nil); err != nil {
			return err
		}
		for i, k := range engineKeys(ev) {
			if err := batch.Set(pk(pebblePrefixes[i+1], k), nil, nil); err != nil {
				return err
			}
		}
	}
	return batch.Commit(pebble.Sync)
}

func (e *pebbleEngine) claimComplete(n int) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ids [][]byte
	for shard := 0; shard < 8 && len(ids) < n; shard++ {
		prefix := pk(pebblePrefixes[1], duePrefix(shard, model.EventPending))
		it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		if err != nil {
			return 0, err
		}
		for ok := it.First(); ok && len(ids) < n; ok = it.Next() {
			ids = append(ids, bytes.Clone(it.Key()[len(prefix)+timeLen:]))
		}
		if err := it.Close(); err != nil {
			return 0, err
		}
	}
	batch := e.db.NewBatch()
	defer batch.Close()
	moved := 0
	for _, id := range ids {
		raw, closer, err := e.db.Get(pk(pebblePrefixes[0], id))
		if err != nil {
			return 0, err
		}
		var ev model.Event
		err = json.Unmarshal(raw, &ev)
		_ = closer.Close()
		if err != nil {
			return 0, err
		}
		if ev.Status != model.EventPending {
			continue
		}
		for i, k := range engineKeys(&ev) {
			if err := batch.Delete(pk(pebblePrefixes[i+1], k), nil); err != nil {
				return 0, err
			}
		}
		ev.Status = model.EventReleased
		raw, err = json.Marshal(&ev)
		if err != nil {
			return 0, err
		}
		if err := batch.Set(pk(pebblePrefixes[0], id), raw, nil); err != nil {
			return 0, err
		}
		for i, k := range engineKeys(&ev) {
			if err := batch.Set(pk(pebblePrefixes[i+1], k), nil, nil); err != nil {
				return 0, err
			}
		}
		moved++
	}
	return moved, batch.Commit(pebble.Sync)
}

func (e *pebbleEngine) close() error { return e.db.Close() }

// ---- benchmarks

var engines = []struct {
	name string
	open func(b *testing.B, dir string) engine
}{{"bbolt", openBolt}, {"pebble", openPebble}}

func insertAll(b *testing.B, e engine) {
	b.Helper()
	batch := make([]*model.Event, 0, engineBatch)
	for i := range engineEvents {
		batch = append(batch, engineEvent(i))
		if len(batch) == engineBatch {
			if err := e.insert(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

func BenchmarkEngineInsert(b *testing.B) {
	for _, eng := range engines {
		b.Run(eng.name, func(b *testing.B) {
			var elapsed time.Duration
			for range b.N {
				b.StopTimer()
				e := eng.open(b, b.TempDir())
				b.StartTimer()
				start := time.Now()
				insertAll(b, e)
				elapsed += time.Since(start)
				b.StopTimer()
				if err := e.close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(engineEvents*b.N)/elapsed.Seconds(), "events/s")
		})
	}
}

func BenchmarkEngineClaimComplete(b *testing.B) {
	for _, eng := range engines {
		b.Run(eng.name, func(b *testing.B) {
			var elapsed time.Duration
			for range b.N {
				b.StopTimer()
				e := eng.open(b, b.TempDir())
				insertAll(b, e)
				b.StartTimer()
				start := time.Now()
				done := 0
				for done < engineEvents {
					n, err := e.claimComplete(engineBatch)
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						b.Fatalf("claimed nothing after %d events", done)
					}
					done += n
				}
				elapsed += time.Since(start)
				b.StopTimer()
				if err := e.close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(engineEvents*b.N)/elapsed.Seconds(), "events/s")
		})
	}
}
