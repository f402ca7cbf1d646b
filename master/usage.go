package master

import (
	"context"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
)

// usageCache holds each tenant's schedule and stored-event counts as the
// quotas see them. Counting in the store reads up to the quota's number of
// index keys (about a microsecond each), so a tenant is counted once on its
// first check and then again in the background, no request waiting for it,
// once the figures are Config.QuotaCountTTL old and recountSpacing times as
// old as the last count took (so that counting a large tenant takes a small
// share of a core); in between, what this process lets through is added to
// the cached figures. Deletions, completions, retention and other
// instances' writes show at the next count; a check that would refuse
// counts again first (at most as often as a recount, and only if nothing
// was let through for QuotaCountTTL: a batch's items are let through
// before they are written).
type usageCache struct {
	mu sync.Mutex
	m  map[string]*usage
	// recounts running in the background (tests wait for them)
	recounts sync.WaitGroup
}

type usage struct {
	schedules, events int
	countedAt         time.Time
	countTook         time.Duration // the last count
	counting          bool          // a recount is running
	// let through since the tenant's first count: a recount adds what was
	// let through after it began
	addedSchedules, addedEvents int
	addedAt                     time.Time // the last time something was let through
}

// recountSpacing is how many times as long as a count took the figures
// serve at least before the next.
const recountSpacing = 20

// reserve counts the tenant's usage if it has no figures yet (or counts
// on every check: QuotaCountTTL negative), starts a recount if its figures
// are stale, asks check whether schedules more schedules and events more
// events fit, and adds them to the figures when they do.
func (s *Server) reserve(ctx context.Context, tenantID string, r *tenantRules, schedules, events int,
	check func(u usage) error) error {
	now := s.now()
	s.usage.mu.Lock()
	u, ok := s.usage.m[tenantID]
	s.usage.mu.Unlock()
	if !ok || s.cfg.QuotaCountTTL < 0 {
		ns, ne, took, err := s.countUsage(ctx, tenantID, r)
		if err != nil {
			return err
		}
		s.usage.mu.Lock()
		if s.usage.m == nil {
			s.usage.m = make(map[string]*usage)
		}
		if u = s.usage.m[tenantID]; u == nil {
			u = &usage{}
			s.usage.m[tenantID] = u
		}
		u.schedules, u.events, u.countedAt, u.countTook = ns, ne, now, took
		s.usage.mu.Unlock()
	}
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	err := check(*u)
	if err != nil && ok && s.cfg.QuotaCountTTL >= 0 && !u.counting && now.Sub(u.countedAt) >= recountSpacing*u.countTook &&
		now.Sub(u.addedAt) >= s.cfg.QuotaCountTTL {
		// A refusal is final for the client: count again first, since the
		// tenant's schedules may have completed or gone, unless a count
		// was just made (as often as a recount) or something was let
		// through lately, which may not be written yet (a batch).
		u.counting = true
		addedSchedules, addedEvents := u.addedSchedules, u.addedEvents
		s.usage.mu.Unlock()
		ns, ne, took, cerr := s.countUsage(ctx, tenantID, r)
		s.usage.mu.Lock()
		u.counting = false
		if cerr != nil {
			return cerr
		}
		u.schedules = ns + u.addedSchedules - addedSchedules
		u.events = ne + u.addedEvents - addedEvents
		u.countedAt, u.countTook = now, took
		err = check(*u)
	}
	if age := now.Sub(u.countedAt); s.cfg.QuotaCountTTL >= 0 && !u.counting && age >= s.cfg.QuotaCountTTL && age >= recountSpacing*u.countTook {
		u.counting = true
		s.usage.recounts.Add(1)
		go s.recount(tenantID, r, u, u.addedSchedules, u.addedEvents)
	}
	if err != nil {
		return err
	}
	u.schedules += schedules
	u.events += events
	u.addedSchedules += schedules
	u.addedEvents += events
	if schedules > 0 || events > 0 {
		u.addedAt = now
	}
	return nil
}

// countUsage counts the tenant's schedules and stored events in the store
// and says how long that took.
func (s *Server) countUsage(ctx context.Context, tenantID string, r *tenantRules) (schedules, events int, took time.Duration, err error) {
	start := s.now()
	ns, err := s.store.ScheduleCountByTenant(ctx, tenantID, r.quotas.MaxSchedules)
	if err != nil {
		return 0, 0, 0, err
	}
	ne, err := s.store.EventCountByTenant(ctx, tenantID, r.quotas.MaxEventsStored+1)
	if err != nil {
		return 0, 0, 0, err
	}
	return ns, ne, s.now().Sub(start), nil
}

// recount counts u's tenant again and makes the count, plus what was let
// through since the recount began (beyond schedules and events, the
// tenant's additions when it began), its figures. On an error the figures
// stay, and the next check starts another recount.
func (s *Server) recount(tenantID string, r *tenantRules, u *usage, schedules, events int) {
	defer s.usage.recounts.Done()
	start := s.now()
	ns, ne, took, err := s.countUsage(context.Background(), tenantID, r)
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	u.counting = false
	if err != nil {
		s.log.Debug().Err(err).Str(logkey.Tenant, tenantID).Msg("recounting the tenant's usage for its quotas")
		return
	}
	u.schedules = ns + u.addedSchedules - schedules
	u.events = ne + u.addedEvents - events
	u.countedAt, u.countTook = start, took
}
