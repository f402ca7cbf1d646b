package emitter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
)

// Deferred emissions. Before events are written the emitter asks two
// questions: does the disk guard let writes through (Deps.Disk), and does
// the tenant have room left in this minute's maxEventsPerMinute (Deps.Quotas)?
// A fire that is refused is recorded at once with Remaining = Count and a
// note saying why ("deferred: ..."); its events are then written by the
// background workers (background.go), one chunk at a time, each chunk only
// when both questions say yes. A refused chunk waits for the next minute.
//
// The per-minute count is kept in this process, over all its partitions: a
// minute is a minute of the emitter's clock, and it counts the events this
// instance wrote for the tenant in it. Instances do not share the count, so
// each instance enforces the quota on its own share: a tenant whose schedules
// fall in partitions held by k instances may get up to k times its quota per
// minute, and after a restart the count starts from zero.
//
// Order: the deferred fires of a tenant wait in one queue ordered by fire
// time, then by arrival. While it is not empty, a new fire of the tenant is
// deferred behind it, and only its head may take room, so deferred fires go
// out in the order they were due. A head that has not asked for room for two
// minutes (or two windows) is dropped, so that a fire this instance no longer
// emits cannot hold the others back; it takes its place again when it asks.

// Quotas gives a tenant's effective quotas: its own, with the configured
// default for each one it does not set. NewQuotaCache builds one over the
// store.
type Quotas interface {
	TenantQuotas(ctx context.Context, tenantID string) (model.TenantQuotas, error)
}

// DiskGuard says whether the disk the store writes to has room for new
// events, and if not why: the disk guard the master also asks (*guard.Disk).
type DiskGuard interface {
	DiskStatus() (ok bool, reason string)
}

// TenantGetter is what a QuotaCache reads; store.Driver satisfies it.
type TenantGetter interface {
	// TenantGet returns model.ErrNotFound for an unknown tenant.
	TenantGet(ctx context.Context, id string) (*model.Tenant, error)
}

// QuotaCache is Quotas over the store's tenants and the configured
// defaults, each tenant's answer kept for TTL: a quota an admin changes
// applies to emissions within TTL.
type QuotaCache struct {
	store    TenantGetter
	defaults model.TenantQuotas
	ttl      time.Duration
	clock    clockwork.Clock

	mu sync.Mutex
	m  map[string]cachedQuotas
}

type cachedQuotas struct {
	q       model.TenantQuotas
	expires time.Time
}

// NewQuotaCache returns a QuotaCache. defaults are the configured quotas of
// a tenant that sets none (guard.TenantQuotaDefaults); a ttl of 0 means
// 10s, a nil clock the real one.
func NewQuotaCache(st TenantGetter, defaults model.TenantQuotas, ttl time.Duration, clock clockwork.Clock) *QuotaCache {
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &QuotaCache{store: st, defaults: defaults, ttl: ttl, clock: clock, m: map[string]cachedQuotas{}}
}

