package embedded

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// fireSchedKey orders a schedule's fires by fire time: schedule\0time id.
func fireSchedKey(scheduleID string, fireTime time.Time, id string) []byte {
	return append(appendTime(strKey(scheduleID), fireTime), id...)
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
	return bs.Put(sk, nil)
}

// FireInsert stores f unless a fire with its id exists. Cross-tenant.
func (s *Store) FireInsert(ctx context.Context, f *model.Fire) (bool, error) {
	var inserted bool
	err := s.batch(ctx, "fire insert", func(tx *bolt.Tx) error {
		inserted = false
		if tx.Bucket(bFires).Get([]byte(f.ID)) != nil {
			return nil
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
		if err := getFireInto(tx, []byte(id), &f); err != nil {
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
		var err error
		scanBackward(tx, bFireSched, prefix, beforeKey(prefix, p.Before), func(k []byte) bool {
			var f model.Fire
			if err = getFireInto(tx, k[len(prefix)+timeLen:], &f); err != nil {
				return false
			}
			if f.TenantID != p.TenantID {
				return true
			}
			out = append(out, &f)
			return len(out) < limit
		})
		return err
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
		var err error
		scanBackward(tx, bFireSched, prefix, appendTime(bytes.Clone(prefix), t), func(k []byte) bool {
			var got model.Fire
			if err = getFireInto(tx, k[len(prefix)+timeLen:], &got); err == nil {
				f = &got
			}
			return false
		})
		if err != nil {
			return err
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
		if err := getFireInto(tx, []byte(id), &f); err != nil {
			return err
		}
		f.Decision, f.Note = d, note
		return putFire(tx, &f)
	})
}

// FireSetRemaining lowers the fire's Remaining; the fires_emitting index
// loses the fire when it reaches 0. model.ErrNotFound.
func (s *Store) FireSetRemaining(ctx context.Context, id string, remaining int) error {
	return s.batch(ctx, "fire set remaining", func(tx *bolt.Tx) error {
		var f model.Fire
		if err := getFireInto(tx, []byte(id), &f); err != nil {
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
		c := tx.Bucket(bFireEmitting).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
			var f model.Fire
			if err := getFireInto(tx, k, &f); err != nil {
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
	c := tx.Bucket(b).Cursor()
	if upper == nil {
		upper = prefixEnd(prefix)
	}
	k, _ := c.Seek(upper)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	for ; k != nil && hasPrefix(k, prefix); k, _ = c.Prev() {
		if bytes.Compare(k, upper) >= 0 {
			continue
		}
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
		n, err = putFires(tx, fs, nil, inserted, nil)
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
// nil, are the fires encoded before the transaction; written, if not nil,
// the schedules this transaction wrote (see newEvtxWith).
func putFires(tx *bolt.Tx, fs []store.FireNew, docs [][]byte, inserted []bool, written map[string]*model.Schedule) (int, error) {
	clear(inserted)
	n := 0
	fires, emitting := tx.Bucket(bFires), tx.Bucket(bFireEmitting)
	// New fires open new event groups, whose sequences (and so row and
	// fire index keys) go at the end: those pages can be filled.
	pack(tx, bEvRows, bEvFire)
	x := newEvtxWith(tx, written)
	for i, fn := range fs {
		f := fn.Fire
		if fires.Get([]byte(f.ID)) != nil {
			continue
		}
		var doc []byte
		if docs != nil {
			doc = docs[i]
		} else {
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
		for _, e := range fn.Events {
			ok, err := x.insert(e)
			if err != nil {
				return 0, err
			}
			if ok {
				n++
			}
		}
	}
	return n, x.flush()
}
