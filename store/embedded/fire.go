package embedded

import (
	"bytes"
	"context"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// fireSchedKey orders a schedule's fires by fire time: schedule\0time id.
func fireSchedKey(scheduleID string, fireTime time.Time, id string) []byte {
	return append(appendTime(strKey(scheduleID), fireTime), id...)
}

// spillFire writes the fire that the row of schedule id holds, if any, as
// a row of its own with its by-schedule entry, and the schedule's row
// without it: before the fire changes, or the schedule's row does.
// keepRow leaves the schedule's row to the caller, who rewrites or deletes
// it.
func spillFire(tx *bolt.Tx, keys *tokenKey, id string, keepRow bool) error {
	raw := tx.Bucket(bSchedules).Get(schedKey(id))
	if rowHasEvent(raw) {
		// The fire's event goes into a group of its own first.
		if err := newEvtx(tx, keys).materialiseIn(id); err != nil {
			return err
		}
		raw = tx.Bucket(bSchedules).Get(schedKey(id))
	}
	if !rowHasFire(raw) {
		return nil
	}
	dict := &rowDict{tx: tx, tokens: keys}
	sc, child, f, err := decodeScheduleFire([]byte(id), raw, dict)
	if err != nil {
		return err
	}
	implied := rowChildImplied(raw) // read before the writes, which may remap raw
	if err := createFire(tx, f, encodeFire(f)); err != nil {
		return err
	}
	if keepRow {
		return nil
	}
	doc, err := encodeScheduleRow(sc, child, dict)
	if err != nil {
		return err
	}
	return tx.Bucket(bSchedules).Put(schedKey(id), markChildImplied(doc, implied))
}

// spillRowFire spills (spillFire) the fire id of schedule scheduleID if
// it has no row of its own, before it changes.
func spillRowFire(tx *bolt.Tx, keys *tokenKey, id, scheduleID string) error {
	if tx.Bucket(bFires).Get([]byte(id)) != nil {
		return nil
	}
	return spillFire(tx, keys, scheduleID, false)
}

// rowFireOf returns the fire that the row of schedule id holds; nil if
// none.
func rowFireOf(r *rowDict, id string) (*model.Fire, error) {
	raw := r.tx.Bucket(bSchedules).Get(schedKey(id))
	if !rowHasFire(raw) {
		return nil, nil
	}
	_, _, f, err := decodeScheduleFire([]byte(id), raw, r)
	return f, err
}

// newerFire reports whether a sorts after b in the by-schedule index: by
// fire time, then id.
func newerFire(a, b *model.Fire) bool {
	if c := a.FireTime.Compare(b.FireTime); c != 0 {
		return c > 0
	}
	return a.ID > b.ID
}

// createFire writes the new fire f, encoded as doc, and its by-schedule
// index entry.
func createFire(tx *bolt.Tx, f *model.Fire, doc []byte) error {
	b, bs := tx.Bucket(bFires), tx.Bucket(bFireSched)
	id, sk := []byte(f.ID), fireSchedKey(f.ScheduleID, f.FireTime, f.ID)
	packAppends(b, id, 0)
	packAppends(bs, sk, 0)
	if err := b.Put(id, doc); err != nil {
		return err
	}
	if err := putWatch(tx, f); err != nil {
		return err
	}
	if f.Deadline != nil && f.DeadlineMissed == nil {
		if err := tx.Bucket(bFireDeadlines).Put(fireDeadlineKey(f), nil); err != nil {
			return err
		}
	}
	return bs.Put(sk, nil)
}

// FireInsert stores f unless a fire with its id exists. Cross-tenant.
func (s *Store) FireInsert(ctx context.Context, f *model.Fire) (bool, error) {
	var inserted bool
	err := s.batch(ctx, "fire insert", func(tx *bolt.Tx) error {
		inserted = false
		if ok, err := fireExists(s.dict(tx), f.ID); ok || err != nil {
			return err
		}
		if err := createFire(tx, f, encodeFire(f)); err != nil {
			return err
		}
		inserted = true
		if f.Remaining > 0 {
			if err := tx.Bucket(bFireEmitting).Put([]byte(f.ID), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return inserted, nil
}

// FireGet returns the tenant's fire. model.ErrNotFound.
func (s *Store) FireGet(ctx context.Context, tenantID, id string) (*model.Fire, error) {
	var f model.Fire
	err := s.view(ctx, "fire get", func(tx *bolt.Tx) error {
		if err := getFireInto(s.dict(tx), []byte(id), &f); err != nil {
			return err
		}
		if f.TenantID != tenantID {
			return model.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// FireList pages a tenant's schedule's fires, newest first, walking the
// by-schedule index backwards from p.Before.
func (s *Store) FireList(ctx context.Context, p *store.FireListParams) ([]*model.Fire, error) {
	limit := limitOr(p.Limit, 1000, 1000)
	var out []*model.Fire
	err := s.view(ctx, "fire list", func(tx *bolt.Tx) error {
		out = nil
		prefix := strKey(p.ScheduleID)
		dict := s.dict(tx)
		var err error
		scanBackward(tx, bFireSched, prefix, beforeKey(prefix, p.Before), func(k []byte) bool {
			var f model.Fire
			if err = getFireInto(dict, k[len(prefix)+timeLen:], &f); err != nil {
				return false
			}
			if f.TenantID != p.TenantID {
				return true
			}
			out = append(out, &f)
			return len(out) < limit
		})
		if err != nil {
			return err
		}
		// The fire the schedule's row holds, in its place.
		rf, err := rowFireOf(dict, p.ScheduleID)
		if err != nil || rf == nil || rf.TenantID != p.TenantID || (!p.Before.IsZero() && !rf.FireTime.Before(p.Before)) {
			return err
		}
		i := slices.IndexFunc(out, func(f *model.Fire) bool { return newerFire(rf, f) })
		if i < 0 {
			i = len(out)
		}
		if out = slices.Insert(out, i, rf); len(out) > limit {
			out = out[:limit]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FireLatestBefore returns the schedule's fire with the latest FireTime
// strictly before t. model.ErrNotFound if none. Cross-tenant.
func (s *Store) FireLatestBefore(ctx context.Context, scheduleID string, t time.Time) (*model.Fire, error) {
	var f *model.Fire
	err := s.view(ctx, "fire latest before", func(tx *bolt.Tx) error {
		f = nil
		prefix := strKey(scheduleID)
		dict := s.dict(tx)
		var err error
		scanBackward(tx, bFireSched, prefix, appendTime(bytes.Clone(prefix), t), func(k []byte) bool {
			var got model.Fire
			if err = getFireInto(dict, k[len(prefix)+timeLen:], &got); err == nil {
				f = &got
			}
			return false
		})
		if err != nil {
			return err
		}
		rf, err := rowFireOf(dict, scheduleID)
		if err != nil {
			return err
		}
		if rf != nil && rf.FireTime.Before(t) && (f == nil || newerFire(rf, f)) {
			f = rf
		}
		if f == nil {
			return model.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// FireSetDecision sets the decision and note of a fire. model.ErrNotFound.
func (s *Store) FireSetDecision(ctx context.Context, id string, d model.FireDecision, note string) error {
	return s.batch(ctx, "fire set decision", func(tx *bolt.Tx) error {
		var f model.Fire
		if err := getFireInto(s.dict(tx), []byte(id), &f); err != nil {
			return err
		}
		f.Decision, f.Note = d, note
		if err := spillRowFire(tx, s.tokens, id, f.ScheduleID); err != nil {
			return err
		}
		return putFire(tx, &f)
	})
}

// FireSetRemaining lowers the fire's Remaining; the fires_emitting index
// loses the fire when it reaches 0. model.ErrNotFound.
func (s *Store) FireSetRemaining(ctx context.Context, id string, remaining int) error {
	return s.batch(ctx, "fire set remaining", func(tx *bolt.Tx) error {
		var f model.Fire
		if err := getFireInto(s.dict(tx), []byte(id), &f); err != nil {
			return err
		}
		if remaining >= f.Remaining {
			return nil
		}
		f.Remaining = max(remaining, 0)
		if f.Remaining == 0 {
			if err := tx.Bucket(bFireEmitting).Delete([]byte(id)); err != nil {
				return err
			}
		}
		if err := spillRowFire(tx, s.tokens, id, f.ScheduleID); err != nil {
			return err
		}
		return putFire(tx, &f)
	})
}

// FireListEmitting returns up to limit fires with Remaining > 0, by id.
// Cross-tenant.
func (s *Store) FireListEmitting(ctx context.Context, limit int) ([]*model.Fire, error) {
	limit = limitOr(limit, 1000, 1000)
	var out []*model.Fire
	err := s.view(ctx, "fire list emitting", func(tx *bolt.Tx) error {
		out = nil
		dict := s.dict(tx)
		c := tx.Bucket(bFireEmitting).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
			var f model.Fire
			if err := getFireInto(dict, k, &f); err != nil {
				return err
			}
			out = append(out, &f)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// beforeKey is the exclusive upper bound of a backward scan: the time t
// under prefix, or the end of the prefix when t is zero.
func beforeKey(prefix []byte, t time.Time) []byte {
	if t.IsZero() {
		return nil
	}
	return appendTime(bytes.Clone(prefix), t)
}

// scanBackward calls fn, newest key first, for the keys of b under prefix
// that sort before upper (all keys under prefix when upper is nil), until fn
// returns false.
func scanBackward(tx *bolt.Tx, b, prefix, upper []byte, fn func(k []byte) bool) {
	r := reverseCursor(tx.Bucket(b))
	if upper == nil {
		upper = prefixEnd(prefix)
	}
	for k := r.below(upper); k != nil && hasPrefix(k, prefix); k = r.prev(k) {
		if !fn(k) {
			return
		}
	}
}

// prefixEnd returns the smallest key greater than every key that starts with
// prefix (nil if there is none).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// FireInsertMany stores the new fires of fs with their new events in one
// group commit. Cross-tenant.
func (s *Store) FireInsertMany(ctx context.Context, fs []store.FireNew) ([]bool, int, error) {
	if len(fs) == 0 {
		return nil, 0, nil
	}
	inserted := make([]bool, len(fs))
	var n int
	err := s.batch(ctx, "fire insert many", func(tx *bolt.Tx) error {
		var err error
		n, err = putFires(tx, s.tokens, fs, nil, nil, nil, inserted, nil, nil)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return inserted, n, nil
}

// putFires writes the fires of fs whose ids are new with their new events,
// setting inserted[i] for each fire written (from scratch: a group commit
// may run it again); it returns the number of events written. docs, if not
// nil, are the fires encoded before the transaction (nil: one to encode
// here); written, if not nil,
// the schedules this transaction wrote (see newEvtxWith); inRow, if not
// nil, marks the fires that those schedules' rows hold (impliesFire),
// which this transaction found new: only their events are written;
// inRowEvents, if not nil, holds the events of those fires that the rows
// hold too (impliesEvent), with the fields their due entries need as the
// rows give them back: only their due entries are written; heads,
// if not nil, are event group heads made before the transaction
// (prepareHeads).
func putFires(tx *bolt.Tx, keys *tokenKey, fs []store.FireNew, docs [][]byte, inRow []bool, inRowEvents []*model.Event, inserted []bool, written map[string]*model.Schedule, heads map[*model.Event]preparedHead) (int, error) {
	clear(inserted)
	n := 0
	emitting := tx.Bucket(bFireEmitting)
	// New fires open new event groups, whose sequences (and so row and
	// fire index keys) go at the end: those pages can be filled.
	pack(tx, bEvRows, bEvFire)
	x := newEvtxWith(tx, keys, written)
	x.prepared = heads
	x.due.hold()
	x.due.appends = true
	for i, fn := range fs {
		f := fn.Fire
		if inRowEvents != nil && inRowEvents[i] != nil {
			inserted[i] = true
			n++
			if err := x.putImpliedDue(inRowEvents[i]); err != nil {
				return 0, err
			}
			continue
		}
		if inRow != nil && inRow[i] {
			inserted[i] = true
			if err := x.insertAll(fn.Events, &n); err != nil {
				return 0, err
			}
			continue
		}
		if ok, err := fireExists(x.dict, f.ID); ok || err != nil {
			if err != nil {
				return 0, err
			}
			continue
		}
		var doc []byte
		if docs != nil {
			doc = docs[i]
		}
		if doc == nil { // not encoded before the transaction
			doc = encodeFire(f)
		}
		if err := createFire(tx, f, doc); err != nil {
			return 0, err
		}
		inserted[i] = true
		if f.Remaining > 0 {
			if err := emitting.Put([]byte(f.ID), nil); err != nil {
				return 0, err
			}
		}
		if err := x.insertAll(fn.Events, &n); err != nil {
			return 0, err
		}
	}
	return n, x.flush()
}

// insertAll inserts events as insert does, adding those it stored to *n.
func (x *evtx) insertAll(events []*model.Event, n *int) error {
	for _, e := range events {
		ok, err := x.insert(e)
		if err != nil {
			return err
		}
		if ok {
			*n++
		}
	}
	return nil
}
