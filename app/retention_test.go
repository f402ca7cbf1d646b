package app

import "testing"

// TestRetentionInterval checks the purge jobs' period: a backstop's where
// the store deletes by TTL (MongoDB), the handler's default where the jobs
// are the retention (FerretDB, the embedded store).
func TestRetentionInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		byTTL bool
		want  string
	}{
		{"TTL", true, "1h0m0s"},
		{"NoTTL", false, "0s"},
	} {
		if got := retentionInterval(tc.byTTL).String(); got != tc.want {
			t.Errorf("%s: retention interval %s, want %s", tc.name, got, tc.want)
		}
	}
}
