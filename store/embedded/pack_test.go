package embedded

import (
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// A fire's events written in fan-out batches fill their pages to about
// packedFill, not to bbolt's default of half.
func TestFanOutBatchesPackPages(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
