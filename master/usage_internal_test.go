package master

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/model"
)

// countingStore answers the quota counts with the figures it is set to,
// each count first waiting for gate when gate is set and taking took on
// the fake clock; the other calls of Store are not made.
type countingStore struct {
	Store
	clock             *clockwork.FakeClock
	schedules, events atomic.Int64
	counts            atomic.Int64
	gate              atomic.Pointer[chan struct{}]
	took              time.Duration
}

func (c *countingStore) ScheduleCountByTenant(context.Context, string, int) (int, error) {
	c.counts.Add(1)
	if g := c.gate.Load(); g != nil {
		<-*g
	}
	c.clock.Advance(c.took)
	return int(c.schedules.Load()), nil
}

func (c *countingStore) EventCountByTenant(context.Context, string, int) (int, error) {
	return int(c.events.Load()), nil
}

// TestQuotaRecountDoesNotHoldRequests checks that a tenant's first quota
// check counts its usage, that a check on stale figures starts a recount
// and answers from the cached figures without waiting for it, and that
// the recount's figures then serve (what the store holds, plus what was
// let through meanwhile).
func TestQuotaRecountDoesNotHoldRequests(t *testing.T) {
	clock := clockwork.NewFakeClock()
	st := &countingStore{clock: clock}
	s := &Server{cfg: Config{QuotaCountTTL: time.Minute}, store: st, clock: clock}
	r := &tenantRules{quotas: model.TenantQuotas{MaxSchedules: 5, MaxEventsStored: 1000}}
	reserve := func() error {
		return s.reserve(context.Background(), "t", r, 1, 1, func(u usage) error {
			return schedulesQuota("t", u.schedules, r.quotas.MaxSchedules)
		})
	}
	if err := reserve(); err != nil || st.counts.Load() != 1 {
		t.Fatalf("first check: %v, %d counts, want one", err, st.counts.Load())
	}
	if err := reserve(); err != nil || st.counts.Load() != 1 {
		t.Fatalf("fresh figures: %v, %d counts, want still one", err, st.counts.Load())
	}
	// Written behind the server's back: with the server's two, 5 schedules.
	st.schedules.Store(5)
	clock.Advance(time.Minute)
	gate := make(chan struct{})
	st.gate.Store(&gate)
	answered := make(chan error, 1)
	go func() { answered <- reserve() }()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("check on stale figures: %v", err)
		}
	case <-time.After(10 * time.Second): // a failure detector, not a wait
		t.Fatal("a check on stale figures waited for the recount")
	}
	close(gate)
	s.usage.recounts.Wait()
	if n := st.counts.Load(); n != 2 {
		t.Fatalf("%d counts, want 2", n)
	}
	// 5 counted (the check let through during the recount may or may not be
	// among them): the quota of 5 is reached.
	if err := reserve(); err == nil {
		t.Fatal("the recount's figures were not used: a sixth schedule passed")
	}
}

// TestQuotaRecountSpacing checks that a tenant whose count takes long is
// counted again only after recountSpacing times that, even past the TTL.
func TestQuotaRecountSpacing(t *testing.T) {
	clock := clockwork.NewFakeClock()
	st := &countingStore{clock: clock, took: 10 * time.Second}
	s := &Server{cfg: Config{QuotaCountTTL: time.Minute}, store: st, clock: clock}
	r := &tenantRules{quotas: model.TenantQuotas{MaxSchedules: 1000, MaxEventsStored: 1000}}
	reserve := func() {
		t.Helper()
		if err := s.reserve(context.Background(), "t", r, 1, 1, func(usage) error { return nil }); err != nil {
			t.Fatal(err)
		}
		s.usage.recounts.Wait()
	}
	reserve() // counted at 0, took 10s
	clock.Advance(2 * time.Minute)
	reserve()
	if n := st.counts.Load(); n != 1 {
		t.Fatalf("%d counts %v after a count that took 10s, want 1 (next after %v)", n, 2*time.Minute, recountSpacing*st.took)
	}
	clock.Advance(recountSpacing*st.took - 2*time.Minute)
	reserve()
	if n := st.counts.Load(); n != 2 {
		t.Fatalf("%d counts %v after a count that took 10s, want 2", n, recountSpacing*st.took)
	}
}