// TenantQuotas returns the tenant's quotas with the defaults for the ones it
// does not set; an unknown tenant gets the defaults.
func (c *QuotaCache) TenantQuotas(ctx context.Context, tenantID string) (model.TenantQuotas, error) {
	now := c.clock.Now()
	c.mu.Lock()
	hit, ok := c.m[tenantID]
	c.mu.Unlock()
	if ok && now.Before(hit.expires) {
		return hit.q, nil
	}
	var own model.TenantQuotas
	t, err := c.store.TenantGet(ctx, tenantID)
	switch {
	case err == nil:
		own = t.Quotas
	case !errors.Is(err, model.ErrNotFound):
		return model.TenantQuotas{}, fmt.Errorf("quotas of tenant %s: %w", tenantID, err)
	}
	q := own.Or(c.defaults)
	c.mu.Lock()
	c.m[tenantID] = cachedQuotas{q: q, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return q, nil
}

// notePrefixDeferred starts the part of a fire's note that says its events
// were held back.
const notePrefixDeferred = "deferred: "

// errDeferred ends a background emission that waits for the disk or the
// tenant's budget; it continues in a later minute.
var errDeferred = errors.New("emission deferred")

type queued struct {
	t    time.Time
	seq  uint64 // arrival: fires due at the same time keep it
	id   string
	seen time.Time // last asked for room: a head not asked for long is dropped
}

// rate counts the events emitted per tenant in the current minute and keeps
// the queue of deferred fires per tenant.
type rate struct {
	mu     sync.Mutex
	minute time.Time
	used   map[string]int
	queue  map[string][]queued
	seq    uint64
	stale  time.Duration
}

// newRate returns a rate whose queue heads are dropped when not asked for
// room within stale: a fire this instance no longer emits (its partition
// moved, it fell out of the FireListEmitting page) must not hold its
// tenant's queue. It joins again when it asks.
func newRate(stale time.Duration) *rate {
	return &rate{used: map[string]int{}, queue: map[string][]queued{}, stale: stale}
}

func (r *rate) rollLocked(now time.Time) {
	if m := now.Truncate(time.Minute); !m.Equal(r.minute) {
		r.minute = m
		clear(r.used)
	}
}

// take counts n events of tenant against quota q in now's minute. A fire
// with id "" is a new fire: it never passes a tenant with a queue. A fire
// with an id passes only at the head of its tenant's queue (or with no
// queue); refused, it joins the queue.
func (r *rate) take(tenant, id string, t time.Time, n, q int, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rollLocked(now)
	qu := r.queue[tenant]
	if i := slices.IndexFunc(qu, func(x queued) bool { return x.id == id }); id != "" && i >= 0 {
		qu[i].seen = now
	}
	for len(qu) > 0 && qu[0].id != id && now.Sub(qu[0].seen) > r.stale {
		qu = qu[1:]
	}
	if len(qu) == 0 {
		delete(r.queue, tenant)
	} else {
		r.queue[tenant] = qu
	}
	if (len(qu) > 0 && (id == "" || qu[0].id != id)) || r.used[tenant]+n > q {
		if id != "" {
			r.enqueueLocked(tenant, id, t, now)
		}
		return false
	}
	r.used[tenant] += n
	return true
}

// enqueue puts fire id of tenant, due at t, in the tenant's queue; one
// there already keeps its place.
func (r *rate) enqueue(tenant, id string, t, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.enqueueLocked(tenant, id, t, now)
}

func (r *rate) enqueueLocked(tenant, id string, t, now time.Time) {
	qu := r.queue[tenant]
	if i := slices.IndexFunc(qu, func(x queued) bool { return x.id == id }); i >= 0 {
		qu[i].seen = now
		return
	}
	r.seq++
	x := queued{t: t, seq: r.seq, id: id, seen: now}
	i, _ := slices.BinarySearchFunc(qu, x, func(a, b queued) int {
		return cmp.Or(a.t.Compare(b.t), cmp.Compare(a.seq, b.seq))
	})
	r.queue[tenant] = slices.Insert(qu, i, x)
}

// done takes fire id off its tenant's queue and returns the new head ("":
// none).
func (r *rate) done(tenant, id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	qu := slices.DeleteFunc(r.queue[tenant], func(x queued) bool { return x.id == id })
	if len(qu) == 0 {
		delete(r.queue, tenant)
		return ""
	}
	r.queue[tenant] = qu
	return qu[0].id
}

// perMinute is the tenant's maxEventsPerMinute, 0 without Deps.Quotas.
func (e *Emitter) perMinute(ctx context.Context, tenantID string) (int, error) {
	if e.deps.Quotas == nil {
		return 0, nil
	}
	q, err := e.deps.Quotas.TenantQuotas(ctx, tenantID)
	if err != nil {
		return 0, err
	}
	return q.MaxEventsPerMinute, nil
}

// diskNote is the deferral note while the disk guard refuses writes, ""
// when it lets them through.
func (e *Emitter) diskNote() string {
	if e.deps.Disk == nil {
		return ""
	}
	ok, reason := e.deps.Disk.DiskStatus()
	if ok {
		return ""
	}
	e.log.Debug().Str("reason", reason).Msg("disk guard: emission deferred")
	return notePrefixDeferred + "disk guard: free space below the threshold"
}

// deferReason is the metric label of a deferral note.
func deferReason(note string) DeferReason {
	if strings.Contains(note, "disk guard") {
		return DeferDisk
	}
	return DeferQuota
}

func quotaNote(q int) string {
	return notePrefixDeferred + "tenant over maxEventsPerMinute (" + strconv.Itoa(q) + ")"
}

// admitFire decides whether the events of the new fire f may be written
// now. If not, it returns the note that says why; the caller records f
// with Remaining = Count and the fire joins its tenant's queue.
func (e *Emitter) admitFire(ctx context.Context, f *model.Fire, now time.Time) (string, error) {
	if note := e.diskNote(); note != "" {
		return note, nil
	}
	q, err := e.perMinute(ctx, f.TenantID)
	if err != nil || q <= 0 {
		return "", err
	}
	if e.large(f) {
		// Written in chunks by the background, each counted there; it only
		// waits here behind fires deferred before it.
		if e.rate.take(f.TenantID, "", f.FireTime, 0, q, now) {
			return "", nil
		}
		return quotaNote(q), nil
	}
	if e.rate.take(f.TenantID, "", f.FireTime, f.Count, q, now) {
		return "", nil
	}
	return quotaNote(q), nil
}

// chunkSize is the size of the next background chunk of f: at most
// BackgroundChunk and the tenant's per-minute quota.
func (e *Emitter) chunkSize(ctx context.Context, f *model.Fire) (size, q int, err error) {
	q, err = e.perMinute(ctx, f.TenantID)
	if err != nil {
		return 0, 0, err
	}
	size = e.cfg.BackgroundChunk
	if q > 0 {
		size = min(size, q)
	}
	return size, q, nil
}

// admitChunk decides whether n events of the background fire f may be
// written now; if not it notes the deferral on the fire (once) and returns
// errDeferred.
func (e *Emitter) admitChunk(ctx context.Context, f *model.Fire, n, q int, now time.Time) error {
	note := e.diskNote()
	if note == "" && (q <= 0 || e.rate.take(f.TenantID, f.ID, f.FireTime, n, q, now)) {
		return nil
	}
	if note == "" {
		note = quotaNote(q)
	} else {
		e.rate.enqueue(f.TenantID, f.ID, f.FireTime, now)
	}
	if !strings.Contains(f.Note, notePrefixDeferred) {
		full := note
		if f.Note != "" {
			full = f.Note + "; " + note
		}
		if err := e.deps.Store.FireSetDecision(ctx, f.ID, f.Decision, full); err != nil && !errors.Is(err, model.ErrNotFound) {
			return fmt.Errorf("note on fire %s: %w", f.ID, err)
		}
		e.log.Info().Str(logkey.Schedule, f.ScheduleID).Str(logkey.Fire, f.ID).Int("written", f.Count-f.Remaining).
			Int("count", f.Count).Str("note", note).Msg("emission deferred")
		e.m.FiresDeferred(deferReason(note), 1)
	}
	return errDeferred
}

// deferredUntil is when a deferred emission is tried again: the next minute
// of the clock, when the tenant's count starts over.
func deferredUntil(now time.Time) time.Time {
	return now.Truncate(time.Minute).Add(time.Minute)
}

// wakeAt wakes the background dispatcher at t on the emitter's clock, once
// per distinct t.
func (e *Emitter) wakeAt(t time.Time) {
	e.bgMu.Lock()
	armed := e.bgWakeAt.Equal(t)
	if !armed {
		e.bgWakeAt = t
	}
	e.bgMu.Unlock()
	if armed {
		return
	}
	e.deps.Clock.AfterFunc(t.Sub(e.deps.Clock.Now()), e.wake)
}

// admit applies admitFire to a new fire with events; deferred, f's note
// says why.
func (e *Emitter) admit(ctx context.Context, f *model.Fire, now time.Time) (deferred bool, err error) {
	if !hasEvents(f.Decision) {
		return false, nil
	}
	note, err := e.admitFire(ctx, f, now)
	if err != nil || note == "" {
		return false, err
	}
	if f.Note != "" {
		note = f.Note + "; " + note
	}
	f.Note = note
	e.log.Info().Str(logkey.Schedule, f.ScheduleID).Str(logkey.Fire, f.ID).Int("count", f.Count).
		Str("note", note).Msg("emission deferred")
	return true, nil
}

// unadmit gives back the room admit took for f, which was not recorded
// after all (it existed, or the insert failed).
func (e *Emitter) unadmit(f *model.Fire, deferred bool, now time.Time) {
	if deferred || e.deps.Quotas == nil || !hasEvents(f.Decision) || e.large(f) {
		return
	}
	e.rate.give(f.TenantID, f.Count, now)
}

// give takes n events of tenant off now's minute.
func (r *rate) give(tenant string, n int, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rollLocked(now)
	r.used[tenant] = max(r.used[tenant]-n, 0)
}
