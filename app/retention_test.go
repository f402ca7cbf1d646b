package app

import (
	"testing"

	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// ttlStore is a store whose retention is (or is not) by TTL indexes.
type ttlStore struct {
	store.Driver
	ttl bool
}

func (s ttlStore) RetentionByTTL() bool { return s.ttl }

// TestRetentionInterval checks the purge jobs' period: a backstop's where
// the store deletes by TTL (MongoDB), the handler's default where the jobs
// are the retention (FerretDB, the embedded store).
func TestRetentionInterval(t *testing.T) {
	t.Parallel()
	emb, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	for _, tc := range []struct {
		name string
		st   store.Driver
		want string
	}{
		{"TTL", ttlStore{ttl: true}, "1h0m0s"},
		{"NoTTL", ttlStore{ttl: false}, "0s"},
		{"Embedded", emb, "0s"},
	} {
		if got := retentionInterval(tc.st).String(); got != tc.want {
			t.Errorf("%s: retention interval %s, want %s", tc.name, got, tc.want)
		}
	}
}
