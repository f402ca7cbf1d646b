package embedded

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

func getEvent(tx *bolt.Tx, id []byte) (*model.Event, error) {
	raw := tx.Bucket(bEvents).Get(id)
	if raw == nil {
		return nil, model.ErrNotFound
	}
	return decodeEvent(raw)
}

// Event index keys. Each is derived from the row alone, so an update removes
// the old row's keys and adds the new row's in the same transaction.
//
//	due:      shard, status\0, launchAt, id      -> fence (claims; no row read
//	                                                to skip current-fence rows;
//	                                                waiting statuses only)
//	fire:     fireID\0, status\0, id             (counts per fire and status)
//	schedule: scheduleID\0, id                   (cancel, list by schedule)
//	tenant:   tenantID\0, id                     (list, ids ascending)
//	policy:   policyID\0, class\0, launchAt, id  (token and waiting counts;
//	                                              unfinished events only;
//	                                              see policyClass)
//	finished: finishedAt, id                     (retention of released and
//	                                              cancelled events)
func dueKey(b []byte, e *model.Event) []byte {
	b = appendInt32(b, e.Shard)
	b = appendStr(b, string(e.Status))
	if e.Status == model.EventScheduled {
		// Scheduled events are ordered by fence first, so that a claim finds
		// those left by older owners without walking the ones it holds.
		b = binary.BigEndian.AppendUint64(b, uint64(e.Fence))
	}
	b = appendTime(b, e.LaunchAt)
	return append(b, e.ID...)
}

// fenceValue is the due index's value for e.
func fenceValue(e *model.Event) []byte { return binary.BigEndian.AppendUint64(nil, uint64(e.Fence)) }

func duePrefix(shard int, status model.EventStatus) []byte {
	return appendStr(appendInt32(nil, shard), string(status))
}

func fireKey(e *model.Event) []byte {
	return append(strKey(e.FireID, string(e.Status)), e.ID...)
}

func schedKey(e *model.Event) []byte { return append(strKey(e.ScheduleID), e.ID...) }

func tenantKey(e *model.Event) []byte { return append(strKey(e.TenantID), e.ID...) }

func policyKey(e *model.Event) []byte {
	return append(appendTime(policyPrefix(e.PolicyID, policyClass(e.Status)), e.LaunchAt), e.ID...)
}

func policyPrefix(policyID, class string) []byte { return strKey(policyID, class) }

// The policy index groups statuses into the two classes its scans count,
// so that the transitions inside a class (a claim's pending → scheduled,
// the handler's delivering → delivered) leave its keys alone.
const (
	classWaiting = "waiting" // pending, retrying, scheduled
	classHolding = "holding" // delivering, delivered
)

// policyClass is the class of an unfinished status s.
func policyClass(s model.EventStatus) string {
	if s.HoldsToken() {
		return classHolding
	}
	return classWaiting
}

func finishedKey(e *model.Event) []byte {
	return append(appendTime(nil, *e.FinishedAt), e.ID...)
}

// dueIndexed and policyIndexed say which events have keys in the due and
// policy indexes: only those that a scan looks for. Claims read the due index
// for pending, retrying and scheduled events; the token and waiting counts
// read the policy index for unfinished ones. Leaving the others out (and
// keying the policy index by class) takes index pages out of the token
// cycle's commits, whose fsync is most of a token's time between two
// consumers: a start moves one due key less, a delivered write no due or
// policy key, a release one policy key less. Data written before
// (layoutNarrowIndexes) is migrated on Open.
func dueIndexed(s model.EventStatus) bool {
	return s == model.EventPending || s == model.EventRetrying || s == model.EventScheduled
}

func policyIndexed(e *model.Event) bool { return e.PolicyID != "" && !e.Status.Finished() }

func retained(e *model.Event) bool {
	return e.FinishedAt != nil && (e.Status == model.EventReleased || e.Status == model.EventCancelled)
}

// packMin is the smallest batch of one fire's events that EventInsertMany
// packs; smaller ones add a few keys to pages that other writes share.
const packMin = 64

