package app_test

import (
	"net/http"
	"testing"
)

// The embedded store's commits and the writes they carried are exported:
// a write the API answered has been committed and counted.
func TestStoreCommitMetrics(t *testing.T) {
	a, call := runApp(t, map[string]string{"SCHEDULER_LOG_LEVEL": "warn"})
	key := tenantKey(a, call)
	read := func() (commits, writes float64) {
		t.Helper()
		c, ok1 := metric(a, "schedulerd_store_commits_total")
		w, ok2 := metric(a, "schedulerd_store_writes_total")
		if !ok1 || !ok2 {
			t.Fatalf("no schedulerd_store_commits_total or schedulerd_store_writes_total in /metrics")
		}
		return c, w
	}
	c0, w0 := read()
	if c0 < 1 || w0 < c0 {
		t.Fatalf("after the tenant's creation: %v commits, %v writes", c0, w0)
	}
	call(http.MethodPost, key, "/v1/policies", map[string]any{"name": "billing", "maxInFlight": 8}, http.StatusCreated)
	c1, w1 := read()
	if c1 < c0+1 || w1 < w0+1 || w1 < c1 {
		t.Fatalf("after a policy's creation: %v commits and %v writes, from %v and %v", c1, w1, c0, w0)
	}
}
