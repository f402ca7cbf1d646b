package embedded

import "testing"

// A directory of layout 12 opens as the current layout with its data, and its events take
// a trace context from then on.
func TestMigrateTraceContextRows(t *testing.T) {
	dir := storeWithTenant(t)
	setLayout(t, dir, 12)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tn, err := s.TenantGet(t.Context(), "t1"); err != nil || tn.Name != "one" {
		t.Errorf("tenant after the migration: %+v, %v", tn, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := recordedLayout(t, dir); got != layoutCurrent {
		t.Errorf("recorded layout %d, want %d", got, layoutCurrent)
	}
}
