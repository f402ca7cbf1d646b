package embedded

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// TestFillScheduleEnds: a store written before schedule_ends existed gets
// the entries of its schedules at Open, so that its one-offs complete.
func TestFillScheduleEnds(t *testing.T) {
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
	if err := s.ScheduleCreate(t.Context(), sc, nil); err != nil {
		t.Fatal(err)
	}
	// As an older version left it: no entries, no mark.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bSchedEnds); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Delete(keyEndsFilled)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	now := runAt.Add(2 * time.Hour)
	res, err := s.ScheduleComplete(t.Context(), &store.ScheduleCompleteParams{Now: now, MissedBefore: now, At: now, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 1 {
		t.Fatalf("completed %d after reopening, want 1", res.Completed)
	}
}