// oneFireRun reports whether events are a fan-out batch: at least packMin
// events of one fire. Their row ids and the index keys they add fall into a
// few runs of adjacent keys (one per fire status, schedule, tenant, shard),
// so their pages can be packed; see packedFill.
func oneFireRun(events []*model.Event) bool {
	if len(events) < packMin {
		return false
	}
	for _, e := range events[1:] {
		if e.FireID != events[0].FireID {
			return false
		}
	}
	return true
}

// eventWriter holds the buckets an event write touches.
type eventWriter struct {
	rows, due, fire, sched, tenant, policy, finished *bolt.Bucket
}

func newEventWriter(tx *bolt.Tx) *eventWriter {
	return &eventWriter{
		rows: tx.Bucket(bEvents), due: tx.Bucket(bEvDue), fire: tx.Bucket(bEvFire),
		sched: tx.Bucket(bEvSched), tenant: tx.Bucket(bEvTenant),
		policy: tx.Bucket(bEvPolicy), finished: tx.Bucket(bEvFinished),
	}
}

// put writes e and its index keys; old (nil for a new event) is the stored
// version. Index keys that differ between old and e are moved; keys that
// did not change (the schedule and tenant ones always, the fire key when
// the status stays, ...) are left alone, so a transition dirties as few
// index pages as it can.
func (w *eventWriter) put(old, e *model.Event) error {
	raw, err := encodeEvent(e)
	if err != nil {
		return err
	}
	if err := w.rows.Put([]byte(e.ID), raw); err != nil {
		return err
	}
	if old == nil {
		if err := w.sched.Put(schedKey(e), nil); err != nil {
			return err
		}
		if err := w.tenant.Put(tenantKey(e), nil); err != nil {
			return err
		}
	}
	var oldDue, newDue []byte
	if old != nil && dueIndexed(old.Status) {
		oldDue = dueKey(nil, old)
	}
	if dueIndexed(e.Status) {
		newDue = dueKey(nil, e)
	}
	if old == nil || old.Fence != e.Fence || !bytes.Equal(oldDue, newDue) {
		if oldDue != nil {
			if err := w.due.Delete(oldDue); err != nil {
				return err
			}
		}
		if newDue != nil {
			if err := w.due.Put(newDue, fenceValue(e)); err != nil {
				return err
			}
		}
	}
	var oldFire, oldPolicy, oldFinished []byte
	if old != nil {
		oldFire = fireKey(old)
		if policyIndexed(old) {
			oldPolicy = policyKey(old)
		}
		if retained(old) {
			oldFinished = finishedKey(old)
		}
	}
	var newPolicy, newFinished []byte
	if policyIndexed(e) {
		newPolicy = policyKey(e)
	}
	if retained(e) {
		newFinished = finishedKey(e)
	}
	if err := move(w.fire, oldFire, fireKey(e)); err != nil {
		return err
	}
	if err := move(w.policy, oldPolicy, newPolicy); err != nil {
		return err
	}
	return move(w.finished, oldFinished, newFinished)
}

// move replaces oldKey (nil: none) with newKey (nil: none) in bucket b,
// unless they are the same key.
func move(b *bolt.Bucket, oldKey, newKey []byte) error {
	if oldKey != nil && newKey != nil && bytes.Equal(oldKey, newKey) {
		return nil
	}
	if oldKey != nil {
		if err := b.Delete(oldKey); err != nil {
			return err
		}
	}
	if newKey != nil {
		return b.Put(newKey, nil)
	}
	return nil
}

// remove deletes e's index keys, and with all also its row and the keys that
// never change.
func (w *eventWriter) remove(e *model.Event, all bool) error {
	type key struct {
		b *bolt.Bucket
		k []byte
	}
	dels := []key{{w.fire, fireKey(e)}}
	if dueIndexed(e.Status) {
		dels = append(dels, key{w.due, dueKey(nil, e)})
	}
	if policyIndexed(e) {
		dels = append(dels, key{w.policy, policyKey(e)})
	}
	if retained(e) {
		dels = append(dels, key{w.finished, finishedKey(e)})
	}
	if all {
		dels = append(dels, key{w.sched, schedKey(e)}, key{w.tenant, tenantKey(e)}, key{w.rows, []byte(e.ID)})
	}
	for _, d := range dels {
		if err := d.b.Delete(d.k); err != nil {
			return err
		}
	}
	return nil
}

