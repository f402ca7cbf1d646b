package app_test

import (
	"net/http"
	"testing"

	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// TestReadyzReportsIndexes checks that /readyz reports the MongoDB store's
// index build (built: "ok") and that the embedded store has no such check.
func TestReadyzReportsIndexes(t *testing.T) {
	t.Parallel()
	t.Run("Mongo", func(t *testing.T) {
		t.Parallel()
		_, call := runApp(t, map[string]string{
			"SCHEDULER_STORE": "mongo", "SCHEDULER_MONGO_URI": mongotest.URI(t),
			"SCHEDULER_ADMIN_KEY": "admin-key-for-tests-0123456789", "SCHEDULER_SIGNING_SECRET": "signing-secret-for-tests-0123",
			"SCHEDULER_LOG_LEVEL": "warn",
		})
		ready := call(http.MethodGet, "", "/readyz", nil, http.StatusOK)
		checks, _ := ready["checks"].(map[string]any)
		if got, _ := checks["indexes"].(string); got != "ok" {
			t.Fatalf("/readyz on a fresh MongoDB database: indexes %q, want ok (%v)", got, ready)
		}
	})
	t.Run("Embedded", func(t *testing.T) {
		t.Parallel()
		_, call := runApp(t, map[string]string{"SCHEDULER_LOG_LEVEL": "warn"})
		ready := call(http.MethodGet, "", "/readyz", nil, http.StatusOK)
		checks, _ := ready["checks"].(map[string]any)
		if _, ok := checks["indexes"]; ok {
			t.Fatalf("/readyz of the embedded store reports indexes: %v", ready)
		}
	})
}
