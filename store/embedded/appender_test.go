package embedded

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// appender decides every put as packAppends does: runs of keys, mostly
// ascending within a tenant prefix, with keys into the middle, prefixes
// that change, and puts made without it (reset), into buckets that hold
// keys already. Seeded by SCHEDULERD_APPENDER_SEED (default 1).
func TestAppenderDecidesAsPackAppends(t *testing.T) {
	seed := uint64(1)
	if v := os.Getenv("SCHEDULERD_APPENDER_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
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
