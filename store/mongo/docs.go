package mongo

import (
	"math"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/schedulerd/schedulerd/model"
)

// The document types below are the stored shape of the model types. They
// are separate from model so that model stays free of driver tags, and so
// that instants can be stored as exact int64 Unix nanoseconds (see the
// package doc). Field names are the model's JSON names.

// Bounds of the instants int64 nanoseconds can hold (years 1678 to 2262).
var (
	minInstant = time.Unix(0, math.MinInt64+1)
	maxInstant = time.Unix(0, math.MaxInt64)
)

// unixNano stores t exactly; the zero time is stored as 0 (and read back as
// the zero time), since time.Time{}.UnixNano is not meaningful. Instants
// beyond what int64 nanoseconds hold (an "end at 9999-12-31") are clamped
// to the nearest bound, which keeps their order in queries.
func unixNano(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minInstant):
		return math.MinInt64 + 1
	case t.After(maxInstant):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// fromNano is the inverse of unixNano; instants come back in UTC.
func fromNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func unixNanoPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	n := unixNano(*t)
	return &n
}

func fromNanoPtr(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := fromNano(*n)
	return &t
}

type tenantDoc struct {
	ID        string            `bson:"_id"`
	Name      string            `bson:"name"`
	Weight    int               `bson:"weight,omitempty"`
	Quotas    tenantQuotasDoc   `bson:"quotas"`
	Targets   *tenantTargetsDoc `bson:"targets,omitempty"`
	Notify    []notifyDoc       `bson:"notify,omitempty"`
	Version   int64             `bson:"version"`
	CreatedAt int64             `bson:"createdAt"`
}

type tenantQuotasDoc struct {
	MaxSchedules       int `bson:"maxSchedules,omitempty"`
	MaxEventsPerFire   int `bson:"maxEventsPerFire,omitempty"`
	MaxEventsPerMinute int `bson:"maxEventsPerMinute,omitempty"`
	MaxEventsStored    int `bson:"maxEventsStored,omitempty"`
	MaxCalendars       int `bson:"maxCalendars,omitempty"`
}

type tenantTargetsDoc struct {
	Hosts            []string `bson:"hosts,omitempty"`
	CIDRs            []string `bson:"cidrs,omitempty"`
	QueueURLPrefixes []string `bson:"queueUrlPrefixes,omitempty"`
}

func toTenantDoc(t *model.Tenant) tenantDoc {
	d := tenantDoc{
		ID: t.ID, Name: t.Name, Weight: t.Weight, Version: t.Version, CreatedAt: unixNano(t.CreatedAt),
		Quotas: tenantQuotasDoc(t.Quotas), Notify: toNotifyDocs(t.Notify),
	}
	if t.Targets != nil {
		d.Targets = &tenantTargetsDoc{Hosts: t.Targets.Hosts, CIDRs: t.Targets.CIDRs, QueueURLPrefixes: t.Targets.QueueURLPrefixes}
	}
	return d
}

func (d *tenantDoc) model() *model.Tenant {
	t := &model.Tenant{
		ID: d.ID, Name: d.Name, Weight: d.Weight, Version: d.Version, CreatedAt: fromNano(d.CreatedAt),
		Quotas: model.TenantQuotas(d.Quotas), Notify: notifyModel(d.Notify),
	}
	if d.Targets != nil {
		t.Targets = &model.TenantTargets{Hosts: d.Targets.Hosts, CIDRs: d.Targets.CIDRs, QueueURLPrefixes: d.Targets.QueueURLPrefixes}
	}
	return t
}

type apiKeyDoc struct {
	ID       string `bson:"_id"`
	TenantID string `bson:"tenantId"`
	Hash     string `bson:"hash"`
	Prefix   string `bson:"prefix"`
	// Absent on tenant keys.
	PolicyID  string `bson:"policyId,omitempty"`
	CreatedAt int64  `bson:"createdAt"`
	RevokedAt *int64 `bson:"revokedAt,omitempty"`
}

func toAPIKeyDoc(k *model.APIKey) apiKeyDoc {
	return apiKeyDoc{
		ID: k.ID, TenantID: k.TenantID, Hash: k.Hash, Prefix: k.Prefix, PolicyID: k.PolicyID,
		CreatedAt: unixNano(k.CreatedAt), RevokedAt: unixNanoPtr(k.RevokedAt),
	}
}

