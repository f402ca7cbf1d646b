package embedded

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// Events of fires without a group, interleaved in one insert (each fire is
// first looked up and found without a group, then given one), all land in
// one group per fire and read back.
func TestEventInsertNewGroupsInterleaved(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{})
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var events []*model.Event
	add := func(fire string, i int, id string) {
		events = append(events, &model.Event{
			ID: id, TenantID: "t", ScheduleID: "s", FireID: fire, Index: i,
			LaunchAt: base.Add(time.Duration(len(events)) * time.Second), Status: model.EventPending, CreatedAt: base, UpdatedAt: base,
		})
	}
	add("s.a", 0, "s.a.0")
	add("s.b", 0, "s.b.0")
	add("s.a", 1, "s.a.1")
	add("s.b", 1, "s.b-loose")
	add("s.a", 2, "s.a.2")
	if n, err := s.EventInsertMany(ctx, events); err != nil || n != len(events) {
		t.Fatalf("EventInsertMany: %d, %v; want %d", n, err, len(events))
	}
	for _, e := range events {
		got, err := s.EventGet(ctx, "t", e.ID)
		if err != nil || got.FireID != e.FireID {
			t.Errorf("EventGet %s: %+v, %v; want an event of fire %s", e.ID, got, err, e.FireID)
		}
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bEvHeads).Stats().KeyN; n != 2 {
			t.Errorf("%d group heads, want 2 (one per fire)", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkEventIndexes(t, s)
}
