package embedded

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/store/storetest"
	bolt "go.etcd.io/bbolt"
)

// reverse finds the greatest key below a bound, and walks backward from it,
// as a search over the remaining keys does, in a write transaction that
// deleted keys first: none, a run at the tail, the head or the middle
// (leaving leaves empty), or all of them. SCHEDULERD_CURSOR_SEED sets the
// seed.
func TestReverseAfterDeletes(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Get(t, "SCHEDULERD_CURSOR_SEED", 1), 7))
	db, err := bolt.Open(filepath.Join(t.TempDir(), "db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%06d", i) }
	for round := range 200 {
		n := 1 + r.IntN(600)
		lo, hi := r.IntN(n), n
		switch r.IntN(4) {
		case 0:
			lo = 0
		case 1:
			hi = lo + r.IntN(n-lo+1)
		case 2:
			lo, hi = 0, n
		}
		name := fmt.Sprintf("round %d: %d keys, %d-%d deleted", round, n, lo, hi)
		storetest.Within(t, 10e9, name, func() {
			err := db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("b"))
				if err != nil {
					return err
				}
				for i := range n {
					if err := b.Put(key(i), make([]byte, 100)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("b"))
				var left [][]byte
				for i := range n {
					if i >= lo && i < hi {
						if err := b.Delete(key(i)); err != nil {
							return err
						}
					} else {
						left = append(left, key(i))
					}
				}
				for _, upper := range [][]byte{nil, key(r.IntN(n + 1)), key(lo), key(hi), []byte("a"), []byte("z")} {
					var want [][]byte
					for _, k := range slices.Backward(left) {
						if upper == nil || bytes.Compare(k, upper) < 0 {
							want = append(want, k)
						}
					}
					rc := reverseCursor(b)
					var got [][]byte
					for k := rc.below(upper); k != nil; k = rc.prev(k) {
						got = append(got, bytes.Clone(k))
					}
					if !slices.EqualFunc(got, want, bytes.Equal) {
						t.Errorf("%s: backward from %q: got %d keys (first %q), want %d", name, upper, len(got), first(got), len(want))
					}
				}
				return tx.DeleteBucket([]byte("b"))
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func first(ks [][]byte) []byte {
	if len(ks) == 0 {
		return nil
	}
	return ks[0]
}