func (d *apiKeyDoc) model() *model.APIKey {
	return &model.APIKey{
		ID: d.ID, TenantID: d.TenantID, Hash: d.Hash, Prefix: d.Prefix, PolicyID: d.PolicyID,
		CreatedAt: fromNano(d.CreatedAt), RevokedAt: fromNanoPtr(d.RevokedAt),
	}
}

type idempotencyDoc struct {
	TenantID    string `bson:"tenantId"`
	Key         string `bson:"key"`
	RequestHash string `bson:"requestHash"`
	Status      int    `bson:"status"`
	Body        []byte `bson:"body,omitempty"`
	CreatedAt   int64  `bson:"createdAt"`
	// CreatedDate is CreatedAt for the TTL index (see retention.go).
	CreatedDate bson.DateTime `bson:"createdDate"`
}

func toIdempotencyDoc(r *model.IdempotencyRecord) idempotencyDoc {
	return idempotencyDoc{
		TenantID: r.TenantID, Key: r.Key, RequestHash: r.RequestHash,
		Status: r.Status, Body: r.Body, CreatedAt: unixNano(r.CreatedAt),
		CreatedDate: bsonDate(r.CreatedAt),
	}
}

func (d *idempotencyDoc) model() *model.IdempotencyRecord {
	return &model.IdempotencyRecord{
		TenantID: d.TenantID, Key: d.Key, RequestHash: d.RequestHash,
		Status: d.Status, Body: d.Body, CreatedAt: fromNano(d.CreatedAt),
	}
}

type targetDoc struct {
	Type     string `bson:"type"`
	URL      string `bson:"url,omitempty"`
	QueueURL string `bson:"queueUrl,omitempty"`
}

func toTargetDoc(t model.Target) targetDoc {
	return targetDoc{Type: string(t.Type), URL: t.URL, QueueURL: t.QueueURL}
}

func (d targetDoc) model() model.Target {
	return model.Target{Type: model.TargetType(d.Type), URL: d.URL, QueueURL: d.QueueURL}
}

type scheduleDoc struct {
	ID          string    `bson:"_id"`
	TenantID    string    `bson:"tenantId"`
	Name        string    `bson:"name"`
	Cron        string    `bson:"cron,omitempty"`
	RunAt       *int64    `bson:"runAt,omitempty"`
	Timezone    string    `bson:"timezone"`
	EventCount  int       `bson:"eventCount"`
	PolicyID    string    `bson:"policyId"`
	Window      int64     `bson:"window,omitempty"`
	Spread      bool      `bson:"spread,omitempty"`
	Priority    int       `bson:"priority,omitempty"`
	Target      targetDoc `bson:"target"`
	Payload     []byte    `bson:"payload,omitempty"`
	MaxAttempts int       `bson:"maxAttempts"`
	StartAt     *int64    `bson:"startAt,omitempty"`
	EndAt       *int64    `bson:"endAt,omitempty"`
	Misfire     string    `bson:"misfire"`
	Overlap     string    `bson:"overlap"`
	State       string    `bson:"state"`
	Partition   int       `bson:"partition"`
	Version     int64     `bson:"version"`
	CreatedAt   int64     `bson:"createdAt"`
	UpdatedAt   int64     `bson:"updatedAt"`
	// EndsAt is the end of an active schedule that has one (a one-off's
	// fire instant, a cron schedule's endAt), CompletedAt the UpdatedAt of
	// a completed one: what ScheduleComplete and ScheduleDeleteCompleted
	// find them by.
	EndsAt      *int64 `bson:"endsAt,omitempty"`
	CompletedAt *int64 `bson:"completedAt,omitempty"`
	// Labels are the pairs "key=value", sorted: one array that an index
	// on (tenantId, labels, _id) serves for any key, including keys with
	// '.', which a field path would split.
	Labels     []string `bson:"labels,omitempty"`
	Jitter     int64    `bson:"jitter,omitempty"` // nanoseconds
	PausedNote string   `bson:"pausedNote,omitempty"`
	PausedAt   *int64   `bson:"pausedAt,omitempty"`
	PausedBy   string   `bson:"pausedBy,omitempty"`
	// ResumeAt is what ScheduleResumeDue finds a paused schedule by.
	ResumeAt  *int64 `bson:"resumeAt,omitempty"`
	SkipUntil *int64 `bson:"skipUntil,omitempty"`
	// ExcludeCalendars is multikey-indexed with tenantId (calendar
	// deletion's count).
	ExcludeCalendars []string `bson:"excludeCalendars,omitempty"`
	OnExcluded       string   `bson:"onExcluded,omitempty"`
	Interval         int64    `bson:"interval,omitempty"` // nanoseconds
	IntervalNext     *int64   `bson:"intervalNext,omitempty"`
	// IntervalDue is the next fire of an active interval schedule: what
	// ScheduleIntervalDue finds it by.
	IntervalDue  *int64      `bson:"intervalDue,omitempty"`
	Crons        []string    `bson:"crons,omitempty"`
	CreatedTrace string      `bson:"createdTrace,omitempty"`
	Notify       []notifyDoc `bson:"notify,omitempty"`
	// After is indexed by its scheduleId (ScheduleListAfter).
	After       *afterDoc `bson:"after,omitempty"`
	Deadline    int64     `bson:"deadline,omitempty"` // nanoseconds
	OnDeadline  string    `bson:"onDeadline,omitempty"`
	MaxEventAge int64     `bson:"maxEventAge,omitempty"` // nanoseconds
}

