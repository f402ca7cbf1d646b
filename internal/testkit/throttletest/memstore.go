// Package throttletest has test support for the throttle and the handler: an
// in-memory store that follows the store contract for the methods they use
// (compare-and-set transitions with fences, token counts that never exceed
// the policy's TokenCap), with switches to simulate a store outage.
//
// The conformance suite of the real drivers is store/storetest; this fake
// only lets unit tests run without a driver.
package throttletest

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// MemStore is an in-memory store for tests. Safe for concurrent use.
type MemStore struct {
	mu       sync.Mutex
	events   map[string]*model.Event
	policies map[string]*model.Policy
	// Down makes every call fail with model.ErrUnavailable while true.
	down bool
	// MaxInUse records the highest InUse seen per policy.
	maxInUse map[string]int
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{events: map[string]*model.Event{}, policies: map[string]*model.Policy{}, maxInUse: map[string]int{}}
}

// SetDown simulates a store outage.
func (s *MemStore) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

func (s *MemStore) check(ctx context.Context) error {
	if s.down {
		return model.ErrUnavailable
	}
	if ctx.Err() != nil {
		return model.ErrUnavailable
	}
	return nil
}

func cloneEvent(e *model.Event) *model.Event {
	c := *e
	return &c
}

// EventInsertMany inserts events whose ids are new.
func (s *MemStore) EventInsertMany(ctx context.Context, events []*model.Event) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range events {
		if _, ok := s.events[e.ID]; ok {
			continue
		}
		s.events[e.ID] = cloneEvent(e)
		n++
	}
	return n, nil
}

// EventGetByID returns a copy of the event.
func (s *MemStore) EventGetByID(ctx context.Context, id string) (*model.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	e, ok := s.events[id]
	if !ok {
		return nil, model.ErrNotFound
	}
	return cloneEvent(e), nil
}

// Events returns copies of all events.
func (s *MemStore) Events() []*model.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*model.Event, 0, len(s.events))
	for _, e := range s.events {
		out = append(out, cloneEvent(e))
	}
	return out
}

// EventClaimDue follows store.EventStore.EventClaimDue: the older fences'
// events first, then the rest of the limit shared over the due events'
// lanes by store.ShareClaim.
func (s *MemStore) EventClaimDue(ctx context.Context, p *store.EventClaimParams) ([]*model.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, nil
	}
	type laneKey struct {
		tenant, policy string
		priority       int
	}
	var older []*model.Event
	due := map[laneKey][]*model.Event{}
	for _, e := range s.events {
		if e.Shard != p.Shard {
			continue
		}
		switch {
		case e.Status == model.EventScheduled && e.Fence < p.Fence:
			older = append(older, e)
		case (e.Status == model.EventPending || e.Status == model.EventRetrying) && e.LaunchAt.Before(p.DueBefore) &&
			!slices.Contains(p.SkipPolicies, e.PolicyID):
			k := laneKey{e.TenantID, e.PolicyID, e.Priority}
			due[k] = append(due[k], e)
		}
	}
	byLaunch := func(a, b *model.Event) int { return cmp.Or(a.LaunchAt.Compare(b.LaunchAt), cmp.Compare(a.ID, b.ID)) }
	slices.SortFunc(older, byLaunch)
	cand := older[:min(len(older), p.Limit)]
	lanes := make([]store.ClaimLane, 0, len(due))
	for k, es := range due {
		slices.SortFunc(es, store.CompareInLane)
		lanes = append(lanes, store.ClaimLane{TenantID: k.tenant, PolicyID: k.policy, Priority: k.priority, Due: len(es)})
	}
	for i, n := range store.ShareClaim(lanes, p.Limit-len(cand)) {
		l := lanes[i]
		es := due[laneKey{l.TenantID, l.PolicyID, l.Priority}]
		if l.PolicyID == "" {
			cand = append(cand, es[:n]...)
			continue
		}
		// A policy's lane: its schedules (pending and retrying apart)
		// take turns, in the order of their earliest.
		type schedKey struct {
			id     string
			status model.EventStatus
		}
		var order []schedKey
		scheds := map[schedKey][]*model.Event{}
		for _, e := range es {
			k := schedKey{e.ScheduleID, e.Status}
			if scheds[k] == nil {
				order = append(order, k)
			}
			scheds[k] = append(scheds[k], e)
		}
		slices.SortFunc(order, func(a, b schedKey) int {
			return cmp.Or(scheds[a][0].LaunchAt.Compare(scheds[b][0].LaunchAt), cmp.Compare(a.id, b.id), cmp.Compare(a.status, b.status))
		})
		counts := make([]int, len(order))
		for j, k := range order {
			counts[j] = len(scheds[k])
		}
		for j, m := range store.ShareTurns(counts, n) {
			cand = append(cand, scheds[order[j]][:m]...)
		}
	}
	out := make([]*model.Event, len(cand))
	for i, e := range cand {
		takenOver := e.Status == model.EventScheduled
		e.Status, e.Fence = model.EventScheduled, p.Fence
		out[i] = cloneEvent(e)
		out[i].TakenOver = takenOver
	}
	return out, nil
}

