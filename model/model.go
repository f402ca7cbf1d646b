// Package model holds schedulerd's domain types and sentinel errors.
//
// It imports nothing but the standard library so that every other package
// (the cron engine, the store drivers, the master, emitter and handler) can
// share one vocabulary without depending on each other. The names are those
// of docs/design.md: Schedule, Child, LaunchExpression, Fire, Event, Policy,
// Token, Lease.
package model

import (
	"encoding/json"
	"math"
	"time"
)

// Tenant is one customer of the service. Every API object belongs to exactly
// one tenant and no API call of one tenant sees another tenant's objects.
type Tenant struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Weight is the tenant's share of delivery capacity relative to other
	// tenants; 0 takes the configured default.
	Weight int `json:"weight,omitempty"`
	// Quotas are the tenant's own limits; a zero quota takes the
	// configured default.
	Quotas TenantQuotas `json:"quotas"`
	// Targets, when set, restricts where the tenant's events may go.
	Targets *TenantTargets `json:"targets,omitempty"`
	// Notify lists who is told about every fire of the tenant's
	// schedules, besides each schedule's own receivers.
	Notify []Notify `json:"notify,omitempty"`
	// Version increases with every change (0 for a tenant never changed).
	Version   int64     `json:"version,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// TenantQuotas limit what one tenant may ask of the service. Zero means
// "not set": the configured default applies.
type TenantQuotas struct {
	MaxSchedules     int `json:"maxSchedules,omitempty"`
	MaxEventsPerFire int `json:"maxEventsPerFire,omitempty"`
	// MaxEventsPerMinute is the tenant's emission rate.
	MaxEventsPerMinute int `json:"maxEventsPerMinute,omitempty"`
	// MaxEventsStored counts waiting, in-flight and retained events.
	MaxEventsStored int `json:"maxEventsStored,omitempty"`
	// MaxCalendars is how many exclusion calendars the tenant may keep.
	MaxCalendars int `json:"maxCalendars,omitempty"`
}

// Or returns q with every unset quota taken from def.
func (q TenantQuotas) Or(def TenantQuotas) TenantQuotas {
	pick := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	return TenantQuotas{
		MaxSchedules:       pick(q.MaxSchedules, def.MaxSchedules),
		MaxEventsPerFire:   pick(q.MaxEventsPerFire, def.MaxEventsPerFire),
		MaxEventsPerMinute: pick(q.MaxEventsPerMinute, def.MaxEventsPerMinute),
		MaxEventsStored:    pick(q.MaxEventsStored, def.MaxEventsStored),
		MaxCalendars:       pick(q.MaxCalendars, def.MaxCalendars),
	}
}

// TenantTargets are the delivery targets a tenant may use: http targets
// whose host matches one of Hosts ("hooks.example.com", "*.example.com")
// or whose address is in one of CIDRs, and sqs targets whose queue URL
// starts with one of QueueURLPrefixes. An empty list allows nothing of its
// kind; a nil *TenantTargets allows everything.
type TenantTargets struct {
	Hosts            []string `json:"hosts,omitempty"`
	CIDRs            []string `json:"cidrs,omitempty"`
	QueueURLPrefixes []string `json:"queueUrlPrefixes,omitempty"`
}

// APIKey authenticates a tenant. Only the SHA-256 hash of the key is stored;
// the clear key is shown once, when it is created.
type APIKey struct {
	ID       string `json:"id"`
	TenantID string `json:"tenantId"`
	Hash     string `json:"hash"`   // hex SHA-256 of the clear key
	Prefix   string `json:"prefix"` // first characters of the key, for display
	// PolicyID, if set, makes the key a consumer key: it may only hold
	// and read the status of that one policy.
	PolicyID  string     `json:"policyId,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// DefaultMaxAttempts is the number of delivery attempts of a schedule or
// event that does not set MaxAttempts.
const DefaultMaxAttempts = 5

// TargetType says how events of a schedule are delivered.
type TargetType string

const (
	TargetHTTP TargetType = "http"
	TargetSQS  TargetType = "sqs"
	// TargetHTTPBatch POSTs the events due together to one URL as one
	// request (a JSON array of messages), for consumers that take them so.
	TargetHTTPBatch TargetType = "http_batch"
)