type notifyDoc struct {
	URL      string   `bson:"url,omitempty"`
	QueueURL string   `bson:"queueUrl,omitempty"`
	On       []string `bson:"on"`
}

type afterDoc struct {
	ScheduleID string `bson:"scheduleId"`
	When       string `bson:"when"`
}

func toNotifyDocs(ns []model.Notify) []notifyDoc {
	if ns == nil {
		return nil
	}
	out := make([]notifyDoc, len(ns))
	for i, n := range ns {
		on := make([]string, len(n.On))
		for j, k := range n.On {
			on[j] = string(k)
		}
		out[i] = notifyDoc{URL: n.URL, QueueURL: n.QueueURL, On: on}
	}
	return out
}

func notifyModel(ds []notifyDoc) []model.Notify {
	if ds == nil {
		return nil
	}
	out := make([]model.Notify, len(ds))
	for i, d := range ds {
		on := make([]model.NotifyKind, len(d.On))
		for j, k := range d.On {
			on[j] = model.NotifyKind(k)
		}
		out[i] = model.Notify{URL: d.URL, QueueURL: d.QueueURL, On: on}
	}
	return out
}

func toAfterDoc(a *model.After) *afterDoc {
	if a == nil {
		return nil
	}
	return &afterDoc{ScheduleID: a.ScheduleID, When: string(a.When)}
}

func (d *afterDoc) model() *model.After {
	if d == nil {
		return nil
	}
	return &model.After{ScheduleID: d.ScheduleID, When: model.AfterWhen(d.When)}
}

func toScheduleDoc(s *model.Schedule) scheduleDoc {
	d := scheduleDoc{
		ID: s.ID, TenantID: s.TenantID, Name: s.Name, Cron: s.Cron,
		RunAt: unixNanoPtr(s.RunAt), Timezone: s.Timezone, EventCount: s.EventCount,
		PolicyID: s.PolicyID, Window: int64(s.Window), Spread: s.Spread,
		Priority: s.Priority, Target: toTargetDoc(s.Target), Payload: s.Payload,
		MaxAttempts: s.MaxAttempts, StartAt: unixNanoPtr(s.StartAt), EndAt: unixNanoPtr(s.EndAt),
		Misfire: string(s.Misfire), Overlap: string(s.Overlap), State: string(s.State),
		Partition: s.Partition, Version: s.Version,
		CreatedAt: unixNano(s.CreatedAt), UpdatedAt: unixNano(s.UpdatedAt),
		Labels: labelPairs(s.Labels), Jitter: int64(s.Jitter),
		PausedNote: s.PausedNote, PausedAt: unixNanoPtr(s.PausedAt), PausedBy: s.PausedBy,
		ResumeAt: unixNanoPtr(s.ResumeAt), SkipUntil: unixNanoPtr(s.SkipUntil),
		ExcludeCalendars: s.ExcludeCalendars, OnExcluded: string(s.OnExcluded),
		Interval: int64(s.Interval), IntervalNext: unixNanoPtr(s.IntervalNext), Crons: s.Crons,
		CreatedTrace: s.CreatedTrace,
		Notify:       toNotifyDocs(s.Notify), After: toAfterDoc(s.After),
		Deadline: int64(s.Deadline), OnDeadline: string(s.OnDeadline), MaxEventAge: int64(s.MaxEventAge),
	}
	if s.Interval > 0 && (s.State == model.ScheduleActive || s.State == "") {
		d.IntervalDue = new(unixNano(s.IntervalNextFire()))
	}
	switch {
	case s.State == model.ScheduleCompleted:
		d.CompletedAt = &d.UpdatedAt
	case s.State != model.ScheduleActive && s.State != "":
	case s.RunAt != nil:
		d.EndsAt = unixNanoPtr(new(model.FireInstant(*s.RunAt)))
	case s.EndAt != nil:
		d.EndsAt = d.EndAt
	}
	return d
}