// EventInsertMany inserts the events whose ids are new, in one transaction
// (one fsync for the whole batch). Cross-tenant.
func (s *Store) EventInsertMany(ctx context.Context, events []*model.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	var n int
	run := oneFireRun(events)
	err := s.update(ctx, "event insert many", func(tx *bolt.Tx) error {
		n = 0
		if run {
			pack(tx, bEvents, bEvDue, bEvFire, bEvSched, bEvTenant, bEvPolicy)
		}
		w := newEventWriter(tx)
		for _, e := range events {
			if w.rows.Get([]byte(e.ID)) != nil {
				continue
			}
			if err := w.put(nil, e); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// EventGet returns the tenant's event. model.ErrNotFound.
func (s *Store) EventGet(ctx context.Context, tenantID, id string) (*model.Event, error) {
	e, err := s.EventGetByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if e.TenantID != tenantID {
		return nil, wrap("event get", model.ErrNotFound)
	}
	return e, nil
}

// EventGetByID returns any tenant's event. model.ErrNotFound.
func (s *Store) EventGetByID(ctx context.Context, id string) (*model.Event, error) {
	var e *model.Event
	err := s.view(ctx, "event get", func(tx *bolt.Tx) error {
		var err error
		e, err = getEvent(tx, []byte(id))
		return err
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// EventGetMany returns the events of ids that exist, by id, in one read.
func (s *Store) EventGetMany(ctx context.Context, ids []string) (map[string]*model.Event, error) {
	out := make(map[string]*model.Event, len(ids))
	err := s.view(ctx, "event get many", func(tx *bolt.Tx) error {
		for _, id := range ids {
			e, err := getEvent(tx, []byte(id))
			if err == model.ErrNotFound {
				continue
			}
			if err != nil {
				return err
			}
			out[id] = e
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EventList pages a tenant's events by id. It walks the narrowest index the
// filters allow (fire, schedule, else tenant) and checks the other filters
// on the rows.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) ([]*model.Event, error) {
	limit := limitOr(p.Limit, 1000, 1000)
	var out []*model.Event
	err := s.view(ctx, "event list", func(tx *bolt.Tx) error {
		out = nil
		match := func(e *model.Event) bool {
			return e.TenantID == p.TenantID &&
				(p.ScheduleID == "" || e.ScheduleID == p.ScheduleID) &&
				(p.FireID == "" || e.FireID == p.FireID) &&
				(p.Status == "" || e.Status == p.Status) &&
				(p.From.IsZero() || !e.LaunchAt.Before(p.From)) &&
				(p.To.IsZero() || e.LaunchAt.Before(p.To))
		}
		var ids []string
		if p.FireID != "" {
			// The fire index is ordered by status first: collect and sort.
			prefix := strKey(p.FireID)
			if p.Status != "" {
				prefix = strKey(p.FireID, string(p.Status))
			}
			scanPrefix(tx, bEvFire, prefix, func(k, _ []byte) bool {
				_, rest := readStr(k[len(strKey(p.FireID)):])
				if id := string(rest); id > p.After {
					ids = append(ids, id)
				}
				return true
			})
			sort.Strings(ids)
		}
		var err error
		consider := func(id []byte) bool {
			var e *model.Event
			if e, err = getEvent(tx, id); err != nil {
				return false
			}
			if match(e) {
				out = append(out, e)
			}
			return len(out) < limit
		}
		if p.FireID != "" {
			for _, id := range ids {
				if !consider([]byte(id)) {
					break
				}
			}
			return err
		}
		b, prefix := bEvTenant, strKey(p.TenantID)
		if p.ScheduleID != "" {
			b, prefix = bEvSched, strKey(p.ScheduleID)
		}
		c := tx.Bucket(b).Cursor()
		k, _ := c.Seek(append(bytes.Clone(prefix), p.After...))
		for ; k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
			id := k[len(prefix):]
			if string(id) <= p.After {
				continue
			}
			if !consider(id) {
				break
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EventClaimDue moves the shard's due events (pending or retrying, and
// scheduled under an older fence) to scheduled under p.Fence, earliest
// LaunchAt first. The read and the writes share one serialisable
// transaction, so concurrent claimers never both get an event. Claims go
// through the batched commit path: claims of several shards and concurrent
// transitions share one commit (one fsync).
func (s *Store) EventClaimDue(ctx context.Context, p *store.EventClaimParams) ([]*model.Event, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var out []*model.Event
	err := s.batch(ctx, "event claim due", func(tx *bolt.Tx) error {
		out = nil
		type candidate struct {
			key []byte // launchAt, id
			id  []byte
		}
		var cands []candidate
		c := tx.Bucket(bEvDue).Cursor()
		for _, st := range []model.EventStatus{model.EventPending, model.EventRetrying, model.EventScheduled} {
			prefix := duePrefix(p.Shard, st)
			taken := 0
			for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix) && taken < p.Limit; k, _ = c.Next() {
				rest := k[len(prefix):]
				if st == model.EventScheduled {
					// Left by an older owner: claimed whatever its launch
					// time, since that owner had already loaded it.
					if int64(binary.BigEndian.Uint64(rest)) >= p.Fence {
						break
					}
					rest = rest[8:]
				} else if !readTime(rest).Before(p.DueBefore) {
					break
				}
				cands = append(cands, candidate{key: bytes.Clone(rest), id: bytes.Clone(rest[timeLen:])})
				taken++
			}
		}
		sort.Slice(cands, func(i, j int) bool { return bytes.Compare(cands[i].key, cands[j].key) < 0 })
		if len(cands) > p.Limit {
			cands = cands[:p.Limit]
		}
		w := newEventWriter(tx)
		for _, cand := range cands {
			old, err := getEvent(tx, cand.id)
			if err != nil {
				return err
			}
			e := *old
			e.Status, e.Fence = model.EventScheduled, p.Fence
			if err := w.put(old, &e); err != nil {
				return err
			}
			e.TakenOver = old.Status == model.EventScheduled
			out = append(out, &e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EventTransition applies compare-and-set transitions in order. Concurrent
// callers share commits (bbolt batches), so many handlers finishing events
// at once pay for few fsyncs.
func (s *Store) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	results := make([]error, len(ts))
	if len(ts) == 0 {
		return results, nil
	}
	err := s.batch(ctx, "event transition", func(tx *bolt.Tx) error {
		w := newEventWriter(tx)
		for i := range ts {
			if ts[i].RequiresPrevious && (i == 0 || results[i-1] != nil) {
				results[i] = model.ErrConflict
				continue
			}
			if err := applyTransition(tx, w, &ts[i], &results[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, r := range results {
		if r != nil {
			results[i] = wrap("event transition "+ts[i].ID, r)
		}
	}
	return results, nil
}

// applyTransition sets *result to nil, model.ErrNotFound or
// model.ErrConflict, and returns an error only when the store failed.
func applyTransition(tx *bolt.Tx, w *eventWriter, t *store.EventTransition, result *error) error {
	*result = nil
	old, err := getEvent(tx, []byte(t.ID))
	if err == model.ErrNotFound {
		*result = model.ErrNotFound
		return nil
	}
	if err != nil {
		return err
	}
	if old.Status != t.From || (t.Fence != 0 && old.Fence != t.Fence) ||
		(t.TokenExpiredBy != nil && (old.TokenExpiresAt == nil || old.TokenExpiresAt.After(*t.TokenExpiredBy))) ||
		(t.AttemptsAtMost != nil && old.Attempts > *t.AttemptsAtMost) {
		*result = model.ErrConflict
		return nil
	}
	e := *old
	e.Status = t.To
	if !t.LaunchAt.IsZero() {
		e.LaunchAt = t.LaunchAt
	}
	if t.Attempts != 0 {
		e.Attempts = t.Attempts
	}
	if t.ResetAttempts {
		e.Attempts = 0
	}
	if t.LastError != "" {
		e.LastError = t.LastError
	}
	if t.TokenExpiresAt != nil {
		e.TokenExpiresAt = t.TokenExpiresAt
	}
	if t.ClearToken {
		e.TokenExpiresAt = nil
	}
	if t.TokenTimedOut {
		e.TokenTimedOut = true
	}
	if t.DeliveredAt != nil {
		e.DeliveredAt = t.DeliveredAt
	}
	if t.FinishedAt != nil {
		e.FinishedAt = t.FinishedAt
	}
	if t.ClearOutcome {
		e.DeliveredAt, e.FinishedAt, e.TokenTimedOut = nil, nil, false
	}
	if !t.At.IsZero() {
		e.UpdatedAt = t.At
	}
	return w.put(old, &e)
}

// EventCountByFire counts a fire's events per status from the fire index
// alone. Cross-tenant.
func (s *Store) EventCountByFire(ctx context.Context, fireID string) (store.EventCounts, error) {
	counts := store.EventCounts{}
	err := s.view(ctx, "event count by fire", func(tx *bolt.Tx) error {
		clear(counts)
		prefix := strKey(fireID)
		scanPrefix(tx, bEvFire, prefix, func(k, _ []byte) bool {
			st, _ := readStr(k[len(prefix):])
			counts[model.EventStatus(st)]++
			return true
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// EventCountByTenant counts the keys of the tenant index (every event is
// in it until retention deletes it), stopping at max when max > 0.
func (s *Store) EventCountByTenant(ctx context.Context, tenantID string, max int) (int, error) {
	return s.countPrefix(ctx, "event count by tenant", bEvTenant, strKey(tenantID), max)
}

// EventLastFinished returns the latest FinishedAt among a fire's events, or
// nil. It reads the fire's finished events only.
func (s *Store) EventLastFinished(ctx context.Context, fireID string) (*time.Time, error) {
	var last *time.Time
	err := s.view(ctx, "event last finished", func(tx *bolt.Tx) error {
		last = nil
		for _, st := range []model.EventStatus{model.EventReleased, model.EventDead, model.EventCancelled} {
			prefix := strKey(fireID, string(st))
			var err error
			scanPrefix(tx, bEvFire, prefix, func(k, _ []byte) bool {
				var e *model.Event
				if e, err = getEvent(tx, k[len(prefix):]); err != nil {
					return false
				}
				if e.FinishedAt != nil && (last == nil || e.FinishedAt.After(*last)) {
					last = e.FinishedAt
				}
				return true
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return last, nil
}

// EventCancelPending cancels the schedule's (or one fire's) events that are
// pending, retrying or scheduled, setting FinishedAt so that retention
// removes them later. Cross-tenant.
func (s *Store) EventCancelPending(ctx context.Context, scheduleID, fireID string, at time.Time) (int, error) {
	var n int
	err := s.update(ctx, "event cancel pending", func(tx *bolt.Tx) error {
		n = 0
		var ids [][]byte
		if fireID != "" {
			for _, st := range []model.EventStatus{model.EventPending, model.EventRetrying, model.EventScheduled} {
				prefix := strKey(fireID, string(st))
				for _, k := range collectPrefix(tx, bEvFire, prefix) {
					ids = append(ids, k[len(prefix):])
				}
			}
		} else {
			prefix := strKey(scheduleID)
			for _, k := range collectPrefix(tx, bEvSched, prefix) {
				ids = append(ids, k[len(prefix):])
			}
		}
		w := newEventWriter(tx)
		for _, id := range ids {
			old, err := getEvent(tx, id)
			if err != nil {
				return err
			}
			if old.ScheduleID != scheduleID {
				continue
			}
			switch old.Status {
			case model.EventPending, model.EventRetrying, model.EventScheduled:
			default:
				continue
			}
			e := *old
			e.Status, e.FinishedAt, e.UpdatedAt = model.EventCancelled, &at, at
			if err := w.put(old, &e); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// EventFindTokenExpired returns the policy's token-holding events whose
// token expired before t, at most limit (zero: no limit). Cross-tenant.
func (s *Store) EventFindTokenExpired(ctx context.Context, policyID string, t time.Time, limit int) ([]*model.Event, error) {
	var out []*model.Event
	err := s.view(ctx, "event find token expired", func(tx *bolt.Tx) error {
		out = nil
		prefix := policyPrefix(policyID, classHolding)
		var err error
		scanPrefix(tx, bEvPolicy, prefix, func(k, _ []byte) bool {
			var e *model.Event
			if e, err = getEvent(tx, k[len(prefix)+timeLen:]); err != nil {
				return false
			}
			if e.TokenExpiresAt != nil && e.TokenExpiresAt.Before(t) {
				out = append(out, e)
			}
			return true
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	// The index is by launch time: the oldest expiries need all holders
	// (at most a few times maxInFlight) read and sorted.
	slices.SortFunc(out, func(a, b *model.Event) int {
		return cmp.Or(a.TokenExpiresAt.Compare(*b.TokenExpiresAt), cmp.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// EventCountHoldingTokens counts the policy's delivering and delivered
// events from the policy index. Cross-tenant.
func (s *Store) EventCountHoldingTokens(ctx context.Context, policyID string) (int, error) {
	var n int
	err := s.view(ctx, "event count holding tokens", func(tx *bolt.Tx) error {
		n = 0
		scanPrefix(tx, bEvPolicy, policyPrefix(policyID, classHolding), func(_, _ []byte) bool {
			n++
			return true
		})
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// EventCountWaiting counts the policy's pending, retrying and scheduled
// events with LaunchAt <= t from the policy index. Cross-tenant.
func (s *Store) EventCountWaiting(ctx context.Context, policyID string, t time.Time) (int, error) {
	var n int
	err := s.view(ctx, "event count waiting", func(tx *bolt.Tx) error {
		n = 0
		prefix := policyPrefix(policyID, classWaiting)
		scanPrefix(tx, bEvPolicy, prefix, func(k, _ []byte) bool {
			if readTime(k[len(prefix):]).After(t) {
				return false
			}
			n++
			return true
		})
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// EventDeleteFinishedBefore removes released and cancelled events finished
// before t, oldest first, at most limit (zero: no limit).
func (s *Store) EventDeleteFinishedBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	var n int
	err := s.update(ctx, "event delete finished before", func(tx *bolt.Tx) error {
		n = 0
		var ids [][]byte
		scanPrefix(tx, bEvFinished, nil, func(k, _ []byte) bool {
			if !readTime(k).Before(t) || (limit > 0 && len(ids) >= limit) {
				return false
			}
			ids = append(ids, bytes.Clone(k[timeLen:]))
			return true
		})
		w := newEventWriter(tx)
		for _, id := range ids {
			e, err := getEvent(tx, id)
			if err != nil {
				return err
			}
			if err := w.remove(e, true); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// EventCountByStatus counts a tenant's events per status. There is no
// index by (tenant, status): it walks the tenant index and reads each event.
func (s *Store) EventCountByStatus(ctx context.Context, tenantID string) (store.EventCounts, error) {
	counts := store.EventCounts{}
	err := s.view(ctx, "event count by status", func(tx *bolt.Tx) error {
		clear(counts)
		prefix := strKey(tenantID)
		var err error
		scanPrefix(tx, bEvTenant, prefix, func(k, _ []byte) bool {
			var e *model.Event
			if e, err = getEvent(tx, k[len(prefix):]); err != nil {
				return false
			}
			counts[e.Status]++
			return true
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}