// Target is where a schedule's events go.
type Target struct {
	Type     TargetType `json:"type"`
	URL      string     `json:"url,omitempty"`      // TargetHTTP, TargetHTTPBatch
	QueueURL string     `json:"queueUrl,omitempty"` // TargetSQS
}

// MisfirePolicy decides what happens to fires missed while no emitter ran.
type MisfirePolicy string

const (
	// MisfireFireOnce fires the latest missed fire once if it was missed by
	// less than the catch-up limit, then carries on. The default.
	MisfireFireOnce MisfirePolicy = "fire_once"
	// MisfireFireAll fires every missed fire within the catch-up limit.
	MisfireFireAll MisfirePolicy = "fire_all"
	// MisfireSkip never fires a missed fire.
	MisfireSkip MisfirePolicy = "skip"
)

// OverlapPolicy decides what a new fire does while the previous fire of the
// same schedule still has undelivered events.
type OverlapPolicy string

const (
	OverlapAllow  OverlapPolicy = "allow"  // both run (default)
	OverlapSkip   OverlapPolicy = "skip"   // the new fire emits nothing
	OverlapCancel OverlapPolicy = "cancel" // the previous fire's waiting events are cancelled
)

// ScheduleState is the lifecycle state of a schedule.
type ScheduleState string

const (
	ScheduleActive    ScheduleState = "active"
	SchedulePaused    ScheduleState = "paused"
	ScheduleCompleted ScheduleState = "completed" // a one-off schedule that has fired, or past endAt
)