func (d *scheduleDoc) model() *model.Schedule {
	return &model.Schedule{
		ID: d.ID, TenantID: d.TenantID, Name: d.Name, Cron: d.Cron,
		RunAt: fromNanoPtr(d.RunAt), Timezone: d.Timezone, EventCount: d.EventCount,
		PolicyID: d.PolicyID, Window: time.Duration(d.Window), Spread: d.Spread,
		Priority: d.Priority, Target: d.Target.model(), Payload: d.Payload,
		MaxAttempts: d.MaxAttempts, StartAt: fromNanoPtr(d.StartAt), EndAt: fromNanoPtr(d.EndAt),
		Misfire: model.MisfirePolicy(d.Misfire), Overlap: model.OverlapPolicy(d.Overlap),
		State: model.ScheduleState(d.State), Partition: d.Partition, Version: d.Version,
		CreatedAt: fromNano(d.CreatedAt), UpdatedAt: fromNano(d.UpdatedAt),
		Labels: labelMap(d.Labels), Jitter: time.Duration(d.Jitter),
		PausedNote: d.PausedNote, PausedAt: fromNanoPtr(d.PausedAt), PausedBy: d.PausedBy,
		ResumeAt: fromNanoPtr(d.ResumeAt), SkipUntil: fromNanoPtr(d.SkipUntil),
		ExcludeCalendars: d.ExcludeCalendars, OnExcluded: model.OnExcludedPolicy(d.OnExcluded),
		Interval: time.Duration(d.Interval), IntervalNext: fromNanoPtr(d.IntervalNext), Crons: d.Crons,
		CreatedTrace: d.CreatedTrace,
		Notify:       notifyModel(d.Notify), After: d.After.model(),
		Deadline: time.Duration(d.Deadline), OnDeadline: model.DeadlinePolicy(d.OnDeadline),
		MaxEventAge: time.Duration(d.MaxEventAge),
	}
}

// childDoc has a fresh ObjectID per write (not a deterministic id): a
// ScheduleUpdate that loses its compare-and-set deletes exactly the children
// it wrote, even if a concurrent winner wrote children for the same version.
type childDoc struct {
	ID               bson.ObjectID `bson:"_id,omitempty"`
	ScheduleID       string        `bson:"scheduleId"`
	TenantID         string        `bson:"tenantId"`
	ScheduleVersion  int64         `bson:"scheduleVersion"`
	Partition        int           `bson:"partition"`
	Timezone         string        `bson:"timezone"`
	LaunchExpression string        `bson:"launchExpression"`
	Minute           int           `bson:"minute"`
}

func toChildDoc(c *model.Child) childDoc {
	return childDoc{
		ScheduleID: c.ScheduleID, TenantID: c.TenantID, ScheduleVersion: c.ScheduleVersion,
		Partition: c.Partition, Timezone: c.Timezone,
		LaunchExpression: c.LaunchExpression, Minute: c.Minute,
	}
}

func (d *childDoc) model() model.Child {
	return model.Child{
		ScheduleID: d.ScheduleID, TenantID: d.TenantID, ScheduleVersion: d.ScheduleVersion,
		Partition: d.Partition, Timezone: d.Timezone,
		LaunchExpression: d.LaunchExpression, Minute: d.Minute,
	}
}

