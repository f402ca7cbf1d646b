package embedded

import (
	"fmt"
	"math/rand/v2"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// A fire's events written in fan-out batches fill their pages to about
// packedFill, not to bbolt's default of half.
func TestFanOutBatchesPackPages(t *testing.T) {
	s := openTemp(t, Options{})
	const n, batch = 20_000, 1_000
	fire := base()
	fireID := model.FireID("sch_fanout", 1, fire)
	for lo := 0; lo < n; lo += batch {
		events := make([]*model.Event, 0, batch)
		for i := lo; i < lo+batch; i++ {
			events = append(events, &model.Event{
				ID: model.EventID(fireID, i), TenantID: "ten_a", ScheduleID: "sch_fanout", FireID: fireID, FireTime: fire,
				Index: i, Count: n, LaunchAt: fire, Target: model.Target{Type: model.TargetHTTP, URL: "https://example.com/"},
				MaxAttempts: 1, Shard: i % 8, Status: model.EventPending, CreatedAt: fire, UpdatedAt: fire,
			})
		}
		if got, err := s.EventInsertMany(t.Context(), events); err != nil || got != batch {
			t.Fatalf("EventInsertMany: %d, %v", got, err)
		}
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bEvRows, bEvFire, bEvDue} {
			st := tx.Bucket(name).Stats()
			if fill := float64(st.LeafInuse) / float64(st.LeafAlloc); fill < 0.75 {
				t.Errorf("%s: leaf pages %.0f%% full, want at least 75%%", name, 100*fill)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestOneFireRun(t *testing.T) {
	events := func(n int, fire func(i int) string) []*model.Event {
		out := make([]*model.Event, n)
		for i := range out {
			out[i] = &model.Event{FireID: fire(i)}
		}
		return out
	}
	same := func(int) string { return "f1" }
	for _, tc := range []struct {
		name   string
		events []*model.Event
		want   bool
	}{
		{"one fire, packMin events", events(packMin, same), true},
		{"one fire, too few", events(packMin-1, same), false},
		{"two fires", events(2*packMin, func(i int) string { return []string{"f1", "f2"}[i%2] }), false},
		{"last differs", events(packMin, func(i int) string { return map[bool]string{true: "f2", false: "f1"}[i == packMin-1] }), false},
	} {
		if got := oneFireRun(tc.events); got != tc.want {
			t.Errorf("%s: oneFireRun = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// One-offs whose ids sort in creation order fill the pages of the buckets
// keyed by those ids to about packedFill; random ids leave them at bbolt's
// default (the B+tree fills pages to about 70% from random keys).
func TestOrderedIDsPackPages(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			s := openTemp(t, Options{})
			r := rand.New(rand.NewPCG(1, 1))
			const n, batch = 6_000, 500
			for lo := 0; lo < n; lo += batch {
				items, fires := oneOffs(t, r, "ten_a", base(), lo, lo+batch, ordered)
				if _, err := s.ScheduleCreateMany(t.Context(), items); err != nil {
					t.Fatal(err)
				}
				if _, _, err := s.FireInsertMany(t.Context(), fires); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.db.View(func(tx *bolt.Tx) error {
				for _, name := range [][]byte{bSchedules, bSchedTenant, bChildSched, bFires, bFireSched, bEvGroups, bEvTenant} {
					st := tx.Bucket(name).Stats()
					fill := float64(st.LeafInuse) / float64(st.LeafAlloc)
					if ordered && fill < 0.8 {
						t.Errorf("%s: leaf pages %.0f%% full, want at least 80%%", name, 100*fill)
					}
					if !ordered && fill > 0.8 {
						t.Errorf("%s: leaf pages %.0f%% full from random keys: packed (want bbolt's default)", name, 100*fill)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPackAppends(t *testing.T) {
	s := openTemp(t, Options{})
	if err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bSchedTenant)
		for _, k := range []string{"t1\x00b", "t1\x00d", "t2\x00a"} {
			if err := b.Put([]byte(k), nil); err != nil {
				return err
			}
		}
		for _, step := range []struct {
			key  string
			n    int
			want float64
		}{
			{"t1\x00e", 0, bolt.DefaultFillPercent}, // t2\0a follows: not an append to the bucket
			{"t2\x00a", 0, bolt.DefaultFillPercent}, // the last key itself: not an append
			{"t1\x00a", 0, bolt.DefaultFillPercent}, // before every key
			{"t1\x00e", 3, packedFill},              // but one to tenant t1
			{"t3\x00a", 0, packedFill},              // the end of the bucket
			{"t1\x00c", 3, mixedFill},               // into the middle
			{"t3\x00b", 0, mixedFill},               // stays off for the transaction
		} {
			if step.want == bolt.DefaultFillPercent {
				// Checked on a fresh handle state: reset what an earlier step set.
				b.FillPercent = bolt.DefaultFillPercent
			}
			packAppends(b, []byte(step.key), step.n)
			if step.want == bolt.DefaultFillPercent {
				if b.FillPercent == packedFill {
					t.Errorf("packAppends(%q, %d): packed, want not", step.key, step.n)
				}
				b.FillPercent = bolt.DefaultFillPercent
				continue
			}
			if b.FillPercent != step.want {
				t.Errorf("packAppends(%q, %d): fill %v, want %v", step.key, step.n, b.FillPercent, step.want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
