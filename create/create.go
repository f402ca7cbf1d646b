// Package create is the use case that creates schedules: a batch of them,
// a single create being a batch of one. It gives each new schedule its id,
// version, state and timestamps; replays the answers of items created
// before under the same idempotency key and records the new ones; asks the
// disk guard for the room the write needs; reserves the tenant's quotas;
// and has the emitter plan the schedules' first fires, which the store
// writes in the schedules' own commit. What a create is asked in (HTTP,
// JSON) and how it is answered are the caller's.
package create

import (
	"context"
	"errors"
	"fmt"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/internal/guard"
	"github.com/schedulerd/schedulerd/internal/idempotency"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
	"github.com/schedulerd/schedulerd/store"
)

// Store is the part of the storage contract a create writes through.
type Store interface {
	ScheduleCreateMany(ctx context.Context, items []store.ScheduleNew) ([]error, error)
	ScheduleGet(ctx context.Context, tenantID, id string) (*model.Schedule, error)
}

// Planner plans the first fires of new schedules (the emitter). fires[i]
// are written with ss[i] in its commit (nil: none). done takes the
// write's outcome: errs[i] nil when ss[i] was stored with fires[i];
// recovered[i], when recovered and it are not nil, is the schedule an
// earlier request stored under ss[i]'s id. done emits what was not written with its schedule
// (cron fires, large or deferred fires, the fires of recovered
// schedules), gives back what failed items reserved, and fails when that
// emission does: the caller's retry finishes it (emission is idempotent).
type Planner interface {
	PlanCreates(ctx context.Context, ss []*model.Schedule, keys [][]cron.Key) (fires [][]store.FireNew, done func(ctx context.Context, errs []error, recovered []*model.Schedule) error, err error)
}

// DiskGuard says whether the store's disk has room for a write of about
// need bytes, and if not why.
type DiskGuard interface {
	DiskStatusFor(need uint64) (ok bool, reason string)
}

// DiskFullError refuses a create the disk has no room for.
type DiskFullError struct{ Reason string }

func (e *DiskFullError) Error() string { return e.Reason }

// ErrConflict: an item's id exists and is not the item's (an id taken by
// another object).
var ErrConflict = fmt.Errorf("the item conflicts with an existing object: %w", model.ErrConflict)

// Deps are a Service's collaborators.
type Deps struct {
	Store   Store                // required
	Records *idempotency.Records // required
	IDs     *model.IDSource      // required
	// Planner may be nil: then nothing is emitted on create.
	Planner Planner
	// Disk may be nil: no guard.
	Disk   DiskGuard
	Clock  clockwork.Clock // defaults to the real clock
	Logger zerolog.Logger
	// Partitions is the number of emitter partitions new schedules are
	// spread over (model.PartitionOf).
	Partitions int
	// MaxChildren bounds the children of a schedule compiled again
	// (schedule.FromSchedule).
	MaxChildren int
}

// Service creates schedules.
type Service struct{ d Deps }