type watermarkDoc struct {
	Partition int   `bson:"_id"`
	Until     int64 `bson:"until"`
	Fence     int64 `bson:"fence"`
}

type fireDoc struct {
	ID         string `bson:"_id"`
	ScheduleID string `bson:"scheduleId"`
	TenantID   string `bson:"tenantId"`
	FireTime   int64  `bson:"fireTime"`
	LocalTime  string `bson:"localTime"`
	Count      int    `bson:"count"`
	Decision   string `bson:"decision"`
	Note       string `bson:"note,omitempty"`
	Remaining  int    `bson:"remaining,omitempty"`
	CreatedAt  int64  `bson:"createdAt"`
	Jitter     int64  `bson:"jitter,omitempty"` // nanoseconds
	Payload    []byte `bson:"payload,omitempty"`
	Watched    bool   `bson:"watched,omitempty"`
	FinishedAt *int64 `bson:"finishedAt,omitempty"`
	// Watching is 1 while the fire is watched and not finished: what
	// FireListWatched finds it by.
	Watching   int    `bson:"watching,omitempty"`
	Deadline   *int64 `bson:"deadline,omitempty"`
	OnDeadline string `bson:"onDeadline,omitempty"`
	// DeadlineOpen is Deadline until FireDeadlineDone closes it: what
	// FireDeadlineDue finds the fire by (a partial index).
	DeadlineOpen *int64   `bson:"deadlineOpen,omitempty"`
	Missed       *missDoc `bson:"deadlineMissed,omitempty"`
	TraceParent  string   `bson:"traceParent,omitempty"`
}

type missDoc struct {
	At        int64 `bson:"at"`
	Remaining int   `bson:"remaining"`
}

func toFireDoc(f *model.Fire) fireDoc {
	return fireDoc{
		ID: f.ID, ScheduleID: f.ScheduleID, TenantID: f.TenantID,
		FireTime: unixNano(f.FireTime), LocalTime: f.LocalTime, Count: f.Count,
		Decision: string(f.Decision), Note: f.Note, Remaining: f.Remaining, CreatedAt: unixNano(f.CreatedAt),
		Jitter: int64(f.Jitter), Payload: f.Payload,
		Deadline: unixNanoPtr(f.Deadline), OnDeadline: string(f.OnDeadline), Missed: toMissDoc(f.DeadlineMissed),
		DeadlineOpen: openDeadline(f),
		Watched:      f.Watched, FinishedAt: unixNanoPtr(f.FinishedAt), Watching: watching(f),
		TraceParent: f.TraceParent,
	}
}

// watching is fireDoc.Watching of f.
func watching(f *model.Fire) int {
	if f.Watched && f.FinishedAt == nil {
		return 1
	}
	return 0
}

func openDeadline(f *model.Fire) *int64 {
	if f.DeadlineMissed != nil {
		return nil
	}
	return unixNanoPtr(f.Deadline)
}

func toMissDoc(m *model.DeadlineMiss) *missDoc {
	if m == nil {
		return nil
	}
	return &missDoc{At: unixNano(m.At), Remaining: m.Remaining}
}

func (d *fireDoc) model() *model.Fire {
	return &model.Fire{
		ID: d.ID, ScheduleID: d.ScheduleID, TenantID: d.TenantID,
		FireTime: fromNano(d.FireTime), LocalTime: d.LocalTime, Count: d.Count,
		Decision: model.FireDecision(d.Decision), Note: d.Note, Remaining: d.Remaining, CreatedAt: fromNano(d.CreatedAt),
		Jitter: time.Duration(d.Jitter), Payload: d.Payload,
		Watched: d.Watched, FinishedAt: fromNanoPtr(d.FinishedAt),
		Deadline: fromNanoPtr(d.Deadline), OnDeadline: model.DeadlinePolicy(d.OnDeadline),
		DeadlineMissed: d.Missed.model(), TraceParent: d.TraceParent,
	}
}

func (m *missDoc) model() *model.DeadlineMiss {
	if m == nil {
		return nil
	}
	return &model.DeadlineMiss{At: fromNano(m.At), Remaining: m.Remaining}
}

