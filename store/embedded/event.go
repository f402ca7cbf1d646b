package embedded

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Event buckets and keys: see evtx.go.

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

// dueIndexed and policyIndexed say which events have keys in the due and
// policy indexes: only those that a scan looks for. Claims read the due index
// for pending, retrying and scheduled events; the token and waiting counts
// read the policy index for unfinished ones. Leaving the others out (and
// keying the policy index by class) takes index pages out of the token
// cycle's commits, whose fsync is most of a token's time between two
// consumers: a start moves one due key less, a delivered write no due or
// policy key, a release one policy key less.
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
// events of one fire. Their row keys and the index keys they add fall into a
// few runs of adjacent keys (one per fire status, shard), so their pages can
// be packed; see packedFill.
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
			pack(tx, bEvRows, bEvDue, bEvFire, bEvPolicy)
		}
		x := newEvtx(tx, s.tokens)
		x.due.hold()
		for _, e := range events {
			ok, err := x.insert(e)
			if err != nil {
				return err
			}
			if ok {
				n++
			}
		}
		return x.flush()
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
		_, e, err = newEvtx(tx, s.tokens).get(id)
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
		x := newEvtx(tx, s.tokens)
		for _, id := range ids {
			_, e, err := x.get(id)
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
		x := newEvtx(tx, s.tokens)
		if p.FireID == "" {
			b, prefix, implied := x.tenant, tenantPrefix(tx, p.TenantID), ""
			rows := rowEvents{tenant: prefix}
			if p.ScheduleID != "" {
				b, prefix, implied = x.sched, strKey(p.ScheduleID), p.ScheduleID+"."
				rows = rowEvents{schedule: p.ScheduleID}
			}
			if prefix == nil {
				return nil // a tenant without a code has no events
			}
			var err error
			out, err = x.listByEntries(b, prefix, implied, rows, p.After, limit, match)
			return err
		}
		g, err := x.groupOf(p.FireID)
		if err != nil {
			return err
		}
		if g == nil {
			// The fire's event may be held in its schedule's row.
			e, err := x.impliedOf(p.FireID)
			if err == nil && e != nil && e.ID > p.After && match(e) {
				out = append(out, e)
			}
			return err
		}
		// The fire index is ordered by status first: collect and sort.
		type ref struct {
			id string
			rk []byte
		}
		var refs []ref
		prefix := seqKey(g.seq)
		if p.Status != "" {
			code, err := statusCode(p.Status)
			if err != nil {
				return nil // no event has an unknown status
			}
			prefix = append(prefix, code)
		}
		scanPrefix(tx, bEvFire, prefix, func(k, _ []byte) bool {
			rk := append(bytes.Clone(k[:8]), k[9:]...)
			r := ref{rk: rk}
			if slot := slotOf(rk); slot < looseSlot {
				r.id = model.EventID(p.FireID, int(slot))
			}
			refs = append(refs, r)
			return true
		})
		for i := range refs {
			if refs[i].id == "" {
				e, err := x.load(refs[i].rk)
				if err != nil {
					return err
				}
				refs[i].id = e.ID
			}
		}
		slices.SortFunc(refs, func(a, b ref) int { return strings.Compare(a.id, b.id) })
		for _, r := range refs {
			if r.id <= p.After {
				continue
			}
			e, err := x.load(r.rk)
			if err != nil {
				return err
			}
			if match(e) {
				out = append(out, e)
				if len(out) == limit {
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// rowEvents names the events held in schedules' rows (impliesEvent) that a
// list adds to those of the event indexes: those of the tenant whose
// schedules_by_tcode entries are under the prefix tenant, or the one of
// schedule.
type rowEvents struct {
	tenant   []byte
	schedule string
}

// listByEntries returns, in id order, the first limit events after the id
// after that match, among those of the entries of index b (ev_tcode or
// ev_sched) under prefix, when implied is not empty (a schedule's id
// and "."), of the groups of ev_groups whose fire ids start with it
// (impliedGroup), and those of rows.
//
// Each entry is a loose event, whose key is its id, or a group, whose key
// fireID ".\x00" sorts before every id of its canonical events (fireID "."
// digits), so every id an entry yields is at least its key. The entries
// that can hold ids after after are those whose keys sort after it and the
// groups whose prefix fireID "." after itself starts with; the walk stops
// at the first entry whose key is beyond the limit-th id found.
func (x *evtx) listByEntries(b *bolt.Bucket, prefix []byte, implied string, rows rowEvents, after string, limit int, match func(*model.Event) bool) ([]*model.Event, error) {
	var out []*model.Event
	full := func() bool { return len(out) == limit }
	add := func(e *model.Event) {
		i, _ := slices.BinarySearchFunc(out, e.ID, func(a *model.Event, id string) int { return strings.Compare(a.ID, id) })
		out = slices.Insert(out, i, e)
		if len(out) > limit {
			out = out[:limit]
		}
	}
	entry := func(suffix, v []byte) error {
		if len(v) == rowKeyLen {
			e, err := x.load(v)
			if err != nil {
				return err
			}
			if match(e) {
				add(e)
			}
			return nil
		}
		fireID := string(suffix[:len(suffix)-2])
		g, err := x.groupOf(fireID)
		if err != nil || g == nil {
			return err
		}
		rest, from := "", false
		if p := fireID + "."; strings.HasPrefix(after, p) {
			rest, from = after[len(p):], true
		}
		var ferr error
		x.canonicalIDs(g, rest, from, func(id string, rk []byte) bool {
			if full() && id >= out[len(out)-1].ID {
				return false
			}
			var e *model.Event
			if e, ferr = x.load(rk); ferr != nil {
				return false
			}
			if match(e) {
				add(e)
			}
			return true
		})
		return ferr
	}
	// Groups whose events' ids start like after.
	for i := 0; i < len(after); i++ {
		if after[i] != '.' {
			continue
		}
		suffix := groupEntry(after[:i])
		if string(suffix) > after {
			continue // after ends in "." here: the walk below meets it
		}
		if v := b.Get(append(bytes.Clone(prefix), suffix...)); v != nil {
			if err := entry(suffix, v); err != nil {
				return nil, err
			}
		}
	}
	c := b.Cursor()
	for k, v := c.Seek(append(bytes.Clone(prefix), after...)); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
		suffix := k[len(prefix):]
		if string(suffix) <= after {
			continue
		}
		if full() && string(suffix) >= out[len(out)-1].ID {
			break
		}
		if err := entry(suffix, v); err != nil {
			return nil, err
		}
	}
	if err := x.listRowEvents(rows, after, full, add, match, func() string { return out[len(out)-1].ID }); err != nil {
		return nil, err
	}
	if implied == "" {
		return out, nil
	}
	// The groups without an entry, found by fire id, the same way: those
	// whose events' ids start like after, then the walk. out only ever
	// keeps the smallest ids, so the two walks may go one after the other.
	for i := len(implied); i < len(after); i++ {
		if after[i] != '.' || !strings.HasPrefix(after, implied) {
			continue
		}
		suffix := groupEntry(after[:i])
		if string(suffix) > after {
			continue
		}
		if x.groups.Get(strKey(after[:i])) != nil {
			if err := entry(suffix, nil); err != nil {
				return nil, err
			}
		}
	}
	// ev_groups keys are fireID NUL, not fireID "." NUL: the order of two
	// fire ids is the same in both unless after holds a byte that sorts
	// before "." or ends in ".", so the walk starts at the first key that
	// can hold a group with ids after after.
	from := strings.TrimSuffix(after, ".")
	if strings.IndexFunc(after, func(r rune) bool { return r < '.' }) >= 0 || from < implied {
		from = implied
	}
	c = x.groups.Cursor()
	for k, _ := c.Seek([]byte(from)); k != nil && strings.HasPrefix(string(k), implied); k, _ = c.Next() {
		fireID := string(k[:len(k)-1])
		// Every id of this group and of the ones after it is beyond
		// fireID: none can enter a full out.
		if full() && fireID >= out[len(out)-1].ID {
			break
		}
		suffix := groupEntry(fireID)
		if string(suffix) <= after {
			continue
		}
		if err := entry(suffix, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// canonicalIDs calls fn for the canonical events of g in id order (the
// decimal slots in string order), those after rest only when from is set,
// until fn returns false.
func (x *evtx) canonicalIDs(g *group, rest string, from bool, fn func(id string, rk []byte) bool) {
	// n is one more than the highest canonical slot.
	k := reverseCursor(x.rows).below(rowKey(g.seq, looseSlot))
	if k == nil || seqOf(k) != g.seq || slotOf(k) >= looseSlot {
		return
	}
	n := uint64(slotOf(k)) + 1
	// Decimal strings of 0..n-1 in string order: 0, 1, 10, 100, ..., 11, ...
	sibling := func(v uint64) (uint64, bool) {
		if v == 0 {
			return 1, 1 < n
		}
		for v%10 == 9 || v+1 >= n {
			if v /= 10; v == 0 {
				return 0, false
			}
		}
		return v + 1, true
	}
	next := func(v uint64) (uint64, bool) {
		if v != 0 && v*10 < n {
			return v * 10, true
		}
		return sibling(v)
	}
	v, ok := uint64(0), true
	if from {
		// Skip to the first string after rest, descending only into the
		// numbers that rest starts with.
		for ok {
			s := strconv.FormatUint(v, 10)
			if s > rest {
				break
			}
			if v != 0 && strings.HasPrefix(rest, s) {
				v, ok = next(v)
			} else {
				v, ok = sibling(v)
			}
		}
	}
	for ; ok; v, ok = next(v) {
		rk := rowKey(g.seq, uint32(v))
		if x.rows.Get(rk) == nil {
			continue
		}
		if !fn(model.EventID(g.head.FireID, int(v)), rk) {
			return
		}
	}
}

// EventClaimDue moves the shard's due events (pending or retrying, and
// scheduled under an older fence) to scheduled under p.Fence, the older
// fences' first, then the lanes' shares (duelane.go). The read and the
// writes share one serialisable transaction, so concurrent claimers never
// both get an event. Claims go through the batched commit path: claims of
// several shards and concurrent transitions share one commit (one fsync).
func (s *Store) EventClaimDue(ctx context.Context, p *store.EventClaimParams) ([]*model.Event, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	// Most claims of a quiet shard find nothing: a read says so without a
	// commit (and its sync).
	var due bool
	if err := s.view(ctx, "event claim due", func(tx *bolt.Tx) (err error) {
		due, err = newClaimer(tx, p).any()
		return err
	}); err != nil {
		return nil, err
	}
	if !due {
		return nil, nil
	}
	var out []*model.Event
	err := s.batch(ctx, "event claim due", func(tx *bolt.Tx) error {
		out = nil
		cands, err := newClaimer(tx, p).plan(p.Limit)
		if err != nil {
			return err
		}
		x := newEvtx(tx, s.tokens)
		x.due.hold()
		for _, cand := range cands {
			rk := cand[timeLen:]
			old, err := x.load(rk)
			if err != nil {
				return err
			}
			e := *old
			e.Status, e.Fence = model.EventScheduled, p.Fence
			if isImpliedKey(rk) {
				_, err = x.materialise(old, &e)
			} else {
				err = x.put(rk, old, &e)
			}
			if err != nil {
				return err
			}
			e.TakenOver = old.Status == model.EventScheduled
			out = append(out, &e)
		}
		return x.flush()
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
		x := newEvtx(tx, s.tokens)
		for i := range ts {
			if ts[i].RequiresPrevious && (i == 0 || results[i-1] != nil) {
				results[i] = model.ErrConflict
				continue
			}
			if err := applyTransition(x, &ts[i], &results[i]); err != nil {
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
func applyTransition(x *evtx, t *store.EventTransition, result *error) error {
	*result = nil
	rk, old, err := x.get(t.ID)
	if err == model.ErrNotFound {
		*result = model.ErrNotFound
		return nil
	}
	if err != nil {
		return err
	}
	if t.Conflicts(old) {
		*result = model.ErrConflict
		return nil
	}
	e := *old
	t.Apply(&e)
	if isImpliedKey(rk) {
		_, err = x.materialise(old, &e)
		return err
	}
	return x.put(rk, old, &e)
}

// fireRows calls fn with the row key of each of the fire's events in
// status st (any status when st is ""), until fn returns false.
func fireRows(x *evtx, tx *bolt.Tx, fireID string, st model.EventStatus, fn func(code byte, rk []byte) bool) error {
	seq, _, ok, err := x.groupCount(fireID)
	if err != nil || !ok {
		return err
	}
	prefix := seqKey(seq)
	if st != "" {
		prefix = append(prefix, statusCodes[st])
	}
	scanPrefix(tx, bEvFire, prefix, func(k, _ []byte) bool {
		return fn(k[8], append(bytes.Clone(k[:8]), k[9:]...))
	})
	return nil
}

// EventCountByFire counts a fire's events per status from the fire index
// alone. Cross-tenant.
func (s *Store) EventCountByFire(ctx context.Context, fireID string) (store.EventCounts, error) {
	counts := store.EventCounts{}
	err := s.view(ctx, "event count by fire", func(tx *bolt.Tx) error {
		clear(counts)
		x := newEvtx(tx, s.tokens)
		if _, _, ok, err := x.groupCount(fireID); err != nil || !ok {
			// The fire's event may be held in its schedule's row.
			e, ierr := x.impliedOf(fireID)
			if e != nil {
				counts[e.Status]++
			}
			return cmp.Or(err, ierr)
		}
		return fireRows(x, tx, fireID, "", func(code byte, _ []byte) bool {
			counts[statusByCode[code]]++
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// EventCountByTenant adds up the tenant index: a group's count of canonical
// events, one for a loose event. It stops at max when max > 0.
func (s *Store) EventCountByTenant(ctx context.Context, tenantID string, max int) (int, error) {
	var n int
	err := s.view(ctx, "event count by tenant", func(tx *bolt.Tx) error {
		n = 0
		x := newEvtx(tx, s.tokens)
		prefix := tenantPrefix(tx, tenantID)
		if prefix == nil {
			return nil
		}
		var err error
		scanPrefix(tx, bEvTenant, prefix, func(k, v []byte) bool {
			if len(v) == rowKeyLen {
				n++
			} else {
				suffix := k[len(prefix):]
				var count uint64
				if _, count, _, err = x.groupCount(string(suffix[:len(suffix)-2])); err != nil {
					return false
				}
				n += int(count)
			}
			return max <= 0 || n < max
		})
		if err != nil || (max > 0 && n >= max) {
			return err
		}
		n += impliedTenantCount(tx, prefix, max-n)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if max > 0 && n > max {
		n = max
	}
	return n, nil
}

// EventLastFinished returns the latest FinishedAt among a fire's events, or
// nil. It reads the fire's finished events only.
func (s *Store) EventLastFinished(ctx context.Context, fireID string) (*time.Time, error) {
	var last *time.Time
	err := s.view(ctx, "event last finished", func(tx *bolt.Tx) error {
		last = nil
		x := newEvtx(tx, s.tokens)
		for _, st := range []model.EventStatus{model.EventReleased, model.EventDead, model.EventCancelled, model.EventExpired} {
			var err error
			if ferr := fireRows(x, tx, fireID, st, func(_ byte, rk []byte) bool {
				var e *model.Event
				if e, err = x.load(rk); err != nil {
					return false
				}
				if e.FinishedAt != nil && (last == nil || e.FinishedAt.After(*last)) {
					last = e.FinishedAt
				}
				return true
			}); ferr != nil {
				return ferr
			}
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
// removes them later. Cross-tenant. It reads the waiting statuses of the
// fire index: of the one fire, or of the schedule's groups (found in the
// schedule index with its loose events).
func (s *Store) EventCancelPending(ctx context.Context, scheduleID, fireID string, at time.Time) (int, error) {
	return s.finishWaiting(ctx, "event cancel pending", scheduleID, fireID, at, model.EventCancelled, "")
}

// EventExpireWaiting moves the fire's waiting events to expired, as
// EventCancelPending cancels them. Cross-tenant.
func (s *Store) EventExpireWaiting(ctx context.Context, scheduleID, fireID string, at time.Time, reason string) (int, error) {
	return s.finishWaiting(ctx, "event expire waiting", scheduleID, fireID, at, model.EventExpired, reason)
}

// finishWaiting moves the schedule's (or one fire's) waiting events to the
// finished status to, with reason (if set) as their LastError.
func (s *Store) finishWaiting(ctx context.Context, op, scheduleID, fireID string, at time.Time, to model.EventStatus, reason string) (int, error) {
	var n int
	err := s.update(ctx, op, func(tx *bolt.Tx) error {
		n = 0
		x := newEvtx(tx, s.tokens)
		// An event held in the schedule's row gets its group first.
		if e, err := x.impliedIn(scheduleID); err != nil {
			return err
		} else if e != nil && (fireID == "" || e.FireID == fireID) {
			if _, err := x.materialise(e, e); err != nil {
				return err
			}
		}
		var rks [][]byte
		seen := map[string]bool{}
		addFire := func(fid string) error {
			for _, st := range []model.EventStatus{model.EventPending, model.EventRetrying, model.EventScheduled} {
				if err := fireRows(x, tx, fid, st, func(_ byte, rk []byte) bool {
					if !seen[string(rk)] {
						seen[string(rk)] = true
						rks = append(rks, rk)
					}
					return true
				}); err != nil {
					return err
				}
			}
			return nil
		}
		if fireID != "" {
			if err := addFire(fireID); err != nil {
				return err
			}
		} else {
			prefix := strKey(scheduleID)
			type ent struct{ suffix, v []byte }
			var ents []ent
			scanPrefix(tx, bEvSched, prefix, func(k, v []byte) bool {
				ents = append(ents, ent{bytes.Clone(k[len(prefix):]), bytes.Clone(v)})
				return true
			})
			schedGroups(x.groups, scheduleID, func(fireID string) bool {
				ents = append(ents, ent{groupEntry(fireID), nil})
				return true
			})
			for _, en := range ents {
				if len(en.v) == rowKeyLen {
					if !seen[string(en.v)] {
						seen[string(en.v)] = true
						rks = append(rks, en.v)
					}
					continue
				}
				if err := addFire(string(en.suffix[:len(en.suffix)-2])); err != nil {
					return err
				}
			}
		}
		for _, rk := range rks {
			old, err := x.load(rk)
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
			e.Status, e.FinishedAt, e.UpdatedAt = to, &at, at
			if reason != "" {
				e.LastError = reason
			}
			if err := x.put(rk, old, &e); err != nil {
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
		x := newEvtx(tx, s.tokens)
		prefix := policyPrefix(policyID, classHolding)
		var err error
		scanPrefix(tx, bEvPolicy, prefix, func(k, _ []byte) bool {
			var e *model.Event
			if e, err = x.load(k[len(prefix)+timeLen:]); err != nil {
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
		var rks [][]byte
		scanPrefix(tx, bEvFinished, nil, func(k, _ []byte) bool {
			if !readTime(k).Before(t) || (limit > 0 && len(rks) >= limit) {
				return false
			}
			rks = append(rks, bytes.Clone(k[timeLen:]))
			return true
		})
		x := newEvtx(tx, s.tokens)
		for _, rk := range rks {
			e, err := x.load(rk)
			if err != nil {
				return err
			}
			if err := x.remove(rk, e); err != nil {
				return err
			}
			n++
		}
		return x.flush()
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// EventCountByStatus counts a tenant's events per status: a group's from
// the fire index (its canonical slots), a loose event from its row.
func (s *Store) EventCountByStatus(ctx context.Context, tenantID string) (store.EventCounts, error) {
	counts := store.EventCounts{}
	err := s.view(ctx, "event count by status", func(tx *bolt.Tx) error {
		clear(counts)
		x := newEvtx(tx, s.tokens)
		prefix := tenantPrefix(tx, tenantID)
		if prefix == nil {
			return nil
		}
		var err error
		scanPrefix(tx, bEvTenant, prefix, func(k, v []byte) bool {
			if len(v) == rowKeyLen {
				var e *model.Event
				if e, err = x.load(v); err != nil {
					return false
				}
				counts[e.Status]++
				return true
			}
			suffix := k[len(prefix):]
			err = fireRows(x, tx, string(suffix[:len(suffix)-2]), "", func(code byte, rk []byte) bool {
				if slotOf(rk) < looseSlot {
					counts[statusByCode[code]]++
				}
				return true
			})
			return err == nil
		})
		if err != nil {
			return err
		}
		// The events held in rows are pending: a change materialises them.
		if n := impliedTenantCount(tx, prefix, 0); n > 0 {
			counts[model.EventPending] += n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}
