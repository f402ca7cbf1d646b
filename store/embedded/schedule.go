package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// childKey is the primary key of a child and at the same time the index the
// emitter scans: partition, timezone, launch expression, minute, then the
// schedule and its version (two versions of one schedule may briefly
// coexist while a schedule is updated). ChildrenFind is one prefix seek per
// eligible (launchExpression, minute). The value is the tenant id, the one
// field not in the key, which keeps a million children small.
func childKey(c *model.Child) []byte {
	b := make([]byte, 0, 4+len(c.Timezone)+1+len(c.LaunchExpression)+1+4+len(c.ScheduleID)+1+8)
	b = childPrefix(b, c.Partition, c.Timezone, c.LaunchExpression, c.Minute)
	b = appendStr(b, c.ScheduleID)
	return appendInt64(b, c.ScheduleVersion)
}

func childPrefix(b []byte, partition int, tz, launchExpr string, minute int) []byte {
	b = appendInt32(b, partition)
	b = appendStr(b, tz)
	b = appendStr(b, launchExpr)
	return appendInt32(b, minute)
}

// decodeChild rebuilds a child from its key; its tenant is in the value
// (tenantNames.childTenant).
func decodeChild(k []byte) (model.Child, error) {
	if len(k) < 4+4+8 {
		return model.Child{}, fmt.Errorf("short child key %q", k)
	}
	c := model.Child{Partition: readInt32(k)}
	rest := k[4:]
	c.Timezone, rest = readStr(rest)
	c.LaunchExpression, rest = readStr(rest)
	if len(rest) < 4+1+8 {
		return model.Child{}, fmt.Errorf("short child key %q", k)
	}
	c.Minute = readInt32(rest)
	c.ScheduleID, rest = readStr(rest[4:])
	if len(rest) != 8 {
		return model.Child{}, fmt.Errorf("bad child key %q", k)
	}
	c.ScheduleVersion = readInt64(rest)
	return c, nil
}

// childSchedKey indexes children by schedule (for replacing and deleting a
// schedule's children): scheduleID\0 then the child key.
func childSchedKey(c *model.Child) []byte {
	return append(strKey(c.ScheduleID), childKey(c)...)
}

// putChildren writes children. sole, if not nil, is the one of them that
// the schedule's row holds inline (soleChild): it gets no entry in
// children_by_schedule.
func putChildren(tx *bolt.Tx, children []model.Child, sole *model.Child) error {
	return writeChildren(tx, appendNewChildren(nil, children, sole, 0))
}

// newChild is a child to write with its key; sole if its schedule's row
// holds it inline; item is the index of its schedule in a batch.
type newChild struct {
	c    *model.Child
	k    []byte
	sole bool
	item int
}

// appendNewChildren appends children, of the batch's item, to dst with
// their keys (see putChildren for sole).
func appendNewChildren(dst []newChild, children []model.Child, sole *model.Child, item int) []newChild {
	for i := range children {
		c := &children[i]
		dst = append(dst, newChild{c: c, k: childKey(c), sole: c == sole, item: item})
	}
	return dst
}

// sortNewChildren sorts children by key. Children of a batch of schedules
// go to scattered places in the children bucket (by minute); put in key
// order, each put's search walks the branch pages the one before it walked.
func sortNewChildren(children []newChild) {
	slices.SortFunc(children, func(a, b newChild) int { return bytes.Compare(a.k, b.k) })
}

// writeChildren writes children in the order given. The timezone counts
// take each timezone's new children in one update.
func writeChildren(tx *bolt.Tx, children []newChild) error {
	bc, bs, bt := tx.Bucket(bChildren), tx.Bucket(bChildSched), tx.Bucket(bChildTZ)
	codes := newTenantCodes(tx)
	added := map[string]int64{} // new children per timezone
	for _, n := range children {
		c := n.c
		if bc.Get(n.k) == nil {
			added[c.Timezone]++
		}
		v, err := codes.childValue(c.TenantID)
		if err != nil {
			return err
		}
		if err := bc.Put(n.k, v); err != nil {
			return err
		}
		if n.sole {
			continue
		}
		sk := append(strKey(c.ScheduleID), n.k...)
		packAppends(bs, sk, 0)
		if err := bs.Put(sk, nil); err != nil {
			return err
		}
	}
	for _, tz := range slices.Sorted(maps.Keys(added)) {
		if err := addTZCount(bt, tz, added[tz]); err != nil {
			return err
		}
	}
	return nil
}

