package embedded

import (
	"bytes"
	"encoding/binary"
	"github.com/schedulerd/schedulerd/model"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
)

func schedKeySeed(t *testing.T) uint64 { return testseed.Get(t, "SCHEDULERD_SCHEDKEY_SEED", 1) }

// oddID returns an id of the master's form, or one that is not quite:
// shorter, longer, with characters outside the alphabet, without the
// prefix, or starting with bytes that mark keys.
func oddID(r *rand.Rand) string {
	const chars = "234567abcdefghijklmnopqrstuvwxyz0189_.AZ{~"
	switch r.IntN(4) {
	case 0, 1:
		return randomID(r, model.PrefixSchedule)
	case 2:
		return orderedID(r, model.PrefixSchedule, r.Uint64N(1<<40))
	}
	var sb strings.Builder
	sb.WriteString(pick(r, model.PrefixSchedule, model.PrefixSchedule, "sch", "sci_", "s", "", "\xfe", "\xff\x01", "sch_zzzzzzzzzzzzzzzz"))
	for range r.IntN(19) {
		sb.WriteByte(chars[r.IntN(len(chars))])
	}
	return sb.String()
}

// Keys of schedule ids: every id comes back from its key and its tenant
// entry, packed ids sort as their texts do, and the tenant index walks in
// id order from any point, whatever the mix of forms. Seeded by
// SCHEDULERD_SCHEDKEY_SEED (default 1).
func TestScheduleKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(schedKeySeed(t), 5))
	db, err := bolt.Open(t.TempDir()+"/k.db", 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for round := range 30 {
		seen := map[string]bool{}
		var ids []string
		for range 1 + r.IntN(120) {
			if id := oddID(r); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		err := db.Update(func(tx *bolt.Tx) error {
			_ = tx.DeleteBucket(bSchedTenant)
			b, err := tx.CreateBucket(bSchedTenant)
			if err != nil {
				return err
			}
			// The tenant's neighbours, under codes 1 and 3.
			for _, code := range []uint64{1, 3} {
				if err := b.Put(appendTenantSched(binary.AppendUvarint(nil, code), oddID(r)), nil); err != nil {
					return err
				}
			}
			prefix := binary.AppendUvarint(nil, 2)
			for _, id := range ids {
				if got := schedKeyID(schedKey(id)); got != id {
					t.Fatalf("round %d: id %q comes back from its key as %q", round, id, got)
				}
				k := appendTenantSched(bytes.Clone(prefix), id)
				if got := tenantSchedID(k[len(prefix):]); got != id {
					t.Fatalf("round %d: id %q comes back from its tenant entry as %q", round, id, got)
				}
				if err := b.Put(k, []byte(id)); err != nil {
					return err
				}
			}
			sorted := slices.Sorted(slices.Values(ids))
			froms := append([]string{""}, ids...)
			for range 20 {
				froms = append(froms, oddID(r))
			}
			for _, from := range froms {
				var got []string
				for id, v := range tenantSchedules(b, prefix, from) {
					if string(v) != id {
						t.Fatalf("round %d: id %q with the value of %q", round, id, v)
					}
					got = append(got, id)
				}
				i, _ := slices.BinarySearch(sorted, from)
				if want := sorted[i:]; !slices.Equal(got, want) {
					t.Fatalf("round %d, from %q:\n got %q\nwant %q", round, from, got, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzScheduleKeys checks the keys of schedule ids: every id without a NUL
// comes back from its key and its tenant entry; keys of packed ids sort as
// the ids do; packedFrom gives the least packed id at or after a bound.
//
//	go test -run '^$' -fuzz FuzzScheduleKeys ./store/embedded
func FuzzScheduleKeys(f *testing.F) {
	for _, seed := range [][2]string{
		{"sch_2222222222222222", "sch_zzzzzzzzzzzzzzzz"}, {"sch_abc", "sch_abc2222222222222"},
		{"sch_a8", "sch_aa22222222222222"}, {"sch_z{", "sch_zz22222222222222"},
		{"sch_zzzzzzzzzzzzzzzz0", "sch_zzzzzzzzzzzzzzzz"}, {"", "\xfe"}, {"s", "sci"},
	} {
		f.Add(seed[0], seed[1])
	}
	packed := func(id string) bool { k := schedKey(id); return len(k) == 11 && k[0] == impliedPacked }
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.IndexByte(a, 0) >= 0 {
			return // ids hold no NUL
		}
		if got := schedKeyID(schedKey(a)); got != a {
			t.Fatalf("id %q comes back from its key as %q", a, got)
		}
		if got := tenantSchedID(appendTenantSched(nil, a)); got != a {
			t.Fatalf("id %q comes back from its tenant entry as %q", a, got)
		}
		if packed(a) && packed(b) && bytes.Compare(schedKey(a), schedKey(b)) != strings.Compare(a, b) {
			t.Fatalf("keys of %q and %q sort otherwise than the ids", a, b)
		}
		lo, ok := packedFrom(a)
		if !ok {
			if packed(b) && b >= a {
				t.Fatalf("no packed id at or after %q, but %q is", a, b)
			}
			return
		}
		least := impliedScheduleID(append([]byte{impliedPacked}, lo...))
		if least < a || !packed(least) {
			t.Fatalf("packedFrom(%q) = %q", a, least)
		}
		if packed(b) && b >= a && b < least {
			t.Fatalf("packedFrom(%q) = %q, but %q is at or after it and before that", a, least, b)
		}
	})
}
