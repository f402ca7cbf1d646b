package embedded

import (
	"fmt"
	"math/rand/v2"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
)

// appender decides every put as packAppends does: runs of keys, mostly
// ascending within a tenant prefix, with keys into the middle, prefixes
// that change, and puts made without it (reset), into buckets that hold
// keys already. Seeded by SCHEDULERD_APPENDER_SEED (default 1).
func TestAppenderDecidesAsPackAppends(t *testing.T) {
	seed := testseed.Get(t, "SCHEDULERD_APPENDER_SEED", 1)
	r := rand.New(rand.NewPCG(seed, seed))
	db, err := bolt.Open(t.TempDir()+"/a.db", 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tenants := []string{"t", "t1", "u"}
	key := func(tenant string, i int) ([]byte, int) {
		return strKey(tenant, fmt.Sprintf("s%06d", i)), len(tenant) + 1
	}
	for run := range 200 {
		if err := db.Update(func(tx *bolt.Tx) error {
			// Two buckets with the same keys: one decided by packAppends on
			// every put, one by an appender.
			var bs [2]*bolt.Bucket
			for i, name := range []string{"every", "run"} {
				_ = tx.DeleteBucket([]byte(name))
				b, err := tx.CreateBucket([]byte(name))
				if err != nil {
					return err
				}
				bs[i] = b
			}
			next := map[string]int{}
			for _, tenant := range tenants {
				next[tenant] = r.IntN(50)
				for i := range next[tenant] {
					k, _ := key(tenant, i)
					for _, b := range bs {
						if err := b.Put(k, nil); err != nil {
							return err
						}
					}
				}
			}
			var a appender
			for step := range 40 {
				tenant := tenants[r.IntN(len(tenants))]
				if step > 0 && r.IntN(3) > 0 {
					tenant = tenants[0] // mostly one tenant, as a batch is
				}
				i := next[tenant]
				switch r.IntN(10) {
				case 0:
					i = r.IntN(i + 1) // into the middle (or onto a key)
				case 1:
					k, _ := key(tenant, r.IntN(i+1))
					a.reset()
					for _, b := range bs {
						if err := b.Put(k, nil); err != nil {
							return err
						}
					}
					continue
				default:
					next[tenant] = i + 1 + r.IntN(3)
				}
				k, n := key(tenant, i)
				packAppends(bs[0], k, n)
				a.pack(bs[1], k, n)
				if bs[0].FillPercent != bs[1].FillPercent {
					t.Fatalf("seed %d, run %d, step %d, key %q: appender leaves fill %v, packAppends %v", seed, run, step, k, bs[1].FillPercent, bs[0].FillPercent)
				}
				for _, b := range bs {
					if err := b.Put(k, nil); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// A batch of ascending ids committed after a later batch goes into the gap
// below that batch's rows: its pages are packed as appends' are, not left
// half empty. Random ids keep bbolt's default.
func TestBatchIntoGapIsPacked(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(1, 1))
	now := base()
	create := func(lo, hi int, ordered bool) {
		t.Helper()
		items, fires := oneOffs(t, r, "ten_a", now, lo, hi, ordered)
		for i := range items {
			items[i].Fires = fires[i : i+1]
		}
		errs, err := s.ScheduleCreateMany(t.Context(), items)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range errs {
			if e != nil {
				t.Fatalf("item %d: %v", i, e)
			}
		}
	}
	fill := func() (rows, tenant float64) {
		t.Helper()
		err := s.db.View(func(tx *bolt.Tx) error {
			f := func(name []byte) float64 {
				st := tx.Bucket(name).Stats()
				return float64(st.LeafInuse) / float64(st.LeafAlloc)
			}
			rows, tenant = f(bSchedules), f(bSchedTenant)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return rows, tenant
	}
	// Four batches, each committed after the next one's: every batch but
	// the first goes into a gap.
	const size = 1000
	for b := 3; b >= 0; b-- {
		create(b*size, (b+1)*size, true)
	}
	rows, tenant := fill()
	if rows < 0.8 || tenant < 0.8 {
		t.Fatalf("batches into gaps: pages %.0f%% (rows) and %.0f%% (tenant index) full, want at least 80%%", 100*rows, 100*tenant)
	}
	// Random ids among random ids: short runs into many gaps, at bbolt's
	// default.
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bSchedules)
		for range 500 {
			if err := b.Put([]byte(randomID(r, "sch_")), []byte{}); err != nil {
				return err
			}
		}
		b.FillPercent = bolt.DefaultFillPercent
		run := batchRun()
		for range 200 {
			id := []byte(randomID(r, "sch_"))
			run.rows.pack(b, id, 0)
			if err := b.Put(id, []byte{}); err != nil {
				return err
			}
		}
		run.finish(tx)
		if got := tx.Bucket(bSchedules).FillPercent; got != mixedFill {
			t.Errorf("random ids: fill %v, want bbolt's default (%v)", got, mixedFill)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