// Schedule (the seed's ScheduleJob) is a tenant's recurring or one-off job.
// Exactly one of Cron, Crons, Interval and RunAt is set.
type Schedule struct {
	ID       string `json:"id"`
	TenantID string `json:"tenantId"`
	Name     string `json:"name"`
	// Cron is the canonical 5-field expression (the field form is converted
	// to it by the master). Empty for a one-off schedule.
	Cron string `json:"cron,omitempty"`
	// RunAt is the launch instant of a one-off (delayed) schedule.
	RunAt      *time.Time `json:"runAt,omitempty"`
	Timezone   string     `json:"timezone"`
	EventCount int        `json:"eventCount"`
	PolicyID   string     `json:"policyId,omitempty"`
	// Window is the batch window: events carry FireTime+Window as deadline.
	Window time.Duration `json:"window,omitempty"`
	// Spread lays the launch times of a fire's events evenly over Window.
	Spread      bool            `json:"spread,omitempty"`
	Priority    int             `json:"priority,omitempty"`
	Target      Target          `json:"target"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	MaxAttempts int             `json:"maxAttempts"`
	StartAt     *time.Time      `json:"startAt,omitempty"`
	EndAt       *time.Time      `json:"endAt,omitempty"`
	Misfire     MisfirePolicy   `json:"misfire"`
	Overlap     OverlapPolicy   `json:"overlap"`
	State       ScheduleState   `json:"state"`
	// Partition is the emitter partition of the schedule's children, fixed at
	// creation (see PartitionOf).
	Partition int `json:"partition"`
	// Version increases with every change; children carry the version they
	// were made for so that stale children are ignored.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Labels are the client's key/value pairs, selected on by list and
	// bulk actions.
	Labels map[string]string `json:"labels,omitempty"`
	// Jitter, if positive, delays the launch of each fire by
	// JitterOffset(ID, fire time, Jitter), in [0, Jitter).
	Jitter time.Duration `json:"jitter,omitempty"`
	// PausedNote, PausedAt and PausedBy (the API key's prefix) say why,
	// when and by whom a paused schedule was paused; ResumeAt, if set, is
	// when it resumes by itself. A resume clears all four.
	PausedNote string     `json:"pausedNote,omitempty"`
	PausedAt   *time.Time `json:"pausedAt,omitempty"`
	PausedBy   string     `json:"pausedBy,omitempty"`
	ResumeAt   *time.Time `json:"resumeAt,omitempty"`
	// SkipUntil, if set, makes every scheduled fire before it a fire with
	// decision skipped_manual and no events (POST /skip).
	SkipUntil *time.Time `json:"skipUntil,omitempty"`
	// ExcludeCalendars are the ids of the tenant's calendars whose
	// excluded days and hours this schedule does not fire in; OnExcluded
	// says what happens to a fire they exclude ("" is skip).
	ExcludeCalendars []string         `json:"excludeCalendars,omitempty"`
	OnExcluded       OnExcludedPolicy `json:"onExcluded,omitempty"`
	// Interval, if positive, makes the schedule fire every Interval of
	// elapsed time from IntervalFirst; Cron and Crons are then empty.
	Interval time.Duration `json:"interval,omitempty"`
	// IntervalNext is the next fire instant of an interval schedule that
	// the emitter has reached (ScheduleIntervalAdvance); nil: the anchor.
	// A new version starts again from nil.
	IntervalNext *time.Time `json:"intervalNext,omitempty"`
	// Crons, if set, are several canonical cron expressions: the schedule
	// fires at each instant any of them names, once; Cron is then empty.
	Crons []string `json:"crons,omitempty"`
	// CreatedTrace is the W3C traceparent of the request that created
	// the schedule, when it was traced: each fire's span links to it. Set
	// from the request's context, never by a client.
	CreatedTrace string `json:"createdTrace,omitempty"`
	// Notify lists who is told about this schedule's fires (see Notify).
	Notify []Notify `json:"notify,omitempty"`
	// After, if set, makes the schedule fire once per finished fire of
	// another schedule of its tenant instead of on a clock: Cron, Crons,
	// Interval and RunAt are then empty.
	After *After `json:"after,omitempty"`
	// Deadline, if positive, is how long after its launch a fire must be
	// finished (for a schedule with a Window it is at least the Window;
	// without it the Window's end is the deadline). See FireDeadline.
	Deadline time.Duration `json:"deadline,omitempty"`
	// OnDeadline says what a missed deadline does ("" is record).
	OnDeadline DeadlinePolicy `json:"onDeadline,omitempty"`
	// MaxEventAge, if positive, is how long after its launch an event
	// may still be attempted: older ones become expired.
	MaxEventAge time.Duration `json:"maxEventAge,omitempty"`
}

// DeadlinePolicy says what happens to a fire not finished by its deadline.
type DeadlinePolicy string

const (
	// DeadlineRecord records the miss on the fire. The default.
	DeadlineRecord DeadlinePolicy = "record"
	// DeadlineExpire records it and moves the fire's waiting events to
	// EventExpired.
	DeadlineExpire DeadlinePolicy = "expire"
)

// DeadlineAfter is how long after its launch a fire of s must be
// finished: Deadline, else Window; 0 without either.
func (s *Schedule) DeadlineAfter() time.Duration {
	if s.Deadline > 0 {
		return s.Deadline
	}
	return s.Window
}

// DeadlineMiss records that a fire was not finished by its deadline: when
// the miss was seen and how many of its events were unfinished then.
type DeadlineMiss struct {
	At        time.Time `json:"at"`
	Remaining int       `json:"remaining"`
}

// IntervalFirst is the first fire of an interval schedule: StartAt, or
// one Interval after the creation time, as a fire instant.
func (s *Schedule) IntervalFirst() time.Time {
	if s.StartAt != nil {
		return FireInstant(*s.StartAt)
	}
	return FireInstant(s.CreatedAt).Add(s.Interval)
}

// IntervalNextFire is where the emitter's index finds an active interval
// schedule: IntervalNext, or the first fire before the emitter reached it.
func (s *Schedule) IntervalNextFire() time.Time {
	first := s.IntervalFirst()
	if s.IntervalNext != nil && s.IntervalNext.After(first) {
		return s.IntervalNext.UTC()
	}
	return first
}

// IntervalTimes appends to dst the fire instants IntervalFirst+k*Interval
// (k >= 0) of the interval schedule s in [from, to), in order. Elapsed
// time: DST does not move them.
func (s *Schedule) IntervalTimes(dst []time.Time, from, to time.Time) []time.Time {
	if s.Interval <= 0 {
		return dst
	}
	for t := s.IntervalFirstAtOrAfter(from); t.Before(to); t = t.Add(s.Interval) {
		dst = append(dst, t)
	}
	return dst
}

// IntervalFirstAtOrAfter is the first fire instant of the interval
// schedule s at or after t (IntervalFirst if t is before it).
func (s *Schedule) IntervalFirstAtOrAfter(t time.Time) time.Time {
	a := s.IntervalFirst()
	if !t.After(a) || s.Interval <= 0 {
		return a
	}
	k := (t.Sub(a) + s.Interval - 1) / s.Interval
	return a.Add(k * s.Interval)
}

// OnExcludedPolicy says what a fire excluded by a calendar does.
type OnExcludedPolicy string

const (
	// OnExcludedSkip records the fire as skipped_calendar. The default.
	OnExcludedSkip OnExcludedPolicy = "skip"
	// OnExcludedNextIncluded moves the fire to the next instant that no
	// calendar of the schedule excludes.
	OnExcludedNextIncluded OnExcludedPolicy = "next_included"
)

// Calendar is a tenant's set of excluded times: whole local days (Dates),
// ranges (Ranges) and weekly hours (Weekly), judged in Timezone. Schedules
// name calendars in ExcludeCalendars; package calendar evaluates them.
type Calendar struct {
	ID       string `json:"id"`
	TenantID string `json:"tenantId"`
	Name     string `json:"name"`
	Timezone string `json:"timezone"`
	// Dates are local days, "2006-01-02".
	Dates  []string        `json:"dates,omitempty"`
	Ranges []CalendarRange `json:"ranges,omitempty"`
	Weekly []WeeklyRule    `json:"weekly,omitempty"`
	// Version increases with every change.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// CalendarRange excludes [From, To): RFC 3339 instants with an offset
// ("2027-12-24T18:00:00Z"), or local date-times in the calendar's zone
// without one ("2027-12-24T18:00").
type CalendarRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// WeeklyRule excludes, on each of Days ("mon".."sun"), the local times of
// day [From, To) ("15:04"); From "" is the start of the day, To "" its end.
type WeeklyRule struct {
	Days []string `json:"days"`
	From string   `json:"from,omitempty"`
	To   string   `json:"to,omitempty"`
}

// Skipped reports whether the scheduled fire of s at t is skipped by
// SkipUntil.
func (s *Schedule) Skipped(t time.Time) bool { return s.SkipUntil != nil && t.Before(*s.SkipUntil) }

// IsOneOff reports whether s is a delayed job rather than a cron schedule.
func (s *Schedule) IsOneOff() bool { return s.RunAt != nil }

// Child (the seed's ScheduleChild) is one trigger slot of a schedule: a
// LaunchExpression plus a Minute. The emitter finds children by
// (Partition, Timezone, LaunchExpression, Minute).
type Child struct {
	ScheduleID       string `json:"scheduleId"`
	TenantID         string `json:"tenantId"`
	ScheduleVersion  int64  `json:"scheduleVersion"`
	Partition        int    `json:"partition"`
	Timezone         string `json:"timezone"`
	LaunchExpression string `json:"launchExpression"`
	Minute           int    `json:"minute"`
}

// OneOffChild is the child of the one-off s (s.RunAt set): the UTC child
// of RunAt's minute, of LaunchExpression class MM ("MM:month:day:hour",
// as the cron package spells it; its tests hold the two together). A store
// may keep it as a flag and build it again.
func OneOffChild(s *Schedule) Child {
	ra := s.RunAt.UTC()
	le := make([]byte, 0, 11)
	le = append(le, "MM:"...)
	for i, v := range []int{int(ra.Month()), ra.Day(), ra.Hour()} {
		if i > 0 {
			le = append(le, ':')
		}
		le = append(le, byte('0'+v/10), byte('0'+v%10))
	}
	return Child{ScheduleID: s.ID, TenantID: s.TenantID, ScheduleVersion: s.Version, Partition: s.Partition,
		Timezone: "UTC", LaunchExpression: string(le), Minute: ra.Minute()}
}

// ChildKey is the lookup key of a child within a partition and timezone.
type ChildKey struct {
	LaunchExpression string
	Minute           int
}

// FireDecision records what the emitter decided for a fire.
type FireDecision string

const (
	FireEmitted         FireDecision = "emitted"
	FireLate            FireDecision = "late"              // fired after downtime, within the catch-up limit
	FireSkippedOverlap  FireDecision = "skipped_overlap"   // overlap=skip and the previous fire had not drained
	FireCancelledByNext FireDecision = "cancelled_by_next" // overlap=cancel: a later fire cancelled what was left
	FireTriggered       FireDecision = "triggered"         // POST /trigger
	FireSkippedManual   FireDecision = "skipped_manual"    // POST /skip: not delivered
	// FireSkippedCalendar: a calendar the schedule names excludes the
	// fire time; the note names the calendar.
	FireSkippedCalendar FireDecision = "skipped_calendar"
	// FireBackfill: recorded by POST /backfill for a past instant; its
	// events launch from when it was recorded.
	FireBackfill FireDecision = "backfill"
	// FireAfter: a dependent schedule's fire, recorded when the fire of
	// the schedule it names in After finished.
	FireAfter FireDecision = "after"
)

// Fire is one firing of a schedule: n events for one fire time.
type Fire struct {
	ID         string    `json:"id"` // FireID(scheduleID, fireTime)
	ScheduleID string    `json:"scheduleId"`
	TenantID   string    `json:"tenantId"`
	FireTime   time.Time `json:"fireTime"` // UTC
	// LocalTime is the fire time as wall clock in the schedule's timezone,
	// RFC 3339 with offset.
	LocalTime string       `json:"localTime"`
	Count     int          `json:"count"`
	Decision  FireDecision `json:"decision"`
	Note      string       `json:"note,omitempty"`
	// Remaining is how many events of a fire emitted in the background are
	// not written yet: events 0..Count-Remaining-1 exist, the rest may not.
	// 0 once every event exists (and for fires emitted in one go).
	Remaining int       `json:"remaining,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Jitter is the offset its events' launch was given (the schedule's
	// JitterOffset); their launch and window start at FireTime+Jitter.
	Jitter time.Duration `json:"jitter,omitempty"`
	// Payload, if set, is what its events carry instead of the schedule's
	// payload (a trigger with a payload).
	Payload json.RawMessage `json:"payload,omitempty"`
	// Watched fires are followed until they finish (the schedule or its
	// tenant has notifications, or another schedule fires after it);
	// FinishedAt is when that was seen (nil: not yet, or not watched).
	Watched    bool       `json:"watched,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// Deadline, if set, is when the fire must be finished (its launch plus
	// the schedule's DeadlineAfter), stored so that what derives from the
	// fire inherits it; OnDeadline is the schedule's policy then.
	Deadline   *time.Time     `json:"deadline,omitempty"`
	OnDeadline DeadlinePolicy `json:"onDeadline,omitempty"`
	// DeadlineMissed is set once, when the fire is found unfinished at
	// its deadline.
	DeadlineMissed *DeadlineMiss `json:"deadlineMissed,omitempty"`
	// TraceParent is the W3C traceparent of the fire's span, kept on a
	// fire whose events are written after it is recorded (Remaining >
	// 0), which they carry; empty when tracing is off.
	TraceParent string `json:"traceParent,omitempty"`
}

// EventStatus is where an event is in its life.
type EventStatus string

const (
	// EventPending: emitted, waiting for its launch time or for a token.
	EventPending EventStatus = "pending"
	// EventScheduled: loaded by the handler that owns its queue shard and
	// waiting in memory for its launch time. Fence says which owner.
	EventScheduled EventStatus = "scheduled"
	// EventDelivering: holds a token (if its policy has one) and is being sent.
	EventDelivering EventStatus = "delivering"
	// EventDelivered: the consumer accepted it and holds its token.
	EventDelivered EventStatus = "delivered"
	// EventReleased: done; the token (if any) is back in the bucket.
	EventReleased EventStatus = "released"
	// EventRetrying: an attempt failed; the next one is due at LaunchAt.
	EventRetrying EventStatus = "retrying"
	// EventDead: every attempt failed; it can be redriven.
	EventDead EventStatus = "dead"
	// EventCancelled: its schedule was deleted or a later fire cancelled it.
	EventCancelled EventStatus = "cancelled"
	// EventExpired: not attempted any more because its ExpireAt passed
	// (its fire's deadline with onDeadline expire, or maxEventAge); it can
	// be redriven.
	EventExpired EventStatus = "expired"
)

// Finished reports whether no more work will happen for an event in s.
func (s EventStatus) Finished() bool {
	return s == EventReleased || s == EventDead || s == EventCancelled || s == EventExpired
}

// HoldsToken reports whether an event in s holds a token of its policy.
func (s EventStatus) HoldsToken() bool {
	return s == EventDelivering || s == EventDelivered
}

// Event is one delivery unit. It carries everything needed to deliver it so
// that delivery never reads the schedule.
type Event struct {
	ID         string    `json:"id"` // EventID(fireID, index)
	TenantID   string    `json:"tenantId"`
	ScheduleID string    `json:"scheduleId"`
	FireID     string    `json:"fireId"`
	FireTime   time.Time `json:"fireTime"`
	Index      int       `json:"index"` // 0-based index i of Count
	Count      int       `json:"count"`
	// LaunchAt is when the next attempt may start (the launch time, or the
	// retry time after a failed attempt).
	LaunchAt time.Time  `json:"launchAt"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// ExpireAt, if set, is when the event stops being attempted: its
	// fire's deadline under onDeadline expire, or its launch plus the
	// schedule's maxEventAge, whichever is first. A waiting event found
	// past it becomes EventExpired instead of being sent.
	ExpireAt *time.Time `json:"expireAt,omitempty"`
	Priority int        `json:"priority,omitempty"`
	PolicyID string     `json:"policyId,omitempty"`
	Target   Target     `json:"target"`
	// Payload also holds the event's concurrency key value, which the
	// owner of its policy's bucket reads with the policy's current
	// ConcurrencyKey (ConcurrencyKeyOf): it is not stored apart, so that a
	// changed key regroups waiting events.
	Payload     json.RawMessage `json:"payload,omitempty"`
	MaxAttempts int             `json:"maxAttempts"`
	Shard       int             `json:"shard"`
	Status      EventStatus     `json:"status"`
	Attempts    int             `json:"attempts"`
	LastError   string          `json:"lastError,omitempty"`
	// Fence is the fencing token of the queue-shard lease under which the
	// event was last claimed; a holder with an older fence loses.
	Fence int64 `json:"fence,omitempty"`
	// TakenOver is set only on the events EventClaimDue returns, and never
	// stored: the event was scheduled under an older fence, so its previous
	// owner may have delivered it already.
	TakenOver bool `json:"-"`
	// ReleaseToken authorises the consumer's release and extend calls. It is
	// never shown by the API.
	ReleaseToken   string     `json:"-"`
	TokenExpiresAt *time.Time `json:"tokenExpiresAt,omitempty"`
	TokenTimedOut  bool       `json:"tokenTimedOut,omitempty"`
	DeliveredAt    *time.Time `json:"deliveredAt,omitempty"`
	FinishedAt     *time.Time `json:"finishedAt,omitempty"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
	// TraceParent is the W3C traceparent of the span of the fire that
	// made the event, set only when tracing is on: each delivery
	// attempt's span is its child, on whichever instance delivers it.
	TraceParent string `json:"traceParent,omitempty"`
	// TraceState is the W3C tracestate of a delivery attempt's span, if
	// it has one: set with the attempt's TraceParent for the deliverer,
	// never stored.
	TraceState string `json:"-"`
}

// Policy is a throttling policy: at most MaxInFlight tokens out at once,
// shared by every schedule that names it, and, if RatePerSecond is set, at
// most Burst events sent at once and RatePerSecond on average.
type Policy struct {
	ID           string        `json:"id"`
	TenantID     string        `json:"tenantId"`
	Name         string        `json:"name"`
	MaxInFlight  int           `json:"maxInFlight"`
	TokenTimeout time.Duration `json:"tokenTimeout"`
	// AutoRelease returns the token as soon as the event is delivered
	// (rate-style throttling) instead of waiting for the release call.
	AutoRelease bool `json:"autoRelease"`
	// RatePerSecond, if positive, is the most events per second the policy
	// lets out on average; zero means no rate limit.
	RatePerSecond float64 `json:"ratePerSecond,omitempty"`
	// Burst is how many events may go at once after a quiet spell when
	// RatePerSecond is set (at least 1; zero with a rate means
	// DefaultBurst). It is unused without a rate.
	Burst int `json:"burst,omitempty"`
	// Adaptive, if set, lets the owner move the policy's limit between
	// Adaptive.Min and Adaptive.Max from the consumer's signals; MaxInFlight
	// is then Adaptive.Max (the ceiling the store enforces).
	Adaptive *AdaptiveLimit `json:"adaptive,omitempty"`
	// EffectiveLimit is the adaptive limit its owner last persisted (zero:
	// none yet, Adaptive.Max applies), LimitReason why it last changed
	// (throttle.LimitReason*), LimitChangedAt when.
	EffectiveLimit int       `json:"effectiveLimit,omitempty"`
	LimitReason    string    `json:"limitReason,omitempty"`
	LimitChangedAt time.Time `json:"limitChangedAt,omitzero"`
	// HoldTime is the mean time from delivery to release its owner last
	// measured (zero: not measured yet).
	HoldTime time.Duration `json:"holdTime,omitempty"`
	// ConcurrencyKey, if set, makes MaxInFlight a bound per key value: a
	// JSON pointer (RFC 6901) into the event payload, or "scheduleId".
	// Events whose payload lacks the value share the key "".
	ConcurrencyKey string `json:"concurrencyKey,omitempty"`
	// MaxInFlightTotal, if positive, bounds the tokens out across all key
	// values of a policy with a ConcurrencyKey.
	MaxInFlightTotal int `json:"maxInFlightTotal,omitempty"`
	// InUse is the persisted number of tokens out. The store changes it only
	// by compare-and-set so that it never exceeds MaxInFlight.
	InUse int `json:"tokensInUse"`
	// TimedOut counts tokens reclaimed because they were not released in time.
	TimedOut  int64     `json:"tokenTimeouts"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Labels are the client's key/value pairs.
	Labels map[string]string `json:"labels,omitempty"`
	// Limits is the policy's limit schedule: lower limits at times of day
	// or in calendar periods (see Effective).
	Limits []LimitRule `json:"limits,omitempty"`
	// Hold, if set, is the consumer's temporary ceiling; it is ignored
	// from Hold.Until on.
	Hold *PolicyHold `json:"hold,omitempty"`
}