type eventDoc struct {
	ID             string    `bson:"_id"`
	TenantID       string    `bson:"tenantId"`
	ScheduleID     string    `bson:"scheduleId"`
	FireID         string    `bson:"fireId"`
	FireTime       int64     `bson:"fireTime"`
	Index          int       `bson:"index"`
	Count          int       `bson:"count"`
	LaunchAt       int64     `bson:"launchAt"`
	Deadline       *int64    `bson:"deadline,omitempty"`
	ExpireAt       *int64    `bson:"expireAt,omitempty"`
	Priority       int       `bson:"priority,omitempty"`
	PolicyID       string    `bson:"policyId"`
	Target         targetDoc `bson:"target"`
	Payload        []byte    `bson:"payload,omitempty"`
	MaxAttempts    int       `bson:"maxAttempts"`
	Shard          int       `bson:"shard"`
	Status         string    `bson:"status"`
	Attempts       int       `bson:"attempts"`
	LastError      string    `bson:"lastError,omitempty"`
	Fence          int64     `bson:"fence"`
	ReleaseToken   string    `bson:"releaseToken,omitempty"`
	TokenExpiresAt *int64    `bson:"tokenExpiresAt,omitempty"`
	TokenTimedOut  bool      `bson:"tokenTimedOut,omitempty"`
	DeliveredAt    *int64    `bson:"deliveredAt,omitempty"`
	FinishedAt     *int64    `bson:"finishedAt,omitempty"`
	CreatedAt      int64     `bson:"createdAt"`
	UpdatedAt      int64     `bson:"updatedAt"`
	// FinishedDate is FinishedAt of a released or cancelled event, for the
	// TTL index (see retention.go); absent otherwise.
	FinishedDate *bson.DateTime `bson:"finishedDate,omitempty"`
	TraceParent  string         `bson:"traceParent,omitempty"`
	// Lane is the claim's lane of the event (eventLane); an event written
	// before lanes has none until a claim gives it its own (fillLanes).
	Lane string `bson:"lane,omitempty"`
}

func toEventDoc(e *model.Event) eventDoc {
	return eventDoc{
		ID: e.ID, TenantID: e.TenantID, ScheduleID: e.ScheduleID, FireID: e.FireID,
		FireTime: unixNano(e.FireTime), Index: e.Index, Count: e.Count,
		LaunchAt: unixNano(e.LaunchAt), Deadline: unixNanoPtr(e.Deadline), ExpireAt: unixNanoPtr(e.ExpireAt),
		Priority: e.Priority, PolicyID: e.PolicyID, Target: toTargetDoc(e.Target),
		Payload: e.Payload, MaxAttempts: e.MaxAttempts, Shard: e.Shard,
		Status: string(e.Status), Attempts: e.Attempts, LastError: e.LastError,
		Fence: e.Fence, ReleaseToken: e.ReleaseToken,
		TokenExpiresAt: unixNanoPtr(e.TokenExpiresAt), TokenTimedOut: e.TokenTimedOut,
		DeliveredAt: unixNanoPtr(e.DeliveredAt), FinishedAt: unixNanoPtr(e.FinishedAt),
		CreatedAt: unixNano(e.CreatedAt), UpdatedAt: unixNano(e.UpdatedAt),
		FinishedDate: finishedDate(e.Status, e.FinishedAt, e.UpdatedAt),
		TraceParent:  e.TraceParent,
		Lane:         eventLane(e.TenantID, e.PolicyID, e.Priority),
	}
}

// finishedDate is the TTL date of an event that is (or becomes) st with
// finishedAt, or at (the time of the write) when finishedAt is not given:
// nil unless st is released or cancelled.
func finishedDate(st model.EventStatus, finishedAt *time.Time, at time.Time) *bson.DateTime {
	if st != model.EventReleased && st != model.EventCancelled {
		return nil
	}
	t := at
	if finishedAt != nil {
		t = *finishedAt
	}
	if t.IsZero() {
		return nil // no instant to count from: the purge job's to judge
	}
	d := bsonDate(t)
	return &d
}