// EventTransition follows store.EventStore.EventTransition.
func (s *MemStore) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	out := make([]error, len(ts))
	for i, t := range ts {
		if t.RequiresPrevious && (i == 0 || out[i-1] != nil) {
			out[i] = model.ErrConflict
			continue
		}
		e, ok := s.events[t.ID]
		if !ok {
			out[i] = model.ErrNotFound
			continue
		}
		if t.Conflicts(e) {
			out[i] = model.ErrConflict
			continue
		}
		t.Apply(e)
	}
	return out, nil
}

// EventFindTokenExpired follows the store contract.
func (s *MemStore) EventFindTokenExpired(ctx context.Context, policyID string, t time.Time, limit int) ([]*model.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var out []*model.Event
	for _, e := range s.events {
		if e.PolicyID == policyID && e.Status.HoldsToken() && e.TokenExpiresAt != nil && e.TokenExpiresAt.Before(t) {
			out = append(out, cloneEvent(e))
		}
	}
	slices.SortFunc(out, func(a, b *model.Event) int {
		return cmp.Or(a.TokenExpiresAt.Compare(*b.TokenExpiresAt), cmp.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// EventCountHoldingTokens follows the store contract.
func (s *MemStore) EventCountHoldingTokens(ctx context.Context, policyID string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	return s.holdingLocked(policyID), nil
}

func (s *MemStore) holdingLocked(policyID string) int {
	n := 0
	for _, e := range s.events {
		if e.PolicyID == policyID && e.Status.HoldsToken() {
			n++
		}
	}
	return n
}

// EventDeleteFinishedBefore follows the store contract.
func (s *MemStore) EventDeleteFinishedBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	n := 0
	for id, e := range s.events {
		if (e.Status == model.EventReleased || e.Status == model.EventCancelled) && e.FinishedAt != nil && e.FinishedAt.Before(t) {
			delete(s.events, id)
			n++
			if n >= limit {
				break
			}
		}
	}
	return n, nil
}

// PolicyCreate inserts p.
func (s *MemStore) PolicyCreate(ctx context.Context, p *model.Policy) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, ok := s.policies[p.ID]; ok {
		return model.ErrConflict
	}
	c := *p
	s.policies[p.ID] = &c
	return nil
}

// PolicyGetByID returns a copy of the policy.
func (s *MemStore) PolicyGetByID(ctx context.Context, id string) (*model.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	p, ok := s.policies[id]
	if !ok {
		return nil, model.ErrNotFound
	}
	c := *p
	return &c, nil
}

// PolicyListAll lists every policy.
func (s *MemStore) PolicyListAll(ctx context.Context) ([]*model.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	out := make([]*model.Policy, 0, len(s.policies))
	for _, p := range s.policies {
		c := *p
		out = append(out, &c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// PolicyAcquireTokens follows the store contract. Like the embedded driver,
// token operations do not change Version.
func (s *MemStore) PolicyAcquireTokens(ctx context.Context, policyID string, want int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	p, ok := s.policies[policyID]
	if !ok {
		return 0, model.ErrNotFound
	}
	n := min(want, p.TokenCap()-p.InUse)
	if n <= 0 {
		return 0, nil
	}
	p.InUse += n
	s.maxInUse[policyID] = max(s.maxInUse[policyID], p.InUse)
	return n, nil
}

// PolicyReleaseTokens follows the store contract.
func (s *MemStore) PolicyReleaseTokens(ctx context.Context, policyID string, n int, timedOut int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	p, ok := s.policies[policyID]
	if !ok {
		return model.ErrNotFound
	}
	p.InUse = max(p.InUse-n, 0)
	p.TimedOut += int64(timedOut)
	return nil
}

// PolicySetInUse follows the store contract.
func (s *MemStore) PolicySetInUse(ctx context.Context, policyID string, expectedVersion int64, expectedInUse, inUse int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	p, ok := s.policies[policyID]
	if !ok {
		return model.ErrNotFound
	}
	if p.Version != expectedVersion || p.InUse != expectedInUse {
		return model.ErrConflict
	}
	p.InUse = max(inUse, 0)
	return nil
}

// SetInUse overwrites a policy's InUse behind the throttle's back (to
// simulate a leaked or lost count).
func (s *MemStore) SetInUse(policyID string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.policies[policyID]; ok {
		p.InUse = n
	}
}
