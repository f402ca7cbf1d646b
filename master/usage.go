package master

import (
	"context"
	"sync"
	"time"
)

// usageCache holds each tenant's schedule and stored-event counts as the
// quotas see them. Counting in the store reads up to the quota's number of
// index keys, so it runs at most once per Config.QuotaCountTTL per tenant;
// in between, what this process lets through is added to the cached figures.
// Deletions, retention and other instances' writes show at the next count.
type usageCache struct {
	mu sync.Mutex
	m  map[string]*usage
}

type usage struct {
	schedules, events int
	countedAt         time.Time
}

// reserve counts the tenant's usage if the cached figures are stale, asks
// check whether schedules more schedules and events more events fit, and
// adds them to the figures when they do.
func (s *Server) reserve(ctx context.Context, tenantID string, r *tenantRules, schedules, events int,
	check func(u usage) error) error {
	now := s.now()
	s.usage.mu.Lock()
	u, ok := s.usage.m[tenantID]
	fresh := ok && s.cfg.QuotaCountTTL >= 0 && now.Sub(u.countedAt) < s.cfg.QuotaCountTTL
	s.usage.mu.Unlock()
	if !fresh {
		ns, err := s.store.ScheduleCountByTenant(ctx, tenantID, r.quotas.MaxSchedules)
		if err != nil {
			return err
		}
		ne, err := s.store.EventCountByTenant(ctx, tenantID, r.quotas.MaxEventsStored+1)
		if err != nil {
			return err
		}
		u = &usage{schedules: ns, events: ne, countedAt: now}
		s.usage.mu.Lock()
		if s.usage.m == nil {
			s.usage.m = make(map[string]*usage)
		}
		s.usage.m[tenantID] = u
		s.usage.mu.Unlock()
	}
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	if err := check(*u); err != nil {
		return err
	}
	u.schedules += schedules
	u.events += events
	return nil
}