func (d *eventDoc) model() *model.Event {
	return &model.Event{
		ID: d.ID, TenantID: d.TenantID, ScheduleID: d.ScheduleID, FireID: d.FireID,
		FireTime: fromNano(d.FireTime), Index: d.Index, Count: d.Count,
		LaunchAt: fromNano(d.LaunchAt), Deadline: fromNanoPtr(d.Deadline), ExpireAt: fromNanoPtr(d.ExpireAt),
		Priority: d.Priority, PolicyID: d.PolicyID, Target: d.Target.model(),
		Payload: d.Payload, MaxAttempts: d.MaxAttempts, Shard: d.Shard,
		Status: model.EventStatus(d.Status), Attempts: d.Attempts, LastError: d.LastError,
		Fence: d.Fence, ReleaseToken: d.ReleaseToken,
		TokenExpiresAt: fromNanoPtr(d.TokenExpiresAt), TokenTimedOut: d.TokenTimedOut,
		DeliveredAt: fromNanoPtr(d.DeliveredAt), FinishedAt: fromNanoPtr(d.FinishedAt),
		CreatedAt: fromNano(d.CreatedAt), UpdatedAt: fromNano(d.UpdatedAt),
		TraceParent: d.TraceParent,
	}
}

type policyDoc struct {
	ID           string `bson:"_id"`
	TenantID     string `bson:"tenantId"`
	Name         string `bson:"name"`
	MaxInFlight  int    `bson:"maxInFlight"`
	TokenTimeout int64  `bson:"tokenTimeout"`
	AutoRelease  bool   `bson:"autoRelease"`
	// Absent in documents written before policies had rates: zero, no
	// rate limit.
	RatePerSecond float64 `bson:"ratePerSecond,omitempty"`
	Burst         int     `bson:"burst,omitempty"`
	// Absent unless the policy is adaptive.
	AdaptiveMin    int    `bson:"adaptiveMin,omitempty"`
	AdaptiveMax    int    `bson:"adaptiveMax,omitempty"`
	EffectiveLimit int    `bson:"effectiveLimit,omitempty"`
	LimitReason    string `bson:"limitReason,omitempty"`
	LimitChangedAt int64  `bson:"limitChangedAt,omitempty"`
	// HoldTime is the measured mean hold, in nanoseconds (PolicySetHoldTime).
	HoldTime int64 `bson:"holdTime,omitempty"`
	// Absent before policies had concurrency keys: none.
	ConcurrencyKey   string `bson:"concurrencyKey,omitempty"`
	MaxInFlightTotal int    `bson:"maxInFlightTotal"`
	InUse            int    `bson:"inUse"`
	TimedOut         int64  `bson:"timedOut"`
	Version          int64  `bson:"version"`
	CreatedAt        int64  `bson:"createdAt"`
	UpdatedAt        int64  `bson:"updatedAt"`
	// Labels as in scheduleDoc.
	Labels []string `bson:"labels,omitempty"`
	// Absent without a limit schedule or a hold.
	Limits []limitRuleDoc `bson:"limits,omitempty"`
	Hold   *holdDoc       `bson:"hold,omitempty"`
}

type limitRuleDoc struct {
	Days          []string `bson:"days,omitempty"`
	From          string   `bson:"from,omitempty"`
	To            string   `bson:"to,omitempty"`
	Timezone      string   `bson:"timezone,omitempty"`
	CalendarID    string   `bson:"calendarId,omitempty"`
	MaxInFlight   int      `bson:"maxInFlight"`
	RatePerSecond float64  `bson:"ratePerSecond,omitempty"`
}

type holdDoc struct {
	Until       int64  `bson:"until"`
	MaxInFlight int    `bson:"maxInFlight"`
	SetAt       int64  `bson:"setAt"`
	By          string `bson:"by,omitempty"`
}

func toLimitDocs(rs []model.LimitRule) []limitRuleDoc {
	if len(rs) == 0 {
		return nil
	}
	out := make([]limitRuleDoc, len(rs))
	for i, r := range rs {
		w := r.When
		out[i] = limitRuleDoc{Days: w.Days, From: w.From, To: w.To, Timezone: w.Timezone, CalendarID: w.CalendarID, MaxInFlight: r.MaxInFlight, RatePerSecond: r.RatePerSecond}
	}
	return out
}

func toHoldDoc(h *model.PolicyHold) *holdDoc {
	if h == nil {
		return nil
	}
	return &holdDoc{Until: unixNano(h.Until), MaxInFlight: h.MaxInFlight, SetAt: unixNano(h.SetAt), By: h.By}
}

