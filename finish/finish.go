// Package finish follows watched fires until every event of theirs has
// finished (released, dead or cancelled) and then does what waits for
// that: the notifications of the fire's schedule and the fires of the
// schedules that fire after it.
//
// # Detection
//
// A fire is watched (model.Fire.Watched) when its schedule has
// notifications or dependent schedules (the emitter asks the Finisher,
// an emitter.Watcher, when it records the fire). The store keeps an index
// of watched fires that are not finished (FireListWatched). Every
// instance sweeps that index every Interval: a fire whose events are all
// written (Remaining 0) and all finished is acted upon, then marked
// finished (FireSetFinished) and leaves the index.
//
// Everything the sweep writes has an id derived from the fire's: a
// notification event model.EventID(model.NotificationFireID(fire, kind),
// receiver), a dependent's fire model.AfterFireID(dependent, fire), and
// both are written insert-if-absent. So a crash between the writes and the
// mark, or two instances sweeping the same fire, writes each of them once:
// the next sweep finds the fire still in the index and writes nothing new.
package finish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Store is what the finisher needs of the store (store.Driver has it).
type Store interface {
	FireListWatched(ctx context.Context, after string, limit int) ([]*model.Fire, error)
	FireWatch(ctx context.Context, id string) error
	FireSetFinished(ctx context.Context, id string, at time.Time) (bool, error)
	FireList(ctx context.Context, p *store.FireListParams) ([]*model.Fire, error)
	EventCountByFire(ctx context.Context, fireID string) (store.EventCounts, error)
	EventLastFinished(ctx context.Context, fireID string) (*time.Time, error)
	EventInsertMany(ctx context.Context, events []*model.Event) (int, error)
	ScheduleGetMany(ctx context.Context, ids []string) ([]*model.Schedule, error)
	ScheduleListAfter(ctx context.Context, p *store.ScheduleListAfterParams) ([]*model.Schedule, error)
	TenantList(ctx context.Context, p *store.TenantListParams) ([]*model.Tenant, error)
}

// Emitter records a dependent schedule's fire (*emitter.Emitter has it).
type Emitter interface {
	After(ctx context.Context, s *model.Schedule, up *model.Fire, at time.Time, deadline *time.Time) (*model.Fire, bool, error)
}

// Config tunes the finisher. Zero values take the defaults.
type Config struct {
	// Interval between sweeps (default 2s).
	Interval time.Duration
	// Shards is the number of event queue shards (as the emitter's).
	Shards int
	// NotifyAttempts bounds the attempts of a notification (default 5).
	NotifyAttempts int
	// Page is how many watched fires one store read returns (default 500).
	Page int
	// Partitions is P, the emitter's number of partitions (with
	// Deps.Partitions).
	Partitions int
	// Fresh is how long after a dependent schedule is saved the sweep
	// looks for its upstream's fires recorded before every instance knew
	// of it (default 5m: longer than the emitter's lead).
	Fresh time.Duration
}

// Deps are the finisher's collaborators.
type Deps struct {
	Store   Store
	Emitter Emitter
	Clock   clockwork.Clock
	Logger  zerolog.Logger
	// ReleaseToken makes a notification event's release token from its
	// id, as the emitter's (nil: none; a notification holds no token).
	ReleaseToken func(eventID string) string
	// Partitions, if set, are the emitter partitions this instance holds
	// (*lease.Balancer): a sweep acts only on the fires of their
	// schedules, so that instances share the work. Nil: every fire.
	Partitions interface{ Held() map[int]int64 }
}

// Finisher sweeps watched fires. Safe for concurrent use.
type Finisher struct {
	cfg  Config
	deps Deps
	log  zerolog.Logger

	mu        sync.RWMutex
	upstreams map[string]bool           // schedules that have dependents
	tenants   map[string][]model.Notify // tenants' own receivers
}

