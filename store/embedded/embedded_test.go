package embedded_test

import (
	"errors"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/storetest"
)

func newStore(t *testing.T) *embedded.Store {
	t.Helper()
	return newStoreIn(t, t.TempDir())
}

func newStoreIn(t *testing.T, dir string) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(dir, embedded.Options{})
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

func TestOpenLockedDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = s.Close() }()
	// A second opener (another process, or a second driver in this one)
	// must not share the file; it gives up after LockTimeout.
	_, err = embedded.Open(dir, embedded.Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("second Open: got %v, want ErrUnavailable", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.TenantCreate(t.Context(), &model.Tenant{ID: "t1", Name: "one"}); err != nil {
		t.Fatalf("TenantCreate: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.TenantGet(t.Context(), "t1"); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("TenantGet after Close: got %v, want ErrUnavailable", err)
	}
	s = newStoreIn(t, dir)
	if _, err := s.TenantGet(t.Context(), "t1"); err != nil {
		t.Fatalf("TenantGet after reopen: %v", err)
	}
}
