// Package store declares the persistence contract of schedulerd.
//
// Driver is implemented by store/embedded (the zero-setup default, one
// process) and store/mongo (MongoDB for many instances). store/storetest is
// the one conformance suite that both drivers run; new behaviour is added to
// the suite, never to one driver's tests.
//
// The contract is written for stores without multi-document transactions:
// every state change is one conditional single-document write
// (compare-and-set on status, version or fence). Multi-document operations
// (bulk inserts, cancelling a schedule's events) are a loop of such writes and
// are safe to repeat after a crash.
//
// Methods that serve the public API take a TenantID and never see another
// tenant's rows: a row of another tenant is reported as model.ErrNotFound.
// Methods used by the background services (emitter, handler) are
// cross-tenant by design and say so.
//
// Errors: drivers translate their own errors to model.ErrNotFound,
// model.ErrConflict and model.ErrUnavailable (store unreachable, timeouts).
// Every method documents which of them it returns; any other error is a bug.
package store

import (
	"context"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// Driver is the whole storage contract. Services do not depend on it: each
// declares the few methods it calls (see emitter.Store, handler.Store,
// master.Store).
type Driver interface {
	TenantStore
	ScheduleStore
	FireStore
	EventStore
	PolicyStore
	CalendarStore
	LeaseStore
	AuditStore
	// Ping returns nil when the store is reachable, else model.ErrUnavailable.
	Ping(ctx context.Context) error
	// Close releases the driver's resources. Safe to call twice.
	Close() error
}

// TenantStore keeps tenants, hashed API keys and idempotency records.
type TenantStore interface {
	// TenantCreate inserts t. ErrConflict if the id exists.
	TenantCreate(ctx context.Context, t *model.Tenant) error
	// TenantGet returns ErrNotFound for an unknown id.
	TenantGet(ctx context.Context, id string) (*model.Tenant, error)
	// TenantUpdate replaces the stored tenant t.ID if its Version is
	// expectedVersion; t.Version is the caller's new version. ErrNotFound
	// for an unknown id, ErrConflict when the version differs.
	TenantUpdate(ctx context.Context, t *model.Tenant, expectedVersion int64) error
	// TenantList pages through the tenants, ordered by id.
	TenantList(ctx context.Context, p *TenantListParams) ([]*model.Tenant, error)
	// APIKeyCreate inserts k. ErrConflict if the id or hash exists.
	APIKeyCreate(ctx context.Context, k *model.APIKey) error
	// APIKeyGetByHash finds a key by its hash, revoked or not.
	// ErrNotFound if none.
	APIKeyGetByHash(ctx context.Context, hash string) (*model.APIKey, error)
	// APIKeyList lists a tenant's keys, oldest first.
	APIKeyList(ctx context.Context, tenantID string) ([]*model.APIKey, error)
	// APIKeyRevoke sets RevokedAt. ErrNotFound if the key is not the tenant's.
	// Revoking twice keeps the first time.
	APIKeyRevoke(ctx context.Context, tenantID, keyID string, at time.Time) error
	// IdempotencyPut stores r if no record has (TenantID, Key); otherwise it
	// stores nothing and returns the existing record and ErrConflict.
	IdempotencyPut(ctx context.Context, r *model.IdempotencyRecord) (*model.IdempotencyRecord, error)
	// IdempotencyPutMany is IdempotencyPut for many records in one write
	// (one commit where the store has transactions). existing has one entry
	// per record: nil when it was stored, else the record that already has
	// its (TenantID, Key) (also one earlier in rs), which stays.
	IdempotencyPutMany(ctx context.Context, rs []*model.IdempotencyRecord) (existing []*model.IdempotencyRecord, err error)
	// IdempotencyGet returns ErrNotFound if there is no record.
	IdempotencyGet(ctx context.Context, tenantID, key string) (*model.IdempotencyRecord, error)
	// IdempotencyDeleteBefore removes records created before t; returns how many.
	IdempotencyDeleteBefore(ctx context.Context, t time.Time) (int, error)
}

// TenantListParams pages TenantList. After is the last ID of the previous
// page.
type TenantListParams struct {
	After string
	Limit int // 1..1000; drivers clamp
}

// ScheduleListParams filters and pages ScheduleList. Results are ordered by
// ID ascending; After is the last ID of the previous page.
type ScheduleListParams struct {
	TenantID   string
	After      string
	Limit      int                 // 1..1000; drivers clamp
	State      model.ScheduleState // optional
	PolicyID   string              // optional
	NamePrefix string              // optional
	// Labels, optional: every requirement must hold. A driver may read
	// past schedules that fail it (the embedded one does), so a page can
	// cost more than Limit reads.
	Labels []model.LabelRequirement
}

// ChildrenFindParams selects the children of eligible keys. Cross-tenant.
type ChildrenFindParams struct {
	Partition int
	Timezone  string
	Keys      []model.ChildKey
}

// ScheduleEnd is a position in ScheduleComplete's walk: the end and id of
// the last schedule looked at. The zero value is the start.
type ScheduleEnd struct {
	End time.Time
	ID  string
}

// ScheduleCompleteParams selects the schedules ScheduleComplete looks at.
type ScheduleCompleteParams struct {
	// Now bounds the ends looked at (inclusive).
	Now time.Time
	// MissedBefore: a schedule whose end is before it fires no more, with
	// or without a fire at its end.
	MissedBefore time.Time
	// At is the completion time (UpdatedAt).
	At    time.Time
	After ScheduleEnd
	Limit int // schedules looked at, 1..1000; drivers clamp
}

// ScheduleCompleteResult is what one ScheduleComplete call did.
type ScheduleCompleteResult struct {
	Completed int
	// Examined counts the schedules looked at; fewer than the limit
	// means that the walk reached Now.
	Examined int
	// Last is where the next call goes on (After).
	Last ScheduleEnd
}

// ScheduleResumeDueParams selects what ScheduleResumeDue returns.
type ScheduleResumeDueParams struct {
	// Now bounds the resume times returned (inclusive).
	Now time.Time
	// After is the ResumeAt and ID of the last schedule of the previous
	// page (End is the resume time); the zero value is the start.
	After ScheduleEnd
	Limit int // 1..1000; drivers clamp
}

// ScheduleIntervalDueParams selects what ScheduleIntervalDue returns.
type ScheduleIntervalDueParams struct {
	Partition int
	// Before bounds the next fires returned (exclusive).
	Before time.Time
	// After is the next fire (End) and ID of the last schedule of the
	// previous page; the zero value is the start.
	After ScheduleEnd
	Limit int // 1..1000; drivers clamp
}

// ScheduleIntervalAdvanceParams says how far the emitter has emitted an
// interval schedule.
type ScheduleIntervalAdvanceParams struct {
	ID      string
	Version int64
	// Next is the schedule's next fire not emitted yet.
	Next time.Time
}

// ScheduleDeleteCompletedParams selects what ScheduleDeleteCompleted
// deletes.
type ScheduleDeleteCompletedParams struct {
	Before time.Time
	Limit  int // 1..1000; drivers clamp
}

// ScheduleNew is one schedule of ScheduleCreateMany with its children and
// its first fires.
type ScheduleNew struct {
	Schedule *model.Schedule
	Children []model.Child
	// Fires are written with the schedule, as FireInsertMany writes them
	// (a fire or event whose id exists stays as it is), only when the
	// schedule is inserted: an item that conflicts writes none of them.
	Fires []FireNew
}

// ScheduleStore keeps schedules and their children.
type ScheduleStore interface {
	// ScheduleCreateMany is how schedules are created, one or many, with
	// their children and their Fires at once: one transaction (one commit)
	// where the store has them, else bulk writes, children before the
	// schedules (a crash in between leaves only orphan children, which the
	// emitter ignores and ChildrenDeleteOrphans removes), then the fires of
	// the stored items with one FireInsertMany. The result has one
	// error per item: nil when it was stored (with its fires), ErrConflict
	// when its id exists (also an id repeated within items: the first one
	// wins); an item that conflicts leaves nothing written, fires included.
	// The error return is for the call: then no item is reported stored,
	// though a store without transactions may have stored some of them (a
	// retry with the same ids finds those as ErrConflict), left orphan
	// children, or stored schedules without their fires or with only some
	// of them (a failure between the schedules and the fires): a retry that
	// recovers the items emits those, and nothing else does for a one-off
	// due within what the emitter has already scanned. A driver that
	// writes an item's fires in the same atomic write as the schedule may
	// leave out of ChildrenFind and ChildTimezones the child of a one-off
	// whose one fire it wrote so (model.FireID of the schedule's id and
	// version and model.FireInstant of runAt): the emitter would only find
	// that fire made. The children of every other schedule, and those of
	// a later update, are found.
	ScheduleCreateMany(ctx context.Context, items []ScheduleNew) ([]error, error)
	// ScheduleGet returns the tenant's schedule. ErrNotFound otherwise.
	ScheduleGet(ctx context.Context, tenantID, id string) (*model.Schedule, error)
	// ScheduleGetMany returns the schedules with these ids that exist, in any
	// order. Cross-tenant (emitter).
	ScheduleGetMany(ctx context.Context, ids []string) ([]*model.Schedule, error)
	// ScheduleList pages through a tenant's schedules.
	ScheduleList(ctx context.Context, p *ScheduleListParams) ([]*model.Schedule, error)
	// ScheduleUpdate replaces the schedule if its stored Version equals
	// expectedVersion; s.Version must be expectedVersion+1. When children is
	// non-nil the schedule's children are replaced: the new ones (carrying
	// the new version) are written first, then the schedule, then the old
	// ones are deleted. ErrNotFound, ErrConflict (version moved).
	ScheduleUpdate(ctx context.Context, s *model.Schedule, expectedVersion int64, children []model.Child) error
	// ScheduleDelete removes the tenant's schedule and its children.
	// ErrNotFound.
	ScheduleDelete(ctx context.Context, tenantID, id string) error
	// ScheduleCountByPolicy counts a tenant's schedules that name policyID.
	ScheduleCountByPolicy(ctx context.Context, tenantID, policyID string) (int, error)
	// ScheduleCountByCalendar counts a tenant's schedules whose
	// ExcludeCalendars name calendarID.
	ScheduleCountByCalendar(ctx context.Context, tenantID, calendarID string) (int, error)
	// ScheduleCountByTenant counts a tenant's schedules that are not
	// completed (those count against maxSchedules), stopping at max when
	// max > 0 (so that a quota check costs at most the quota).
	ScheduleCountByTenant(ctx context.Context, tenantID string, max int) (int, error)
	// ScheduleComplete walks the active schedules that have an end (a
	// one-off's fire instant, model.FireInstant of RunAt; a cron
	// schedule's EndAt) not after p.Now, after p.After in the order of an
	// index of those ends (never every schedule; a driver may order ends
	// by a coarser unit, by id within it, and look at and leave schedules
	// whose ends are in p.Now's unit but after it), and
	// moves to completed (Version+1, UpdatedAt p.At) each whose events are
	// all finished (released, dead or cancelled), that has no fire still
	// being emitted (Remaining > 0), and that fires no more: a one-off
	// with a fire at its fire instant (of any version), or any of them
	// once its end is before p.MissedBefore (the emitter's catch-up limit:
	// a cron schedule's last fire, a one-off that never fired). The
	// completion is a compare-and-set on the version read: a schedule
	// changed meanwhile is left for the next walk. Cross-tenant.
	ScheduleComplete(ctx context.Context, p *ScheduleCompleteParams) (ScheduleCompleteResult, error)
	// ScheduleResumeDue returns up to p.Limit paused schedules whose
	// ResumeAt is not after p.Now, after p.After in the order of an index
	// of resume times (never every schedule; a driver may order resume
	// times by a coarser unit and by id within it), which the write of the
	// schedule keeps. The caller resumes each with ScheduleUpdate, a
	// compare-and-set on the version read. Cross-tenant.
	ScheduleResumeDue(ctx context.Context, p *ScheduleResumeDueParams) ([]*model.Schedule, error)
	// ScheduleIntervalDue returns up to p.Limit active interval schedules
	// of p.Partition whose IntervalNextFire is before p.Before, after
	// p.After in the order of an index of next fires (never every
	// schedule; a driver may order them by a coarser unit and by id within
	// it), which the write of the schedule keeps: the emitter's scan of
	// interval schedules, as children are its scan of cron schedules.
	ScheduleIntervalDue(ctx context.Context, p *ScheduleIntervalDueParams) ([]*model.Schedule, error)
	// ScheduleListAfter returns up to p.Limit schedules that have After
	// set (of any state), by id after p.After, through an index the write
	// of the schedule keeps; with p.Upstream, only those whose After
	// names it. Cross-tenant.
	ScheduleListAfter(ctx context.Context, p *ScheduleListAfterParams) ([]*model.Schedule, error)
	// ScheduleIntervalAdvance sets IntervalNext of interval schedule p.ID
	// to p.Next if its version is still p.Version, it is active and p.Next
	// is after its IntervalNextFire; otherwise it does nothing and returns
	// nil (another emitter got further, a new version starts again, the
	// schedule is gone). Version and UpdatedAt do not change.
	ScheduleIntervalAdvance(ctx context.Context, p *ScheduleIntervalAdvanceParams) error
	// ScheduleDeleteCompleted deletes up to p.Limit completed schedules
	// whose UpdatedAt (their completion, or a later edit) is before
	// p.Before, oldest first, as ScheduleDelete does, and their fires; their
	// events stay for the event retention (released and cancelled ones)
	// and for inspection (dead ones). Returns how many. Cross-tenant.
	ScheduleDeleteCompleted(ctx context.Context, p *ScheduleDeleteCompletedParams) (int, error)
	// ChildrenFind returns the children of one partition and timezone whose
	// (LaunchExpression, Minute) is one of p.Keys, through the index
	// (partition, timezone, launchExpression, minute). Cross-tenant. It
	// may leave out the child of a one-off created with its fire in one
	// atomic write (ScheduleCreateMany).
	ChildrenFind(ctx context.Context, p *ChildrenFindParams) ([]model.Child, error)
	// ChildTimezones lists the distinct timezones that have children that
	// ChildrenFind finds.
	ChildTimezones(ctx context.Context) ([]string, error)
	// ChildrenDeleteOrphans removes children whose schedule has moved to a
	// later version, and children whose schedule does not exist or has
	// another version once they are old enough that no create or update can
	// still be writing them (drivers without transactions write children
	// before the schedule); returns how many.
	ChildrenDeleteOrphans(ctx context.Context) (int, error)
	// WatermarkGet returns the partition's watermark; a zero Watermark (and
	// no error) if none was set.
	WatermarkGet(ctx context.Context, partition int) (model.Watermark, error)
	// WatermarkAdvance sets the watermark to w.Until if w.Until is later than
	// the stored one and w.Fence is not older than the stored fence.
	// ErrConflict otherwise (a stale emitter lost its partition).
	WatermarkAdvance(ctx context.Context, w model.Watermark) error
}

// ScheduleListAfterParams pages the dependent schedules.
type ScheduleListAfterParams struct {
	Upstream string // optional
	After    string // cursor: the last id of the previous page
	Limit    int
}

// FireListParams pages a schedule's fires, newest FireTime first. Before is
// the FireTime of the last fire of the previous page (zero: from the newest).
type FireListParams struct {
	TenantID   string
	ScheduleID string
	Before     time.Time
	Limit      int
}

// FireNew is a fire and its events for FireInsertMany.
type FireNew struct {
	Fire   *model.Fire
	Events []*model.Event
}

// FireStore keeps fires: one record per (schedule, fire time).
type FireStore interface {
	// FireInsert stores f unless a fire with f.ID exists. It reports whether
	// it inserted; an existing fire is not changed. Cross-tenant.
	FireInsert(ctx context.Context, f *model.Fire) (inserted bool, err error)
	// FireInsertMany stores each fs[i].Fire whose id is new together with
	// its Events (those whose ids are new), in as few writes as the driver
	// can: one commit for the embedded store. inserted[i] reports whether
	// fs[i].Fire was stored by this call; the events of a fire that existed
	// are not written (the caller ensures them as for FireInsert). events
	// counts the events stored. A failed call may have stored some fires,
	// some of them without all their events, as FireInsert followed by
	// EventInsertMany may. Cross-tenant.
	FireInsertMany(ctx context.Context, fs []FireNew) (inserted []bool, events int, err error)
	// FireGet returns the tenant's fire. ErrNotFound.
	FireGet(ctx context.Context, tenantID, id string) (*model.Fire, error)
	// FireList pages a tenant's schedule's fires.
	FireList(ctx context.Context, p *FireListParams) ([]*model.Fire, error)
	// FireLatestBefore returns the schedule's fire with the latest FireTime
	// strictly before t. ErrNotFound if none. Cross-tenant (overlap checks).
	FireLatestBefore(ctx context.Context, scheduleID string, t time.Time) (*model.Fire, error)
	// FireSetDecision sets the decision and note of an existing fire.
	// ErrNotFound.
	FireSetDecision(ctx context.Context, id string, d model.FireDecision, note string) error
	// FireSetRemaining lowers the fire's Remaining to remaining (the
	// progress of a background emission); a larger value leaves it as it
	// is, so that a slower writer never moves it back. ErrNotFound.
	FireSetRemaining(ctx context.Context, id string, remaining int) error
	// FireListEmitting returns up to limit fires whose Remaining is above
	// 0, by id. Cross-tenant (the emitter resumes them).
	FireListEmitting(ctx context.Context, limit int) ([]*model.Fire, error)
	// FireListWatched returns up to limit fires that are Watched and not
	// finished (FinishedAt nil), by id after after, through an index of
	// those fires only. Cross-tenant (the finisher follows them).
	FireListWatched(ctx context.Context, after string, limit int) ([]*model.Fire, error)
	// FireWatch marks the existing fire id Watched; a fire watched already
	// (finished or not) is left as it is. ErrNotFound.
	FireWatch(ctx context.Context, id string) error
	// FireSetFinished sets the FinishedAt of the watched fire id to at if
	// it is not set yet, and reports whether this call set it (a
	// compare-and-set: of several callers, one sees true). ErrNotFound.
	FireSetFinished(ctx context.Context, id string, at time.Time) (bool, error)
	// FireDeadlineDue returns up to limit fires whose Deadline is not after
	// before and that FireDeadlineDone has not closed yet, earliest
	// deadline first (then by id), through an index of open deadlines.
	// Cross-tenant (the deadline check).
	FireDeadlineDue(ctx context.Context, before time.Time, limit int) ([]*model.Fire, error)
	// FireDeadlineDone closes the fire's deadline: FireDeadlineDue no
	// longer returns it. With miss set it also records miss as the fire's
	// DeadlineMissed unless one is recorded already; recorded says whether
	// this call recorded it (one caller wins, whatever the concurrency).
	// ErrNotFound.
	FireDeadlineDone(ctx context.Context, id string, miss *model.DeadlineMiss) (recorded bool, err error)
}

// EventCounts holds the number of events per status.
type EventCounts map[model.EventStatus]int

// EventListParams filters and pages a tenant's events, ordered by ID
// ascending after After.
type EventListParams struct {
	TenantID   string
	ScheduleID string            // optional
	FireID     string            // optional
	Status     model.EventStatus // optional
	From, To   time.Time         // optional range on LaunchAt: [From, To)
	After      string
	Limit      int
}

// EventClaimParams claims due events of one queue shard for its owner.
type EventClaimParams struct {
	Shard int
	// Fence is the claimer's queue-shard lease fence.
	Fence int64
	// DueBefore: events with LaunchAt < DueBefore are claimed.
	DueBefore time.Time
	Limit     int
	// SkipPolicies lists policies whose due events stay pending: the
	// claimer holds enough of them waiting for tokens. Events scheduled
	// under an older fence are claimed whatever their policy.
	SkipPolicies []string
}

// EventTransition is one compare-and-set on an event's status.
type EventTransition struct {
	ID   string
	From model.EventStatus
	// Fence, if non-zero, must equal the stored fence (the transition is
	// made by the holder of the shard lease the event was claimed under, or
	// by the holder of a delivery token, which carries the fence its event
	// was started under: an extend or release of a stale token conflicts).
	Fence int64
	// To is the new status; the remaining fields are written with it when
	// set (non-zero).
	To             model.EventStatus
	LaunchAt       time.Time
	Attempts       int
	ResetAttempts  bool // sets Attempts to 0 (redrive)
	LastError      string
	TokenExpiresAt *time.Time
	ClearToken     bool // sets TokenExpiresAt to nil
	TokenTimedOut  bool
	// TokenExpiredBy, if set, applies the transition only if the stored
	// TokenExpiresAt is set and not after it. The token-timeout reclaim uses
	// it so that a token renewed after the reclaim read it (a consumer's
	// extend, or the handler renewing a token that waited before its send)
	// is not taken from under its holder.
	TokenExpiredBy *time.Time
	// AttemptsAtMost, if set, applies the transition only if the stored
	// Attempts is not above it. A release uses it so that the token of a
	// later attempt (the retry the token timeout made) is not released by
	// the consumer of an earlier one.
	AttemptsAtMost *int
	DeliveredAt    *time.Time
	FinishedAt     *time.Time
	// ClearOutcome sets DeliveredAt and FinishedAt to nil and TokenTimedOut
	// to false: what described a finished attempt (redrive). It wins over
	// those fields. LastError is kept as the history of the last failure.
	ClearOutcome bool
	// ClearExpiry sets ExpireAt to nil (the redrive of an expired event,
	// which is then sent whatever its deadline).
	ClearExpiry bool
	At          time.Time // UpdatedAt
	// RequiresPrevious applies the transition only if the previous one in
	// the same EventTransition call succeeded (nil result); otherwise it is
	// not attempted and its result is ErrConflict. On the first transition
	// of a call it is never applied. It chains: a transition skipped this
	// way counts as failed for the next one. The throttle uses it to hand a
	// released event's token to the next waiting event in the same call
	// (release e1, then e2 scheduled→delivering only if e1's release won),
	// so that the token moves without touching the policy's count.
	// The embedded driver applies the whole call in one transaction (both
	// or neither survive a crash); the Mongo driver applies the required
	// transition in a later write than the one it requires, so a crash
	// between them can leave the first applied and not the second (a token
	// counted in InUse that no event holds, which the bucket owner's
	// reconciliation repairs).
	RequiresPrevious bool
}

// EventStore keeps events, the delivery units.
type EventStore interface {
	// EventInsertMany inserts the events whose ids do not exist yet and leaves
	// existing ones untouched (idempotent emission); returns how many it
	// inserted. Cross-tenant.
	EventInsertMany(ctx context.Context, events []*model.Event) (inserted int, err error)
	// EventGet returns the tenant's event. ErrNotFound.
	EventGet(ctx context.Context, tenantID, id string) (*model.Event, error)
	// EventGetByID returns any tenant's event (release calls are authorised by
	// the release token, not a tenant). ErrNotFound.
	EventGetByID(ctx context.Context, id string) (*model.Event, error)
	// EventGetMany returns the events of ids that exist (any tenant), by
	// id, in one read.
	EventGetMany(ctx context.Context, ids []string) (map[string]*model.Event, error)
	// EventList pages a tenant's events.
	EventList(ctx context.Context, p *EventListParams) ([]*model.Event, error)
	// EventClaimDue moves the shard's events that are pending or retrying
	// with LaunchAt < DueBefore (apart from p.SkipPolicies'), and the
	// events scheduled under an older fence (left by a previous owner), to
	// scheduled with Fence = p.Fence, at most Limit in all (whatever its
	// size; none if Limit <= 0), and returns them; those taken from an
	// older fence have TakenOver set. Fewer than Limit means that no more
	// were claimable.
	//
	// Older fences' events go first, earliest LaunchAt first. The rest of
	// Limit is shared over the due events' lanes (tenant, policy,
	// priority) as a round robin would: the tenants with due events take
	// equal shares, a tenant that has fewer due than its share takes them
	// all and leaves the rest to the others; a tenant's share is split
	// over its policies (no policy being one) the same way; within a
	// tenant's policy the highest priority goes first and, within a
	// priority, the earliest LaunchAt (then the event's id or row order).
	// Which lanes take the remainder of an uneven split is unspecified.
	// In a lane of a policy the schedules take turns instead: the
	// schedules with due events are ordered by their earliest waiting
	// event (its LaunchAt, then the schedule id; pending and retrying
	// counted apart) and share the lane's take as ShareTurns does, each
	// schedule's in the lane's order, so that a schedule's events due
	// after another's backlog are not left behind all of it.
	EventClaimDue(ctx context.Context, p *EventClaimParams) ([]*model.Event, error)
	// EventTransition applies the compare-and-set transitions in order; each
	// is a conditional single-document write. It returns, per transition,
	// nil or ErrConflict (status or fence did not match) or ErrNotFound.
	// The returned error is for failures of the whole call (ErrUnavailable):
	// then any of the transitions may have applied and the results say
	// nothing, unless it also wraps ErrNotApplied, which it does only if
	// none of them applied.
	EventTransition(ctx context.Context, ts []EventTransition) ([]error, error)
	// EventCountByFire counts a fire's events per status. Cross-tenant.
	EventCountByFire(ctx context.Context, fireID string) (EventCounts, error)
	// EventCountByTenant counts a tenant's stored events in every status
	// (waiting, in flight and finished but retained), stopping at max when
	// max > 0. It reads an index by tenant, not the events.
	EventCountByTenant(ctx context.Context, tenantID string, max int) (int, error)
	// EventCountByStatus counts a tenant's stored events per status.
	EventCountByStatus(ctx context.Context, tenantID string) (EventCounts, error)
	// EventLastFinished returns the latest FinishedAt among a fire's events,
	// or nil.
	EventLastFinished(ctx context.Context, fireID string) (*time.Time, error)
	// EventCancelPending moves the events of the schedule (and, if fireID is
	// set, only of that fire) that are pending, retrying or scheduled to
	// cancelled. Returns how many. Cross-tenant.
	EventCancelPending(ctx context.Context, scheduleID, fireID string, at time.Time) (int, error)
	// EventExpireWaiting moves the fire's events that are pending,
	// retrying or scheduled to expired (FinishedAt at, LastError reason).
	// Returns how many. Cross-tenant.
	EventExpireWaiting(ctx context.Context, scheduleID, fireID string, at time.Time, reason string) (int, error)
	// EventFindTokenExpired returns events of the policy in status delivered
	// or delivering whose TokenExpiresAt is before t, oldest expiry first
	// (then by id), at most limit (whatever its size; <= 0: all).
	// Cross-tenant.
	EventFindTokenExpired(ctx context.Context, policyID string, t time.Time, limit int) ([]*model.Event, error)
	// EventCountHoldingTokens counts the policy's events that hold a token
	// (delivering or delivered). Cross-tenant.
	EventCountHoldingTokens(ctx context.Context, policyID string) (int, error)
	// EventCountWaiting counts the policy's events that are pending,
	// retrying or scheduled with LaunchAt <= t (due, waiting for a token).
	EventCountWaiting(ctx context.Context, policyID string, t time.Time) (int, error)
	// EventDeleteFinishedBefore removes released and cancelled events whose
	// FinishedAt is before t, at most limit; returns how many.
	EventDeleteFinishedBefore(ctx context.Context, t time.Time, limit int) (int, error)
}

// PolicyStore keeps throttling policies and their token counts.
type PolicyStore interface {
	// PolicyCreate inserts p. ErrConflict if the id or (tenant, name) exists.
	PolicyCreate(ctx context.Context, p *model.Policy) error
	// PolicyGet returns the tenant's policy. ErrNotFound.
	PolicyGet(ctx context.Context, tenantID, id string) (*model.Policy, error)
	// PolicyGetByID returns any tenant's policy (handler). ErrNotFound.
	PolicyGetByID(ctx context.Context, id string) (*model.Policy, error)
	// PolicyList lists a tenant's policies ordered by ID.
	PolicyList(ctx context.Context, tenantID string) ([]*model.Policy, error)
	// PolicyUpdate replaces name, maxInFlight, tokenTimeout, autoRelease,
	// ratePerSecond, burst, adaptive and the adaptive limit's state
	// (effectiveLimit, limitReason, limitChangedAt) and labels if the stored Version
	// equals expectedVersion (InUse and TimedOut are kept). ErrNotFound,
	// ErrConflict.
	PolicyUpdate(ctx context.Context, p *model.Policy, expectedVersion int64) error
	// PolicyDelete removes the tenant's policy. ErrNotFound.
	PolicyDelete(ctx context.Context, tenantID, id string) error
	// PolicyAcquireTokens takes up to want tokens by compare-and-set on InUse
	// so that InUse never exceeds MaxInFlight, whatever the concurrency.
	// Returns how many it took (0 if none are free). ErrNotFound.
	PolicyAcquireTokens(ctx context.Context, policyID string, want int) (int, error)
	// PolicyReleaseTokens gives n tokens back (InUse never goes below 0) and
	// adds timedOut to the TimedOut counter. ErrNotFound.
	PolicyReleaseTokens(ctx context.Context, policyID string, n int, timedOut int) error
	// PolicySetInUse overwrites InUse (reconciliation by the bucket owner
	// after counting token-holding events) if Version equals expectedVersion
	// and InUse still equals expectedInUse, the value the count was compared
	// with: a token taken or given back since then is not overwritten.
	// ErrConflict if the policy or its InUse changed meanwhile.
	PolicySetInUse(ctx context.Context, policyID string, expectedVersion int64, expectedInUse, inUse int) error
	// PolicySetLimit records an adaptive policy's effective limit, why it
	// changed and when (by the bucket owner). Version is not changed: it is
	// not an edit of the policy. ErrNotFound.
	PolicySetLimit(ctx context.Context, policyID string, limit int, reason string, at time.Time) error
	// PolicySetHold sets (nil: clears) the tenant's policy's hold without
	// changing its Version (a hold is not an edit of the policy).
	// ErrNotFound.
	PolicySetHold(ctx context.Context, tenantID, policyID string, h *model.PolicyHold) error
	// PolicySetHoldTime records the policy's measured mean time from
	// delivery to release (by the bucket owner). Version is not changed,
	// and a PolicyUpdate keeps it. ErrNotFound.
	PolicySetHoldTime(ctx context.Context, policyID string, hold time.Duration) error
	// PolicyListAll lists every tenant's policies (handler). Cross-tenant.
	PolicyListAll(ctx context.Context) ([]*model.Policy, error)
}

// CalendarListParams pages CalendarList. Results are ordered by ID
// ascending; After is the last ID of the previous page.
type CalendarListParams struct {
	TenantID string
	After    string
	Limit    int // 1..1000; drivers clamp
}

// CalendarStore keeps the tenants' exclusion calendars.
type CalendarStore interface {
	// CalendarCreate inserts c. ErrConflict if the id exists.
	CalendarCreate(ctx context.Context, c *model.Calendar) error
	// CalendarGet returns the tenant's calendar. ErrNotFound otherwise
	// (also for a calendar of another tenant).
	CalendarGet(ctx context.Context, tenantID, id string) (*model.Calendar, error)
	// CalendarList pages through a tenant's calendars.
	CalendarList(ctx context.Context, p *CalendarListParams) ([]*model.Calendar, error)
	// CalendarUpdate replaces the calendar if its stored Version equals
	// expectedVersion; c.Version is the caller's new version. ErrNotFound,
	// ErrConflict (version moved).
	CalendarUpdate(ctx context.Context, c *model.Calendar, expectedVersion int64) error
	// CalendarDelete removes the tenant's calendar. ErrNotFound.
	CalendarDelete(ctx context.Context, tenantID, id string) error
	// CalendarCountByTenant counts a tenant's calendars, stopping at max
	// when max > 0.
	CalendarCountByTenant(ctx context.Context, tenantID string, max int) (int, error)
}

// AuditListParams filters and pages AuditList. Results are ordered by ID
// ascending (ids begin with the second they were made in); After is the
// last ID of the previous page.
type AuditListParams struct {
	TenantID string    // "": every tenant's (the admin's list)
	ObjectID string    // optional
	From, To time.Time // optional range on At: [From, To)
	After    string
	Limit    int // 1..1000; drivers clamp
}

// AuditStore keeps the audit records of mutating API calls.
type AuditStore interface {
	// AuditAppend stores the records, in one write where the store can.
	// A record whose id exists is left as it is.
	AuditAppend(ctx context.Context, rs []*model.AuditRecord) error
	// AuditList pages the records that match p. A driver reads an index by
	// tenant or by object, not every record, when p names one.
	AuditList(ctx context.Context, p *AuditListParams) ([]*model.AuditRecord, error)
	// AuditDeleteBefore removes up to limit records whose At is before t,
	// oldest first; returns how many. Cross-tenant (retention).
	AuditDeleteBefore(ctx context.Context, t time.Time, limit int) (int, error)
}

// LeaseStore keeps leases with fencing tokens.
type LeaseStore interface {
	// LeaseAcquire gives the lease to owner for ttl if it is free, expired
	// at now, or already owner's (a renewal keeps the fence). A new owner gets
	// a fence larger than any before. ErrConflict if another owner holds it.
	LeaseAcquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (model.Lease, error)
	// LeaseRenew extends the lease if owner still holds it with this fence
	// (even if expired, as long as nobody took it). ErrConflict otherwise.
	LeaseRenew(ctx context.Context, name, owner string, fence int64, now time.Time, ttl time.Duration) (model.Lease, error)
	// LeaseRelease frees the lease if owner holds it with this fence (the
	// fence is kept so the next owner's is larger). ErrConflict otherwise.
	LeaseRelease(ctx context.Context, name, owner string, fence int64) error
	// LeaseList returns the leases whose name starts with prefix.
	LeaseList(ctx context.Context, prefix string) ([]model.Lease, error)
	// LeaseAdvertise records addr on the lease (model.Lease.Addr) if owner
	// holds it with this fence; the expiry does not change. A later
	// acquisition by another owner clears it. ErrConflict otherwise.
	LeaseAdvertise(ctx context.Context, name, owner string, fence int64, addr string) error
}