// New returns a Finisher.
func New(cfg Config, deps Deps) (*Finisher, error) {
	if deps.Store == nil {
		return nil, errors.New("finish: a store is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.NotifyAttempts <= 0 {
		cfg.NotifyAttempts = 5
	}
	if cfg.Page <= 0 {
		cfg.Page = 500
	}
	if cfg.Fresh <= 0 {
		cfg.Fresh = 5 * time.Minute
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	return &Finisher{cfg: cfg, deps: deps, log: deps.Logger.With().Str(logkey.Component, "finisher").Logger(), upstreams: map[string]bool{}}, nil
}

// UseEmitter sets the emitter that records dependents' fires (the
// emitter is built after the finisher, which it asks Watched).
func (f *Finisher) UseEmitter(e Emitter) { f.deps.Emitter = e }

// Watched reports whether the new fires of s are to be watched: s has
// notifications or dependent schedules (as of the last sweep; the sweep
// also watches the fires recorded before it knew of a new dependent).
func (f *Finisher) Watched(s *model.Schedule) bool {
	if len(s.Notify) > 0 {
		return true
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.upstreams[s.ID] || len(f.tenants[s.TenantID]) > 0
}

// watchSince marks watched the fires of upstreamID (the newest page of
// them) whose fire time or recording is at or after since: fires the
// emitter recorded before it knew of a dependent saved at since, ahead of
// their time, or a trigger right after the save (whose fire time is
// truncated to the second).
func (f *Finisher) watchSince(ctx context.Context, tenantID, upstreamID string, since time.Time) error {
	fs, err := f.deps.Store.FireList(ctx, &store.FireListParams{TenantID: tenantID, ScheduleID: upstreamID, Limit: 50})
	if err != nil {
		return fmt.Errorf("finish: fires of %s: %w", upstreamID, err)
	}
	for _, fr := range fs {
		if fr.Watched || fr.FireTime.Before(since) && fr.CreatedAt.Before(since) {
			continue
		}
		if err := f.deps.Store.FireWatch(ctx, fr.ID); err != nil && !errors.Is(err, model.ErrNotFound) {
			return fmt.Errorf("finish: watch %s: %w", fr.ID, err)
		}
	}
	return nil
}

// Stats counts what one sweep did.
type Stats struct {
	Looked, Finished, Notified, AfterFires int
}

// Sweep runs one pass: it refreshes the dependents, then acts on every
// watched fire that has finished.
func (f *Finisher) Sweep(ctx context.Context) (Stats, error) {
	var st Stats
	deps, err := f.refresh(ctx)
	if err != nil {
		return st, err
	}
	var errs []error
	after := ""
	for {
		fs, err := f.deps.Store.FireListWatched(ctx, after, f.cfg.Page)
		if err != nil {
			return st, fmt.Errorf("finish: list watched fires: %w", err)
		}
		if len(fs) == 0 {
			break
		}
		after = fs[len(fs)-1].ID
		full := len(fs) == f.cfg.Page
		fs = f.mine(fs)
		scheds, err := f.schedules(ctx, fs, deps)
		if err != nil {
			return st, err
		}
		for _, fr := range fs {
			st.Looked++
			if err := f.one(ctx, fr, scheds, deps[fr.ScheduleID], &st); err != nil {
				errs = append(errs, err)
				f.log.Warn().Err(err).Str(logkey.Fire, fr.ID).Msg("finishing a fire failed; the next sweep retries")
			}
		}
		if !full {
			break
		}
	}
	return st, errors.Join(errs...)
}

// mine keeps the fires of fs whose schedule's partition this instance
// holds (all of them without Deps.Partitions); fs is reused.
func (f *Finisher) mine(fs []*model.Fire) []*model.Fire {
	if f.deps.Partitions == nil {
		return fs
	}
	held := f.deps.Partitions.Held()
	out := fs[:0]
	for _, fr := range fs {
		if _, ok := held[model.PartitionOf(fr.ScheduleID, f.cfg.Partitions)]; ok {
			out = append(out, fr)
		}
	}
	return out
}

// refresh reads every dependent schedule, keeps the set of upstreams for
// Watched, and watches the upstream fires that a dependent saved lately
// may have missed. It returns the dependents by upstream.
func (f *Finisher) refresh(ctx context.Context) (map[string][]string, error) {
	deps := map[string][]string{}
	now := f.deps.Clock.Now()
	after := ""
	for {
		ss, err := f.deps.Store.ScheduleListAfter(ctx, &store.ScheduleListAfterParams{After: after, Limit: 1000})
		if err != nil {
			return nil, fmt.Errorf("finish: list dependent schedules: %w", err)
		}
		for _, s := range ss {
			if s.After == nil {
				continue
			}
			deps[s.After.ScheduleID] = append(deps[s.After.ScheduleID], s.ID)
			if now.Sub(s.UpdatedAt) < f.cfg.Fresh {
				if err := f.watchSince(ctx, s.TenantID, s.After.ScheduleID, s.UpdatedAt); err != nil {
					return nil, err
				}
			}
		}
		if len(ss) < 1000 {
			break
		}
		after = ss[len(ss)-1].ID
	}
	up := make(map[string]bool, len(deps))
	for id := range deps {
		up[id] = true
	}
	tenants := map[string][]model.Notify{}
	for after := ""; ; {
		ts, err := f.deps.Store.TenantList(ctx, &store.TenantListParams{After: after, Limit: 1000})
		if err != nil {
			return nil, fmt.Errorf("finish: list tenants: %w", err)
		}
		for _, t := range ts {
			if len(t.Notify) > 0 {
				tenants[t.ID] = t.Notify
			}
		}
		if len(ts) < 1000 {
			break
		}
		after = ts[len(ts)-1].ID
	}
	f.mu.Lock()
	f.upstreams, f.tenants = up, tenants
	f.mu.Unlock()
	return deps, nil
}

// schedules reads the schedules of fs and their dependents, by id.
func (f *Finisher) schedules(ctx context.Context, fs []*model.Fire, deps map[string][]string) (map[string]*model.Schedule, error) {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, fr := range fs {
		add(fr.ScheduleID)
		for _, d := range deps[fr.ScheduleID] {
			add(d)
		}
	}
	ss, err := f.deps.Store.ScheduleGetMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("finish: read schedules: %w", err)
	}
	out := make(map[string]*model.Schedule, len(ss))
	for _, s := range ss {
		out[s.ID] = s
	}
	return out, nil
}

// skipped reports whether a fire of decision d has no events by design.
func skipped(d model.FireDecision) bool {
	return d == model.FireSkippedOverlap || d == model.FireSkippedManual || d == model.FireSkippedCalendar
}

// Counts reads the counts of the fire fr's events.
func (f *Finisher) Counts(ctx context.Context, fr *model.Fire) (model.FireCounts, error) {
	c := model.FireCounts{Count: fr.Count}
	if skipped(fr.Decision) {
		c.Count = 0
		return c, nil
	}
	counts, err := f.deps.Store.EventCountByFire(ctx, fr.ID)
	if err != nil {
		return c, fmt.Errorf("finish: count events of %s: %w", fr.ID, err)
	}
	for status, n := range counts {
		switch status {
		case model.EventReleased:
			c.Released += n
		case model.EventDead:
			c.Dead += n
		case model.EventCancelled:
			c.Cancelled += n
		default:
			if status.Finished() {
				c.Expired += n
			} else {
				c.Waiting += n
			}
		}
	}
	if strings.Contains(fr.Note, "emission stopped after ") {
		// Abandoned: the events never written will not come.
		c.Count = min(c.Count, c.Released+c.Dead+c.Cancelled+c.Expired+c.Waiting)
	}
	return c, nil
}

// one acts on the watched fire fr.
func (f *Finisher) one(ctx context.Context, fr *model.Fire, scheds map[string]*model.Schedule, dependents []string, st *Stats) error {
	if fr.Remaining > 0 {
		return nil // still being written
	}
	s := scheds[fr.ScheduleID]
	c, err := f.Counts(ctx, fr)
	if err != nil {
		return err
	}
	now := f.deps.Clock.Now()
	if skipped(fr.Decision) {
		if err := f.notify(ctx, model.NotifySkipped, fr, s, c, now, st); err != nil {
			return err
		}
		return f.mark(ctx, fr, now, st)
	}
	if c.Dead > 0 {
		if err := f.notify(ctx, model.NotifyEventDead, fr, s, c, now, st); err != nil {
			return err
		}
	}
	if !c.Finished() {
		return nil
	}
	at := now
	if last, err := f.deps.Store.EventLastFinished(ctx, fr.ID); err != nil {
		return fmt.Errorf("finish: last finish of %s: %w", fr.ID, err)
	} else if last != nil {
		at = *last
	}
	if c.Dead > 0 {
		if err := f.notify(ctx, model.NotifyHasDead, fr, s, c, at, st); err != nil {
			return err
		}
	}
	if err := f.notify(ctx, model.NotifyFinished, fr, s, c, at, st); err != nil {
		return err
	}
	if err := f.fireDependents(ctx, fr, s, c, at, scheds, dependents, st); err != nil {
		return err
	}
	return f.mark(ctx, fr, at, st)
}

func (f *Finisher) mark(ctx context.Context, fr *model.Fire, at time.Time, st *Stats) error {
	set, err := f.deps.Store.FireSetFinished(ctx, fr.ID, at)
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return fmt.Errorf("finish: mark %s finished: %w", fr.ID, err)
	}
	if set {
		st.Finished++
	}
	return nil
}

// fireDependents records the fires of the active dependents of fr's
// schedule that want it.
func (f *Finisher) fireDependents(ctx context.Context, fr *model.Fire, up *model.Schedule, c model.FireCounts, at time.Time, scheds map[string]*model.Schedule, dependents []string, st *Stats) error {
	if len(dependents) == 0 {
		return nil
	}
	if model.AfterDepth(fr.ID) >= model.MaxAfterDepth {
		f.log.Warn().Str(logkey.Fire, fr.ID).Msg("dependency chain too deep: dependents not fired")
		return nil
	}
	for _, id := range dependents {
		d := scheds[id]
		if d == nil || d.After == nil || d.After.ScheduleID != fr.ScheduleID || d.TenantID != fr.TenantID {
			continue
		}
		if d.State != model.ScheduleActive && d.State != "" {
			continue
		}
		if d.After.When == model.AfterSucceeded && !c.Succeeded() {
			continue
		}
		if f.deps.Emitter == nil {
			return errors.New("finish: no emitter for dependent schedules")
		}
		_, inserted, err := f.deps.Emitter.After(ctx, d, fr, at, Deadline(up, fr))
		if err != nil {
			return fmt.Errorf("finish: fire %s after %s: %w", d.ID, fr.ID, err)
		}
		if inserted {
			st.AfterFires++
		}
	}
	return nil
}

// Deadline is the deadline of the fire fr of s that its dependents'
// fires inherit: the fire's own (model.Fire.Deadline), or, for a fire
// recorded without one, the end of s's window from the fire's launch;
// nil for neither.
func Deadline(s *model.Schedule, fr *model.Fire) *time.Time {
	if fr.Deadline != nil {
		d := *fr.Deadline
		return &d
	}
	if s == nil || s.Window <= 0 {
		return nil
	}
	d := fr.FireTime.Add(fr.Jitter).Add(s.Window)
	return &d
}

// Notify writes the notification of kind k about the fire fr to every
// receiver of its schedule that wants k, once: a second call (another
// instance, a retry) writes nothing. Other parts call it for the kinds
// they detect (fire.deadline_missed).
func (f *Finisher) Notify(ctx context.Context, k model.NotifyKind, fr *model.Fire) error {
	ss, err := f.deps.Store.ScheduleGetMany(ctx, []string{fr.ScheduleID})
	if err != nil {
		return fmt.Errorf("finish: read schedule %s: %w", fr.ScheduleID, err)
	}
	var s *model.Schedule
	if len(ss) == 1 {
		s = ss[0]
	}
	c, err := f.Counts(ctx, fr)
	if err != nil {
		return err
	}
	var st Stats
	return f.notify(ctx, k, fr, s, c, f.deps.Clock.Now(), &st)
}

// notify writes the notification events of kind k about fr to the
// receivers of s (nil: deleted) and of its tenant that want it.
func (f *Finisher) notify(ctx context.Context, k model.NotifyKind, fr *model.Fire, s *model.Schedule, c model.FireCounts, at time.Time, st *Stats) error {
	var to []model.Notify
	if s != nil && s.TenantID == fr.TenantID {
		for _, n := range s.Notify {
			if n.Wants(k) {
				to = append(to, n)
			}
		}
	}
	f.mu.RLock()
	for _, n := range f.tenants[fr.TenantID] {
		if n.Wants(k) {
			to = append(to, n)
		}
	}
	f.mu.RUnlock()
	if len(to) == 0 {
		return nil
	}
	nfid := model.NotificationFireID(fr.ID, k)
	body, err := json.Marshal(model.Notification{
		ID: nfid, Kind: k, TenantID: fr.TenantID, ScheduleID: fr.ScheduleID, FireID: fr.ID,
		FireTime: fr.FireTime, Decision: fr.Decision, Note: fr.Note, Counts: c, At: at.UTC(),
	})
	if err != nil {
		return fmt.Errorf("finish: notification %s: %w", nfid, err)
	}
	now := f.deps.Clock.Now().UTC()
	evs := make([]*model.Event, len(to))
	for i, n := range to {
		ev := &model.Event{
			ID:          model.EventID(nfid, i),
			TenantID:    fr.TenantID,
			ScheduleID:  NotifyScheduleID(fr.ScheduleID),
			FireID:      nfid,
			FireTime:    fr.FireTime,
			Index:       i,
			Count:       len(to),
			LaunchAt:    now,
			Target:      n.Target(),
			Payload:     body,
			MaxAttempts: f.cfg.NotifyAttempts,
			Status:      model.EventPending,
			CreatedAt:   now,
			UpdatedAt:   now,
		}
		if f.deps.ReleaseToken != nil {
			ev.ReleaseToken = f.deps.ReleaseToken(ev.ID)
		}
		ev.Shard = model.ShardOf(ev, f.cfg.Shards)
		evs[i] = ev
	}
	n, err := f.deps.Store.EventInsertMany(ctx, evs)
	if err != nil {
		return fmt.Errorf("finish: write notification %s: %w", nfid, err)
	}
	if n > 0 {
		st.Notified++
	}
	return nil
}

// NotifyScheduleID is the schedule id notification events of schedule id
// carry: apart from the schedule's own events, so that an edit, a pause or
// a delete of the schedule (which cancel its waiting events) does not
// cancel them, and so that they wait in a queue of their own.
func NotifyScheduleID(id string) string { return id + "~notify" }
