// Package hangstore wraps a store so that tests can make its writes hang,
// as they do on a wedged disk or an unresponsive database that ignores
// deadlines.
package hangstore

import (
	"context"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Store is a store.Driver whose lease writes (the lease groups' and the
// /readyz write probe's) hang, ignoring their context, between Hang and
// Release.
type Store struct {
	store.Driver

	mu      sync.Mutex
	gate    chan struct{} // nil while writes pass
	blocked chan string
}

// Wrap returns d wrapped, its writes passing.
func Wrap(d store.Driver) *Store {
	return &Store{Driver: d, blocked: make(chan string, 1)}
}

// Hang makes lease writes from now on hang until Release.
func (s *Store) Hang() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

// Release lets the hanging writes and later ones through.
func (s *Store) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

// Blocked receives the name of a lease whose write hangs (the first of
// those not yet received).
func (s *Store) Blocked() <-chan string { return s.blocked }

func (s *Store) wait(name string) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate == nil {
		return
	}
	select {
	case s.blocked <- name:
	default:
	}
	<-gate
}

func (s *Store) LeaseAcquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (model.Lease, error) {
	s.wait(name)
	return s.Driver.LeaseAcquire(ctx, name, owner, now, ttl)
}

func (s *Store) LeaseRenew(ctx context.Context, name, owner string, fence int64, now time.Time, ttl time.Duration) (model.Lease, error) {
	s.wait(name)
	return s.Driver.LeaseRenew(ctx, name, owner, fence, now, ttl)
}

func (s *Store) LeaseRelease(ctx context.Context, name, owner string, fence int64) error {
	s.wait(name)
	return s.Driver.LeaseRelease(ctx, name, owner, fence)
}

func (s *Store) LeaseAdvertise(ctx context.Context, name, owner string, fence int64, addr string) error {
	s.wait(name)
	return s.Driver.LeaseAdvertise(ctx, name, owner, fence, addr)
}
