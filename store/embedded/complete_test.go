package embedded

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// TestFillScheduleEnds: a store written before schedule_ends existed gets
// the entries of its schedules at Open, so that its one-offs complete.
// Opening a store of layout 11, which had no schedule_ends index,
// indexes its schedules: a one-off of it completes.
func TestMigrate11IndexesScheduleEnds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runAt := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	sc := &model.Schedule{ID: "o1", TenantID: "A", Name: "o1", RunAt: &runAt, Timezone: "UTC", EventCount: 1,
		Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/hook"}, MaxAttempts: 3,
		Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow, State: model.ScheduleActive, Version: 1}
	if err := storetest.CreateSchedule(t.Context(), s, sc, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// As layout 11 left it: no index.
	editFile(t, dir, func(tx *bolt.Tx) error { return tx.DeleteBucket(bSchedEnds) })
	setLayout(t, dir, 11)
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var layout int
	if err := s.db.View(func(tx *bolt.Tx) (err error) { layout, err = storedLayout(tx); return err }); err != nil || layout != layoutCurrent {
		t.Fatalf("recorded layout %d (%v), want %d", layout, err, layoutCurrent)
	}
	now := runAt.Add(2 * time.Hour)
	res, err := s.ScheduleComplete(t.Context(), &store.ScheduleCompleteParams{Now: now, MissedBefore: now, At: now, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 1 {
		t.Fatalf("completed %d after reopening, want 1", res.Completed)
	}
}
