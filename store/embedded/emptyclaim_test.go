package embedded

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// A claim that finds nothing due writes nothing (no commit, no sync); one
// that finds an event still claims it.
func TestEmptyClaimDoesNotCommit(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{})
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e := &model.Event{ID: "s.f.0", TenantID: "t", ScheduleID: "s", FireID: "s.f", Shard: 3,
		LaunchAt: base.Add(time.Minute), Status: model.EventPending, CreatedAt: base, UpdatedAt: base}
	if _, err := s.EventInsertMany(ctx, []*model.Event{e}); err != nil {
		t.Fatal(err)
	}
	writes := func() int64 { st := s.db.Stats(); return st.TxStats.GetWrite() }
	before := writes()
	for _, p := range []store.EventClaimParams{
		{Shard: 3, Fence: 1, DueBefore: base, Limit: 10},                // not due yet
		{Shard: 4, Fence: 1, DueBefore: base.Add(time.Hour), Limit: 10}, // another shard
	} {
		got, err := s.EventClaimDue(ctx, &p)
		if err != nil || len(got) != 0 {
			t.Fatalf("claim %+v: %v, %v; want nothing", p, got, err)
		}
	}
	if after := writes(); after != before {
		t.Fatalf("empty claims wrote %d pages, want none", after-before)
	}
	got, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: 3, Fence: 1, DueBefore: base.Add(time.Hour), Limit: 10})
	if err != nil || len(got) != 1 || got[0].ID != e.ID || got[0].Status != model.EventScheduled {
		t.Fatalf("claim of the due event: %v, %v", got, err)
	}
	if writes() == before {
		t.Fatal("the claim of a due event wrote nothing")
	}
}