// AdaptiveLimit bounds a policy's adaptive limit: Min >= 1, Max >= Min.
type AdaptiveLimit struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// DefaultBurst is the burst of a policy that has a rate and no burst:
// ceil(rate), at least 1.
func DefaultBurst(ratePerSecond float64) int {
	return max(1, int(math.Ceil(ratePerSecond)))
}

// Lease is a time-limited claim on a unit of work (an emitter partition, an
// event queue shard, a policy bucket). Fence increases every time the lease
// changes owner, so a holder with an older fence can be told apart.
type Lease struct {
	Name      string    `json:"name"`
	Owner     string    `json:"owner"`
	Fence     int64     `json:"fence"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Addr is what the holder advertises on it (store.LeaseStore's
	// LeaseAdvertise): on a member lease, the API base URL of the instance.
	// A new owner's acquisition clears it.
	Addr string `json:"addr,omitempty"`
}

// Watermark is the end of the last window an emitter partition finished.
type Watermark struct {
	Partition int       `json:"partition"`
	Until     time.Time `json:"until"`
	Fence     int64     `json:"fence"`
}

// IdempotencyRecord is the stored first answer to a create call that carried
// an Idempotency-Key.
type IdempotencyRecord struct {
	TenantID    string    `json:"tenantId"`
	Key         string    `json:"key"`
	RequestHash string    `json:"requestHash"`
	Status      int       `json:"status"`
	Body        []byte    `json:"body"`
	CreatedAt   time.Time `json:"createdAt"`
}

// PriorityClasses are the values of PriorityClass.
var PriorityClasses = []string{"high", "default", "low"}

// PriorityClass buckets a priority, a free integer, into the few values a
// metric label takes: "high" above 0, "default" at 0, "low" below 0.
func PriorityClass(p int) string {
	switch {
	case p > 0:
		return "high"
	case p < 0:
		return "low"
	}
	return "default"
}