// New returns the service of deps.
func New(deps Deps) (*Service, error) {
	if deps.Store == nil || deps.Records == nil || deps.IDs == nil {
		return nil, errors.New("create: Deps.Store, Records and IDs are required")
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	return &Service{d: deps}, nil
}

// Item is one schedule to create.
type Item struct {
	// Compiled is the item's validated definition; nil when Err is set.
	Compiled *schedule.Compiled
	// Key is the item's idempotency key in the request's scope ("": none)
	// and Hash identifies what the key was given with (idempotency.Hash).
	Key, Hash string
	// Size is the item's part of the request, in bytes: the disk guard's
	// estimate of its write starts from it (guard.WriteNeed).
	Size int
	// Err is the item's failure found by the caller (a client error): the
	// item is answered with it.
	Err error
}

// Request is one create of Items by a tenant.
type Request struct {
	TenantID string
	// Scope is where the items' idempotency keys live (the caller's).
	Scope string
	Items []Item
	// Reserve takes the tenant's room (its quotas) for one new schedule
	// whose fires hold events events, or refuses it with a client error;
	// called for each item in order, after replays and the disk guard.
	Reserve func(ctx context.Context, events int) error
	// Answer renders a created schedule as the answer recorded under its
	// item's key (only keyed items are rendered).
	Answer func(m *model.Schedule, comp *schedule.Compiled) (idempotency.Answer, error)
}

// Result is the outcome of one item: Schedule created (or Recovered: an
// earlier request with the item's key stored it), Replay (the answer an
// earlier request recorded under its key), or Err (a client error, such
// as Item.Err, a quota's refusal, idempotency.ErrReused).
type Result struct {
	Schedule  *model.Schedule
	Compiled  *schedule.Compiled
	Recovered bool
	Replay    *idempotency.Answer
	Err       error
}

// Create creates the items of r and returns one result per item. An error
// fails the whole request (the store's, the disk guard's
// *DiskFullError, the emission's after the write): items already stored
// are found again by a retry with the same keys.
func (s *Service) Create(ctx context.Context, r *Request) ([]Result, error) {
	res := make([]Result, len(r.Items))
	for i := range r.Items {
		res[i].Err = r.Items[i].Err
	}
	if err := s.replay(ctx, r, res); err != nil {
		return nil, err
	}
	if err := s.checkDisk(r, res); err != nil {
		return nil, err
	}
	for i, it := range r.Items {
		if pending(res[i]) {
			if err := r.Reserve(ctx, it.Compiled.Schedule.EventCount); err != nil {
				res[i].Err = err
			}
		}
	}
	if err := s.write(ctx, r, res); err != nil {
		return nil, err
	}
	return res, s.record(ctx, r, res)
}

// pending reports whether the item of r is still to be written.
func pending(r Result) bool { return r.Schedule == nil && r.Replay == nil && r.Err == nil }

// replay answers the pending keyed items recorded before with their
// record.
func (s *Service) replay(ctx context.Context, r *Request, res []Result) error {
	for i, it := range r.Items {
		if it.Key == "" || !pending(res[i]) {
			continue
		}
		a, err := s.d.Records.Get(ctx, r.Scope, it.Key, it.Hash)
		switch {
		case errors.Is(err, idempotency.ErrReused), errors.Is(err, idempotency.ErrUnreadable):
			res[i].Err = err
		case err != nil:
			return err
		case a != nil:
			res[i].Replay = a
		}
	}
	return nil
}

// checkDisk asks the disk guard for the room the pending items need.
func (s *Service) checkDisk(r *Request, res []Result) error {
	if s.d.Disk == nil {
		return nil
	}
	var need uint64
	for i, it := range r.Items {
		if !pending(res[i]) {
			continue
		}
		events := 0
		if it.Compiled.Schedule.RunAt != nil {
			events = it.Compiled.Schedule.EventCount // written in the same commit
		}
		need += guard.WriteNeed(it.Size, events)
	}
	if ok, reason := s.d.Disk.DiskStatusFor(need); !ok {
		return &DiskFullError{Reason: reason}
	}
	return nil
}

// write stores the pending items with the fires the planner plans for
// them, recovers those an earlier request stored, and has the rest of
// their fires emitted.
func (s *Service) write(ctx context.Context, r *Request, res []Result) error {
	var at []int // news[j] is item at[j]
	for i := range res {
		if pending(res[i]) {
			at = append(at, i)
		}
	}
	if len(at) == 0 {
		return nil
	}
	now := s.d.Clock.Now().UTC()
	unkeyed := 0
	for _, i := range at {
		if r.Items[i].Key == "" {
			unkeyed++
		}
	}
	ids := s.d.IDs.NewN(r.Scope, model.PrefixSchedule, now, unkeyed)
	news := make([]store.ScheduleNew, len(at))
	ss := make([]*model.Schedule, len(at))
	keys := make([][]cron.Key, len(at))
	for j, i := range at {
		it := &r.Items[i]
		m := it.Compiled.Schedule
		if it.Key != "" {
			m.ID = model.KeyedID(model.PrefixSchedule, r.Scope, it.Key)
		} else {
			m.ID, ids = ids[0], ids[1:]
		}
		m.TenantID = r.TenantID
		m.Partition = model.PartitionOf(m.ID, s.d.Partitions)
		m.Version, m.State = 1, model.ScheduleActive
		m.CreatedAt, m.UpdatedAt = now, now
		ss[j], keys[j] = &m, it.Compiled.Keys
		news[j] = store.ScheduleNew{Schedule: &m, Children: it.Compiled.Children(&m)}
	}

	// The plan outlives the request: what it emits is not cut short when
	// the client gives up.
	pctx := context.WithoutCancel(ctx)
	done := func(context.Context, []error, []*model.Schedule) error { return nil }
	if s.d.Planner != nil {
		fires, d, err := s.d.Planner.PlanCreates(pctx, ss, keys)
		if err != nil {
			return fmt.Errorf("plan the fires of %d schedules: %w", len(ss), err)
		}
		for j := range news {
			news[j].Fires = fires[j]
		}
		done = d
	}
	errs, err := s.d.Store.ScheduleCreateMany(ctx, news)
	if err == nil && len(errs) != len(news) {
		err = fmt.Errorf("the store reported %d results of %d schedules", len(errs), len(news))
	}
	if err != nil {
		all := make([]error, len(news))
		for j := range all {
			all[j] = err
		}
		_ = done(pctx, all, nil)
		return err
	}
	var recovered []*model.Schedule // made when an item conflicts
	var conflicted bool
	for j, i := range at {
		switch {
		case errs[j] == nil:
			res[i].Schedule, res[i].Compiled = ss[j], r.Items[i].Compiled
		case errors.Is(errs[j], model.ErrConflict) && r.Items[i].Key != "":
			res[i].Err, conflicted = errs[j], true
		case errors.Is(errs[j], model.ErrConflict):
			res[i].Err = ErrConflict
		default:
			res[i].Err = errs[j]
		}
	}
	if conflicted {
		recovered = make([]*model.Schedule, len(news))
		// A concurrent request with the same key (its record comes), or
		// an earlier one that stored the item and failed before recording
		// it (recovered from the store).
		if err := s.settle(ctx, r, res, at, ss, recovered); err != nil {
			_ = done(pctx, errs, recovered)
			return err
		}
	}
	if err := done(pctx, errs, recovered); err != nil {
		s.d.Logger.Warn().Err(err).Int("schedules", len(ss)).Msg("emitting the fires of new schedules failed")
		return fmt.Errorf("schedules stored, their fires not emitted yet: %w", err)
	}
	return nil
}

// settle answers the keyed items whose id exists: with the record of a
// concurrent request once it comes, else with the schedule stored under
// the id (recovered[j] for news[j], item at[j]).
func (s *Service) settle(ctx context.Context, r *Request, res []Result, at []int, ss, recovered []*model.Schedule) error {
	var (
		ws   []idempotency.Wanted
		wait []int // ws[k] is news[wait[k]]
	)
	for j, i := range at {
		if errors.Is(res[i].Err, model.ErrConflict) && r.Items[i].Key != "" && res[i].Err != ErrConflict {
			ws = append(ws, idempotency.Wanted{Key: r.Items[i].Key, Hash: r.Items[i].Hash})
			wait = append(wait, j)
		}
	}
	found, err := s.d.Records.AwaitAll(ctx, r.Scope, ws)
	if err != nil {
		return err
	}
	for k, f := range found {
		j := wait[k]
		i := at[j]
		switch {
		case f.Answer != nil:
			res[i] = Result{Replay: f.Answer}
		case f.Err != nil:
			res[i] = Result{Err: f.Err}
		default:
			m, comp, err := s.recover(ctx, r.TenantID, ss[j].ID)
			if err != nil {
				return err
			}
			if m == nil {
				res[i].Err = ErrConflict
				continue
			}
			recovered[j] = m
			res[i] = Result{Schedule: m, Compiled: comp, Recovered: true}
		}
	}
	return nil
}

// recover returns the tenant's stored schedule id, compiled; nil when it
// does not exist.
func (s *Service) recover(ctx context.Context, tenantID, id string) (*model.Schedule, *schedule.Compiled, error) {
	m, err := s.d.Store.ScheduleGet(ctx, tenantID, id)
	if errors.Is(err, model.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	comp, err := schedule.FromSchedule(m, s.d.MaxChildren)
	if err != nil {
		return nil, nil, fmt.Errorf("recover schedule %s: %w", id, err)
	}
	return m, comp, nil
}

// record stores the answers of the keyed items created; an item whose key
// a concurrent request recorded first gets that request's answer.
func (s *Service) record(ctx context.Context, r *Request, res []Result) error {
	var (
		es []idempotency.Entry
		at []int
	)
	for i, it := range r.Items {
		if it.Key == "" || res[i].Schedule == nil {
			continue
		}
		a, err := r.Answer(res[i].Schedule, res[i].Compiled)
		if err != nil {
			return err
		}
		es = append(es, idempotency.Entry{Scope: r.Scope, Key: it.Key, Hash: it.Hash, Answer: a})
		at = append(at, i)
	}
	if len(es) == 0 {
		return nil
	}
	found, err := s.d.Records.Put(ctx, es)
	if err != nil {
		// The schedules exist; a retry finds them (recover).
		s.d.Logger.Warn().Err(err).Int("records", len(es)).Msg("storing the idempotency records of new schedules failed")
		return nil
	}
	for j, f := range found {
		switch {
		case f.Answer != nil:
			res[at[j]] = Result{Replay: f.Answer}
		case f.Err != nil:
			res[at[j]] = Result{Err: f.Err}
		}
	}
	return nil
}