// dropSoleChild deletes the child c that a schedule's row held inline (nil:
// none).
func dropSoleChild(tx *bolt.Tx, c *model.Child) error {
	if c == nil {
		return nil
	}
	bc, k := tx.Bucket(bChildren), childKey(c)
	if bc.Get(k) == nil {
		return nil
	}
	if err := addTZCount(tx.Bucket(bChildTZ), c.Timezone, -1); err != nil {
		return err
	}
	return bc.Delete(k)
}

// getScheduleRow returns the schedule id and the child its row holds
// inline with a children entry (nil if none, or if it has none:
// schedChildImplied); model.ErrNotFound if there is no schedule.
func getScheduleRow(r *rowDict, id []byte) (*model.Schedule, *model.Child, error) {
	raw := r.tx.Bucket(bSchedules).Get(schedKey(string(id)))
	if raw == nil {
		return nil, nil, model.ErrNotFound
	}
	sc, child, err := decodeScheduleRow(id, raw, r)
	if rowChildImplied(raw) {
		child = nil
	}
	return sc, child, err
}

// deleteChildren removes the schedule's children for which keep returns
// false and reports how many it removed.
func deleteChildren(tx *bolt.Tx, scheduleID string, keep func(model.Child) bool) (int, error) {
	prefix := strKey(scheduleID)
	var drop [][]byte
	var err error
	scanPrefix(tx, bChildSched, prefix, func(k, _ []byte) bool {
		var c model.Child
		if c, err = decodeChild(k[len(prefix):]); err != nil {
			return false
		}
		if keep == nil || !keep(c) {
			drop = append(drop, k[len(prefix):len(k):len(k)])
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	// Copy the keys: they point into the mmap, which deletes may remap.
	keys := make([][]byte, len(drop))
	for i, k := range drop {
		keys[i] = append([]byte(nil), k...)
	}
	bc, bs, bt := tx.Bucket(bChildren), tx.Bucket(bChildSched), tx.Bucket(bChildTZ)
	for _, k := range keys {
		c, err := decodeChild(k)
		if err != nil {
			return 0, err
		}
		if bc.Get(k) != nil {
			if err := addTZCount(bt, c.Timezone, -1); err != nil {
				return 0, err
			}
		}
		if err := bc.Delete(k); err != nil {
			return 0, err
		}
		if err := bs.Delete(append(strKey(scheduleID), k...)); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// addTZCount keeps the number of children per timezone so that
// ChildTimezones does not scan the children.
func addTZCount(b *bolt.Bucket, tz string, delta int64) error {
	var n int64
	if v := b.Get([]byte(tz)); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	n += delta
	if n <= 0 {
		return b.Delete([]byte(tz))
	}
	return b.Put([]byte(tz), binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// createSchedule writes the new schedule sc, encoded as doc, and its tenant
// index entry, marked when doc holds an event (tenantImplied). run, if not
// nil, is the run of schedules this one is part of (see appender; nothing
// else may write to those buckets meanwhile).
func createSchedule(tx *bolt.Tx, sc *model.Schedule, doc []byte, run *scheduleRun) error {
	b, bt := tx.Bucket(bSchedules), tx.Bucket(bSchedTenant)
	if run == nil {
		run = &scheduleRun{}
	}
	if run.codes == nil {
		run.codes = newTenantCodes(tx)
	}
	code, err := run.codes.prefix(sc.TenantID)
	if err != nil {
		return err
	}
	id, tk := schedKey(sc.ID), appendTenantSched(append(make([]byte, 0, len(code)+len(sc.ID)+1), code...), sc.ID)
	run.rows.pack(b, id, 0)
	run.tenant.pack(bt, tk, len(code))
	if err := b.Put(id, doc); err != nil {
		return err
	}
	var v []byte
	if rowHasEvent(doc) {
		v = tenantImplied
	}
	if err := bt.Put(tk, v); err != nil {
		return err
	}
	return writeEndKeys(tx, run.codes, nil, sc)
}

// scheduleRun is a run of createSchedule calls: the appenders of its two
// buckets, and the tenant codes it has met.
type scheduleRun struct {
	rows, tenant appender
	codes        *tenantCodes
}

// batchRun is a scheduleRun for a batch of schedules whose ids ascend:
// its rows may go into a gap (appender.gaps), and finish is called after
// its last createSchedule.
func batchRun() *scheduleRun {
	r := &scheduleRun{}
	r.rows.gaps, r.tenant.gaps = true, true
	return r
}

func (r *scheduleRun) finish(tx *bolt.Tx) {
	r.rows.finish(tx.Bucket(bSchedules))
	r.tenant.finish(tx.Bucket(bSchedTenant))
}

// putSchedule replaces the row of old by sc, holding sole inline (nil:
// none).
func putSchedule(tx *bolt.Tx, codes *tenantCodes, keys *tokenKey, old, sc *model.Schedule, sole *model.Child) error {
	if err := writeEndKeys(tx, codes, old, sc); err != nil {
		return err
	}
	doc, err := encodeScheduleRow(sc, sole, txDict(tx, codes, keys))
	if err != nil {
		return err
	}
	if err := tx.Bucket(bSchedules).Put(schedKey(sc.ID), doc); err != nil {
		return err
	}
	tk, err := codes.key(sc.TenantID, appendTenantSched(nil, sc.ID))
	if err != nil {
		return err
	}
	return tx.Bucket(bSchedTenant).Put(tk, nil)
}

// newRow is the row of a new schedule in the forms the transaction may
// write, encoded before it, as the transaction holds the one writer.
type newRow struct {
	doc       []byte          // the schedule and its sole child alone
	fire      int             // the index in fs of the fire the row can hold (impliesFire), or -1
	withFire  []byte          // doc holding that fire
	withEvent []byte          // withFire holding that fire's one event (impliesEvent); nil if it cannot
	event     *model.Event    // that event: its due entry's fields and its id are the row's
	decoded   *model.Schedule // doc decoded, for the heads of events the row does not hold; else nil
	// childImplied: withFire and withEvent hold the sole child marked
	// (impliesChild), which then gets no children entry.
	childImplied bool
}

// encodeNewRow encodes the row of the new schedule sc with its sole child
// (soleChild) and the fires fs it is created with, with the codes of c.
// The row holds the first fire that impliesFire allows if no fire row has
// its id, and that fire's event as well if impliesEvent allows, grouped
// (Options.groupedOneOffs) does not forbid and no event has its id or
// fire; the transaction checks those and picks the form. The forms share
// the schedule's encoding: a fire and an event are appended to it as their
// own parts. A form that holds the fire holds the sole child marked if
// impliesChild allows and indexed (Options.indexedOneOffs) does not forbid.
//
// The event held is not decoded back: what putImpliedDue and the absence checks
// read of it (ids, shard, status, fence, launch time) the row gives back
// equal, as encodeRowEvent keeps a time as a delta only when it gives the
// time back exactly. The schedule is decoded, as newGroup's heads read it,
// only when some event of fs may need a group.
func encodeNewRow(sc *model.Schedule, sole *model.Child, fs []store.FireNew, grouped, indexed bool, c rowCodes) (newRow, error) {
	doc, err := encodeScheduleRow(sc, sole, c)
	if err != nil {
		return newRow{fire: -1}, err
	}
	r := newRow{doc: doc, fire: -1}
	if len(fs) == 0 {
		return r, nil
	}
	for j, fn := range fs {
		if impliesFire(sc, fn.Fire) {
			r.fire = j
			break
		}
	}
	var fb, eb []byte
	if r.fire >= 0 {
		f := fs[r.fire].Fire
		fb = encodeRowFire(sc, f)
		r.childImplied = !indexed && impliesChild(sc, sole, f)
		if !grouped && impliesEvent(sc, f, fs[r.fire].Events) {
			r.event = fs[r.fire].Events[0]
			eb = encodeRowEvent(sc, f, r.event, c.tokenKey())
		}
	}
	if r.event == nil || len(fs) > 1 {
		r.decoded, _ = decodeSchedule([]byte(sc.ID), r.doc, c)
	}
	if r.fire < 0 {
		return r, nil
	}
	// One allocation for both forms: withEvent follows withFire.
	n := len(r.doc) + len(fb) + binary.MaxVarintLen64
	buf := make([]byte, 0, n+n+len(eb)+binary.MaxVarintLen64)
	r.withFire = putBytes(append(buf, r.doc...), fb)
	r.withFire[1] |= schedFire // the low seven flags are in the first byte of the flags' uvarint, after the version
	if r.childImplied {
		r.withFire[1] |= schedChildImplied
	}
	r.withFire = r.withFire[:len(r.withFire):len(r.withFire)]
	if eb == nil {
		return r, nil
	}
	r.withEvent = putBytes(append(buf[len(r.withFire):len(r.withFire)], r.withFire...), eb)
	r.withEvent[1] |= schedEvent
	return r, nil
}

// ScheduleCreateMany stores the items, their children and their fires in
// one transaction; an item whose id exists gets model.ErrConflict and
// writes nothing.
func (s *Store) ScheduleCreateMany(ctx context.Context, items []store.ScheduleNew) ([]error, error) {
	res := make([]error, len(items))
	// Encoded before the transaction, which holds the one writer.
	// An item whose tenant or origin has no code yet is encoded in the
	// transaction (unencoded: its row's doc is nil).
	rows := make([]newRow, len(items))
	scs := make([]*model.Schedule, len(items))
	for i, it := range items {
		scs[i] = it.Schedule
	}
	pre := s.committedDict(scs...)
	nf := 0
	var children []newChild
	for i, it := range items {
		sole := soleChild(it.Schedule, it.Children)
		rows[i], _ = encodeNewRow(it.Schedule, sole, it.Fires, s.grouped, s.indexed, pre)
		nf += len(it.Fires)
		children = appendNewChildren(children, it.Children, sole, i)
	}
	sortNewChildren(children)
	var stored []newChild                 // children to write: of the items not in conflict
	unindexed := make([]bool, len(items)) // the item's row holds its child (childImplied)
	// The fires' own rows, and the heads of their events' groups, are
	// encoded for the fires and events that the schedules' rows will
	// likely not hold; the transaction encodes the others if it must.
	fireDocs := make([][]byte, 0, nf)
	heads := make(map[*model.Event]preparedHead)
	for i, it := range items {
		r := &rows[i]
		for k, fn := range it.Fires {
			if k == r.fire {
				fireDocs = append(fireDocs, nil)
				continue
			}
			fireDocs = append(fireDocs, encodeFire(fn.Fire))
		}
		if r.decoded != nil {
			prepareHeads(heads, r.decoded, it.Fires)
		}
	}
	var (
		fs      []store.FireNew
		fdocs   [][]byte
		inRow   []bool
		evRow   []*model.Event
		written = make(map[string]*model.Schedule, len(items))
	)
	err := s.batch(ctx, "schedule create many", func(tx *bolt.Tx) error {
		// Ids in creation order are above every key of these buckets, so
		// their absence needs no search.
		ids, fires := above{b: tx.Bucket(bSchedules)}, above{b: tx.Bucket(bFires)}
		evIDs, evGroups := above{b: tx.Bucket(bEvIDs)}, above{b: tx.Bucket(bEvGroups)}
		fs, fdocs, inRow, evRow = fs[:0], fdocs[:0], inRow[:0], evRow[:0]
		clear(written)
		run := batchRun()
		var dict *rowDict // for the items not encoded before
		at := 0           // items[i].Fires are encoded at fireDocs[at:] (nil: not encoded)
		for i, it := range items {
			res[i], unindexed[i] = nil, false
			from := at
			at += len(it.Fires)
			id := schedKey(it.Schedule.ID)
			if !ids.absent(id) {
				res[i] = model.ErrConflict
				continue
			}
			r := &rows[i]
			if r.doc == nil {
				if dict == nil {
					dict = s.dict(tx)
				}
				inTx, err := encodeNewRow(it.Schedule, soleChild(it.Schedule, it.Children), it.Fires, s.grouped, s.indexed, dict)
				if err != nil {
					return err
				}
				r = &inTx
			}
			row, j, ev := r.doc, r.fire, (*model.Event)(nil)
			if j >= 0 && fires.absent([]byte(it.Fires[j].Fire.ID)) {
				row, unindexed[i] = r.withFire, r.childImplied
				if r.event != nil && evIDs.absent([]byte(r.event.ID)) && evGroups.absent(strKey(r.event.FireID)) {
					row, ev = r.withEvent, r.event
				}
			} else {
				j = -1
			}
			if err := createSchedule(tx, it.Schedule, row, run); err != nil {
				return err
			}
			ids.put(id)
			for k := range it.Fires {
				inRow = append(inRow, k == j)
				if k == j {
					evRow = append(evRow, ev)
				} else {
					evRow = append(evRow, nil)
				}
			}
			fs = append(fs, it.Fires...)
			fdocs = append(fdocs, fireDocs[from:at]...)
			if r.decoded != nil {
				written[it.Schedule.ID] = r.decoded
			}
		}
		run.finish(tx)
		stored = stored[:0]
		for _, c := range children {
			if res[c.item] == nil && !unindexed[c.item] {
				stored = append(stored, c)
			}
		}
		if err := writeChildren(tx, stored); err != nil {
			return err
		}
		if len(fs) == 0 {
			return nil
		}
		_, err := putFires(tx, s.tokens, fs, fdocs, inRow, evRow, make([]bool, len(fs)), written, heads)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ScheduleGet returns the tenant's schedule; model.ErrNotFound otherwise.
func (s *Store) ScheduleGet(ctx context.Context, tenantID, id string) (*model.Schedule, error) {
	var sc model.Schedule
	err := s.view(ctx, "schedule get", func(tx *bolt.Tx) error {
		if err := getScheduleInto(s.dict(tx), []byte(id), &sc); err != nil {
			return err
		}
		if sc.TenantID != tenantID {
			return model.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &sc, nil
}

// ScheduleGetMany returns the schedules with these ids that exist.
// Cross-tenant.
func (s *Store) ScheduleGetMany(ctx context.Context, ids []string) ([]*model.Schedule, error) {
	var out []*model.Schedule
	err := s.view(ctx, "schedule get many", func(tx *bolt.Tx) error {
		out = out[:0]
		for _, id := range ids {
			var sc model.Schedule
			switch err := getScheduleInto(s.dict(tx), []byte(id), &sc); err {
			case nil:
				out = append(out, &sc)
			case model.ErrNotFound:
			default:
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleList pages a tenant's schedules by id. Limit is clamped to
// 1..1000; zero means 1000.
func (s *Store) ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*model.Schedule, error) {
	limit := limitOr(p.Limit, 1000, 1000)
	var out []*model.Schedule
	err := s.view(ctx, "schedule list", func(tx *bolt.Tx) error {
		out = nil
		prefix := tenantPrefix(tx, p.TenantID)
		if prefix == nil {
			return nil // a tenant without a code has no schedules
		}
		for id := range tenantSchedules(tx.Bucket(bSchedTenant), prefix, p.After) {
			if len(out) == limit {
				break
			}
			if id == p.After {
				continue
			}
			var sc model.Schedule
			if err := getScheduleInto(s.dict(tx), []byte(id), &sc); err != nil {
				return err
			}
			if (p.State != "" && sc.State != p.State) ||
				(p.PolicyID != "" && sc.PolicyID != p.PolicyID) ||
				(p.NamePrefix != "" && !strings.HasPrefix(sc.Name, p.NamePrefix)) ||
				!model.LabelsMatch(sc.Labels, p.Labels) {
				continue
			}
			out = append(out, &sc)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleUpdate replaces the schedule if its stored Version equals
// expectedVersion, and its children when children is non-nil, in one
// transaction (so the write order the contract describes for stores without
// transactions is moot here). model.ErrNotFound, model.ErrConflict.
func (s *Store) ScheduleUpdate(ctx context.Context, sc *model.Schedule, expectedVersion int64, children []model.Child) error {
	if sc.Version != expectedVersion+1 {
		return wrap("schedule update", &model.FieldError{Field: "version", Reason: fmt.Sprintf("must be %d", expectedVersion+1)})
	}
	return s.update(ctx, "schedule update", func(tx *bolt.Tx) error {
		old, oldSole, err := getScheduleRow(s.dict(tx), []byte(sc.ID))
		if err != nil {
			return err
		}
		if old.TenantID != sc.TenantID {
			return model.ErrNotFound
		}
		if old.Version != expectedVersion {
			return model.ErrConflict
		}
		return updateScheduleRow(tx, newTenantCodes(tx), s.tokens, old, oldSole, sc, children)
	})
}

// updateScheduleRow replaces the stored schedule old, whose row holds
// oldSole inline, by sc, and its children by children unless nil.
func updateScheduleRow(tx *bolt.Tx, codes *tenantCodes, keys *tokenKey, old *model.Schedule, oldSole *model.Child, sc *model.Schedule, children []model.Child) error {
	if old.RunAt != nil {
		// The event the row holds stays, in a group of its own.
		if err := newEvtx(tx, keys).materialiseIn(sc.ID); err != nil {
			return err
		}
		if err := unrefHeads(tx, keys, sc.ID); err != nil {
			return err
		}
	}
	// The fire the old row holds is of the old version: a row of its own.
	if err := spillFire(tx, keys, sc.ID, true); err != nil {
		return err
	}
	var sole *model.Child
	switch {
	case children != nil:
		if err := dropSoleChild(tx, oldSole); err != nil {
			return err
		}
		if _, err := deleteChildren(tx, sc.ID, nil); err != nil {
			return err
		}
		sole = soleChild(sc, children)
		if err := putChildren(tx, children, sole); err != nil {
			return err
		}
	case oldSole != nil:
		// The child stays, of the old version, for the orphan clean-up,
		// which finds children by schedule: the new row does not hold it.
		if tx.Bucket(bChildren).Get(childKey(oldSole)) != nil {
			if err := tx.Bucket(bChildSched).Put(childSchedKey(oldSole), nil); err != nil {
				return err
			}
		}
	}
	return putSchedule(tx, codes, keys, old, sc, sole)
}

// ScheduleDelete removes the tenant's schedule and its children.
// model.ErrNotFound. Its events are left to EventCancelPending.
func (s *Store) ScheduleDelete(ctx context.Context, tenantID, id string) error {
	return s.update(ctx, "schedule delete", func(tx *bolt.Tx) error {
		return s.deleteSchedule(tx, tenantID, id)
	})
}

// deleteSchedule is ScheduleDelete in transaction tx.
func (s *Store) deleteSchedule(tx *bolt.Tx, tenantID, id string) error {
	old, oldSole, err := getScheduleRow(s.dict(tx), []byte(id))
	if err != nil {
		return err
	}
	if old.TenantID != tenantID {
		return model.ErrNotFound
	}
	if err := writeEndKeys(tx, nil, old, nil); err != nil {
		return err
	}
	if old.RunAt != nil {
		// Events outlive their schedule: the one the row holds goes
		// into a group of its own.
		if err := newEvtx(tx, s.tokens).materialiseIn(id); err != nil {
			return err
		}
		if err := unrefHeads(tx, s.tokens, id); err != nil {
			return err
		}
	}
	// Fires outlive their schedule.
	if err := spillFire(tx, s.tokens, id, true); err != nil {
		return err
	}
	if err := dropSoleChild(tx, oldSole); err != nil {
		return err
	}
	if _, err := deleteChildren(tx, id, nil); err != nil {
		return err
	}
	if code := tenantPrefix(tx, tenantID); code != nil {
		if err := tx.Bucket(bSchedTenant).Delete(appendTenantSched(code, id)); err != nil {
			return err
		}
	}
	return tx.Bucket(bSchedules).Delete(schedKey(id))
}

// ScheduleCountByPolicy counts a tenant's schedules that name policyID. It
// scans the tenant's schedules: it serves policy deletion, which is rare.
func (s *Store) ScheduleCountByPolicy(ctx context.Context, tenantID, policyID string) (int, error) {
	return s.countSchedules(ctx, "schedule count by policy", tenantID, func(sc *model.Schedule) bool { return sc.PolicyID == policyID })
}

// ScheduleCountByCalendar counts a tenant's schedules that name
// calendarID. It scans the tenant's schedules: it serves calendar
// deletion, which is rare.
func (s *Store) ScheduleCountByCalendar(ctx context.Context, tenantID, calendarID string) (int, error) {
	return s.countSchedules(ctx, "schedule count by calendar", tenantID, func(sc *model.Schedule) bool {
		return slices.Contains(sc.ExcludeCalendars, calendarID)
	})
}

// countSchedules counts the tenant's schedules for which match is true,
// reading each of them.
func (s *Store) countSchedules(ctx context.Context, op, tenantID string, match func(*model.Schedule) bool) (int, error) {
	var n int
	err := s.view(ctx, op, func(tx *bolt.Tx) error {
		n = 0
		prefix := tenantPrefix(tx, tenantID)
		if prefix == nil {
			return nil
		}
		var err error
		scanPrefix(tx, bSchedTenant, prefix, func(k, _ []byte) bool {
			id := tenantSchedID(k[len(prefix):])
			var sc model.Schedule
			if err = getScheduleInto(s.dict(tx), []byte(id), &sc); err != nil {
				return false
			}
			if match(&sc) {
				n++
			}
			return true
		})
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// ScheduleCountByTenant counts the keys of the tenant index less the
// tenant's completed schedules (their own entries in schedule_ends),
// stopping at max when max > 0.
func (s *Store) ScheduleCountByTenant(ctx context.Context, tenantID string, max int) (int, error) {
	var n int
	err := s.view(ctx, "schedule count by tenant", func(tx *bolt.Tx) error {
		n = 0
		prefix := tenantPrefix(tx, tenantID)
		if prefix == nil {
			return nil
		}
		done := completedCount(tx, prefix)
		scanPrefix(tx, bSchedTenant, prefix, func(_, _ []byte) bool {
			n++
			return max <= 0 || n-done < max
		})
		n -= done
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// ChildrenFind returns the children of p.Keys in one partition and
// timezone: one prefix seek per key. Cross-tenant. Not those that rows
// hold marked (impliesChild).
func (s *Store) ChildrenFind(ctx context.Context, p *store.ChildrenFindParams) ([]model.Child, error) {
	var out []model.Child
	err := s.view(ctx, "children find", func(tx *bolt.Tx) error {
		out = nil
		c := tx.Bucket(bChildren).Cursor()
		var prefix []byte
		for _, key := range p.Keys {
			prefix = childPrefix(prefix[:0], p.Partition, p.Timezone, key.LaunchExpression, key.Minute)
			for k, v := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
				child, err := decodeChild(k)
				if err != nil {
					return err
				}
				if child.TenantID, err = childTenant(&s.names[dictTenant], tx, v); err != nil {
					return err
				}
				out = append(out, child)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ChildTimezones lists the distinct timezones that have children, sorted.
func (s *Store) ChildTimezones(ctx context.Context) ([]string, error) {
	var out []string
	err := s.view(ctx, "child timezones", func(tx *bolt.Tx) error {
		out = nil
		scanPrefix(tx, bChildTZ, nil, func(k, _ []byte) bool {
			out = append(out, string(k))
			return true
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// ChildrenDeleteOrphans removes children whose schedule is missing or has
// another version. It walks the by-schedule index, so it reads one schedule
// per schedule with children, not one per child.
func (s *Store) ChildrenDeleteOrphans(ctx context.Context) (int, error) {
	var n int
	err := s.update(ctx, "children delete orphans", func(tx *bolt.Tx) error {
		n = 0
		// Find the schedules that have children first; deleting while a
		// cursor walks the bucket is not allowed.
		var scheduleIDs []string
		var last string
		scanPrefix(tx, bChildSched, nil, func(k, _ []byte) bool {
			id, _ := readStr(k)
			if id != last || len(scheduleIDs) == 0 {
				scheduleIDs = append(scheduleIDs, id)
				last = id
			}
			return true
		})
		for _, id := range scheduleIDs {
			var sc model.Schedule
			version := int64(-1) << 62 // matches no child: the schedule is gone
			switch err := getScheduleInto(s.dict(tx), []byte(id), &sc); err {
			case nil:
				version = sc.Version
			case model.ErrNotFound:
			default:
				return err
			}
			removed, err := deleteChildren(tx, id, func(c model.Child) bool { return c.ScheduleVersion == version })
			if err != nil {
				return err
			}
			n += removed
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// WatermarkGet returns the partition's watermark, zero if none was set.
func (s *Store) WatermarkGet(ctx context.Context, partition int) (model.Watermark, error) {
	var w model.Watermark
	err := s.view(ctx, "watermark get", func(tx *bolt.Tx) error {
		w = model.Watermark{}
		err := getJSON(tx, bWatermarks, appendInt32(nil, partition), &w)
		if err == model.ErrNotFound {
			w.Partition = partition
			return nil
		}
		return err
	})
	return w, err
}

// WatermarkAdvance moves the watermark forward under a fence that is not
// older than the stored one. model.ErrConflict otherwise.
func (s *Store) WatermarkAdvance(ctx context.Context, w model.Watermark) error {
	return s.batch(ctx, "watermark advance", func(tx *bolt.Tx) error {
		key := appendInt32(nil, w.Partition)
		var old model.Watermark
		switch err := getJSON(tx, bWatermarks, key, &old); err {
		case nil:
			if !w.Until.After(old.Until) || w.Fence < old.Fence {
				return model.ErrConflict
			}
		case model.ErrNotFound:
		default:
			return err
		}
		return putJSON(tx, bWatermarks, key, &w)
	})
}

func hasPrefix(k, prefix []byte) bool {
	return len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix)
}
