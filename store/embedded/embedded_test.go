package embedded_test

import (
	"testing"

	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/storetest"
)

func newStore(t *testing.T) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) store.Driver { return newStore(t) })
}