func toPolicyDoc(p *model.Policy) policyDoc {
	d := policyDoc{
		ID: p.ID, TenantID: p.TenantID, Name: p.Name, MaxInFlight: p.MaxInFlight,
		TokenTimeout: int64(p.TokenTimeout), AutoRelease: p.AutoRelease,
		RatePerSecond: p.RatePerSecond, Burst: p.Burst,
		ConcurrencyKey: p.ConcurrencyKey, MaxInFlightTotal: p.MaxInFlightTotal,
		InUse: p.InUse, TimedOut: p.TimedOut, Version: p.Version,
		CreatedAt: unixNano(p.CreatedAt), UpdatedAt: unixNano(p.UpdatedAt),
		Labels: labelPairs(p.Labels), HoldTime: int64(p.HoldTime),
		Limits: toLimitDocs(p.Limits), Hold: toHoldDoc(p.Hold),
	}
	if p.Adaptive != nil {
		d.AdaptiveMin, d.AdaptiveMax = p.Adaptive.Min, p.Adaptive.Max
		d.EffectiveLimit, d.LimitReason = p.EffectiveLimit, p.LimitReason
		if !p.LimitChangedAt.IsZero() {
			d.LimitChangedAt = unixNano(p.LimitChangedAt)
		}
	}
	return d
}

func (d *policyDoc) model() *model.Policy {
	p := &model.Policy{
		ID: d.ID, TenantID: d.TenantID, Name: d.Name, MaxInFlight: d.MaxInFlight,
		TokenTimeout: time.Duration(d.TokenTimeout), AutoRelease: d.AutoRelease,
		RatePerSecond: d.RatePerSecond, Burst: d.Burst,
		ConcurrencyKey: d.ConcurrencyKey, MaxInFlightTotal: d.MaxInFlightTotal,
		InUse: d.InUse, TimedOut: d.TimedOut, Version: d.Version,
		CreatedAt: fromNano(d.CreatedAt), UpdatedAt: fromNano(d.UpdatedAt),
		Labels: labelMap(d.Labels), HoldTime: time.Duration(d.HoldTime),
	}
	for _, r := range d.Limits {
		p.Limits = append(p.Limits, model.LimitRule{
			When:        model.LimitWhen{Days: r.Days, From: r.From, To: r.To, Timezone: r.Timezone, CalendarID: r.CalendarID},
			MaxInFlight: r.MaxInFlight, RatePerSecond: r.RatePerSecond,
		})
	}
	if h := d.Hold; h != nil {
		p.Hold = &model.PolicyHold{Until: fromNano(h.Until), MaxInFlight: h.MaxInFlight, SetAt: fromNano(h.SetAt), By: h.By}
	}
	if d.AdaptiveMin > 0 {
		p.Adaptive = &model.AdaptiveLimit{Min: d.AdaptiveMin, Max: d.AdaptiveMax}
		p.EffectiveLimit, p.LimitReason = d.EffectiveLimit, d.LimitReason
		if d.LimitChangedAt != 0 {
			p.LimitChangedAt = fromNano(d.LimitChangedAt)
		}
	}
	return p
}

type leaseDoc struct {
	Name      string `bson:"_id"`
	Owner     string `bson:"owner"`
	Fence     int64  `bson:"fence"`
	ExpiresAt int64  `bson:"expiresAt"`
	// ExpiresDate is ExpiresAt of a member lease, for the TTL index (see
	// retention.go); unit leases have none.
	ExpiresDate *bson.DateTime `bson:"expiresDate,omitempty"`
	Addr        string         `bson:"addr,omitempty"`
}

func (d *leaseDoc) model() model.Lease {
	return model.Lease{Name: d.Name, Owner: d.Owner, Fence: d.Fence, ExpiresAt: fromNano(d.ExpiresAt), Addr: d.Addr}
}

// labelPairs is the stored form of labels: "key=value" pairs in key order
// (neither a key nor a value holds '='); nil for none.
func labelPairs(labels map[string]string) []string {
	if len(labels) == 0 {
		return nil
	}
	out := make([]string, 0, len(labels))
	for k, v := range labels {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// labelMap reads labelPairs' form back.
func labelMap(pairs []string) map[string]string {
	if len(pairs) == 0 {
		return nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		out[k] = v
	}
	return out
}
