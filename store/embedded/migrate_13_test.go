package embedded

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// A directory of layout 13 opens as the current layout with its fires,
// and its fires take a trace context from then on.
func TestMigrateFireTraceRows(t *testing.T) {
	dir := storeWithTenant(t)
	at := time.Date(2030, 1, 1, 5, 0, 0, 0, time.UTC)
	old := &model.Fire{ID: "s1.1.x", ScheduleID: "s1", TenantID: "t1", FireTime: at, LocalTime: at.Format(localLayout),
		Count: 3, Decision: model.FireEmitted, CreatedAt: at}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FireInsert(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	setLayout(t, dir, 13)
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.FireGet(t.Context(), "t1", old.ID); err != nil || got.Count != 3 || got.TraceParent != "" {
		t.Errorf("fire after the migration: %+v, %v", got, err)
	}
	traced := *old
	traced.ID, traced.Remaining, traced.TraceParent = "s1.1.y", 3, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if _, err := s.FireInsert(t.Context(), &traced); err != nil {
		t.Fatal(err)
	}
	if got, err := s.FireGet(t.Context(), "t1", traced.ID); err != nil || got.TraceParent != traced.TraceParent {
		t.Errorf("traced fire: %+v, %v", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := recordedLayout(t, dir); got != layoutCurrent {
		t.Errorf("recorded layout %d, want %d", got, layoutCurrent)
	}
}
