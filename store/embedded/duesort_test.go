package embedded

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// New events' due entries are written when their evtx flushes; an event
// inserted and then changed or removed in the same evtx leaves the due
// index with exactly the entries of what is stored.
func TestDueEntriesOfEventsChangedAfterInsert(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var events []*model.Event
	for i := range 8 {
		events = append(events, &model.Event{
			ID: model.EventID("s.1", i), TenantID: "t", ScheduleID: "s", FireID: "s.1", Index: i,
			// Launch times out of insertion order.
			LaunchAt: base.Add(time.Duration((i*5)%8) * time.Minute), Status: model.EventPending, CreatedAt: base, UpdatedAt: base,
		})
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		x := newEvtx(tx)
		insert := func(from, to int) {
			for _, e := range events[from:to] {
				if ok, err := x.insert(e); err != nil || !ok {
					t.Fatalf("insert %s: %v, %v", e.ID, ok, err)
				}
			}
		}
		insert(0, 5)
		rk, old, err := x.get(events[4].ID)
		if err != nil {
			return err
		}
		if err := x.remove(rk, old); err != nil {
			return err
		}
		insert(5, 7)
		// Scheduled with a fence: its pending entry goes, a fenced one comes.
		if rk, old, err = x.get(events[6].ID); err != nil {
			return err
		}
		e := *old
		e.Status, e.Fence = model.EventScheduled, 3
		if err := x.put(rk, old, &e); err != nil {
			return err
		}
		insert(7, 8)
		return x.flush()
	}); err != nil {
		t.Fatal(err)
	}
	checkEventIndexes(t, s)
	if err := s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bEvDue).Stats().KeyN; n != 7 {
			t.Errorf("ev_due holds %d entries, want 7 (eight inserted, one removed)", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
