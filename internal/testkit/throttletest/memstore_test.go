package throttletest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// TestClaimDueByLanes pins MemStore's claim to the contract: an older
// fence's event first, whatever its policy; the rest shared over the
// tenants, each tenant's earliest first; skipped policies left pending.
func TestClaimDueByLanes(t *testing.T) {
	ctx := t.Context()
	s := NewMemStore()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(id, tenant, policy string, at time.Duration, st model.EventStatus, fence int64) {
		e := &model.Event{ID: id, TenantID: tenant, PolicyID: policy, LaunchAt: base.Add(at), Status: st, Fence: fence}
		if _, err := s.EventInsertMany(ctx, []*model.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
	add("old", "big", "hot", time.Hour, model.EventScheduled, 1)
	for i := range 10 {
		add(fmt.Sprintf("big-%d", i), "big", "", time.Duration(i)*time.Millisecond, model.EventPending, 0)
	}
	add("small-0", "small", "", time.Second, model.EventPending, 0)
	add("small-1", "small", "", 2*time.Second, model.EventRetrying, 0)
	add("hot-0", "small", "hot", 0, model.EventPending, 0)

	got, err := s.EventClaimDue(ctx, &store.EventClaimParams{Fence: 2, DueBefore: base.Add(time.Minute), Limit: 5, SkipPolicies: []string{"hot"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
		if e.TakenOver != (e.ID == "old") || e.Status != model.EventScheduled || e.Fence != 2 {
			t.Fatalf("claimed %s: taken over %v, %s, fence %d", e.ID, e.TakenOver, e.Status, e.Fence)
		}
	}
	// The lanes' order among themselves is the store's.
	if len(ids) != 5 || ids[0] != "old" || !slices.Equal(slices.Sorted(slices.Values(ids[1:])), []string{"big-0", "big-1", "small-0", "small-1"}) {
		t.Fatalf("claimed %v, want old first, then big-0, big-1, small-0 and small-1", ids)
	}
	if e, _ := s.EventGetByID(ctx, "hot-0"); e.Status != model.EventPending {
		t.Fatalf("the skipped policy's event is %s, want pending", e.Status)
	}
}
