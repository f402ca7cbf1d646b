package embedded

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Buckets added after layout 12, which Open creates in a directory
// without them; a schedulerd that knows none of them ignores them, so
// they need no new layout. A fire's row stays as it is: whether it is
// watched and when it finished live here, read with the row (getFire).
var (
	// bFireWatching holds the ids of watched fires not finished yet
	// (FireListWatched).
	bFireWatching = []byte("fires_watching")
	// bFireFinished holds the watched fires that finished: id ->
	// FinishedAt (putTime).
	bFireFinished = []byte("fires_finished")
	// bSchedAfter indexes the schedules that fire after another:
	// upstream id \0 dependent id (ScheduleListAfter).
	bSchedAfter = []byte("schedules_after")
)

// fillWatch sets f.Watched and f.FinishedAt from the watch buckets.
func fillWatch(tx *bolt.Tx, f *model.Fire) {
	id := []byte(f.ID)
	if b := tx.Bucket(bFireWatching); b != nil && b.Get(id) != nil {
		f.Watched = true
		return
	}
	if b := tx.Bucket(bFireFinished); b != nil {
		if v := b.Get(id); v != nil {
			d := decoder{b: v}
			at := d.time()
			if d.err == nil {
				f.Watched, f.FinishedAt = true, &at
			}
		}
	}
}

// putWatch records the watch state of the new fire f.
func putWatch(tx *bolt.Tx, f *model.Fire) error {
	if !f.Watched {
		return nil
	}
	if f.FinishedAt != nil {
		return tx.Bucket(bFireFinished).Put([]byte(f.ID), putTime(nil, *f.FinishedAt))
	}
	return tx.Bucket(bFireWatching).Put([]byte(f.ID), []byte{})
}

// deleteWatch forgets the watch state of the fires ids.
func deleteWatch(tx *bolt.Tx, ids [][]byte) error {
	if err := deleteKeys(tx, bFireWatching, ids); err != nil {
		return err
	}
	return deleteKeys(tx, bFireFinished, ids)
}

// FireListWatched returns up to limit watched fires not finished, by id
// after after. Cross-tenant.
func (s *Store) FireListWatched(ctx context.Context, after string, limit int) ([]*model.Fire, error) {
	limit = limitOr(limit, 1000, 1000)
	var out []*model.Fire
	err := s.view(ctx, "fire list watched", func(tx *bolt.Tx) error {
		out = nil
		dict := s.dict(tx)
		c := tx.Bucket(bFireWatching).Cursor()
		k, _ := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, _ = c.Next()
		}
		for ; k != nil && len(out) < limit; k, _ = c.Next() {
			f, err := getFire(dict, k)
			if errors.Is(err, model.ErrNotFound) {
				continue // its fire went with its schedule
			}
			if err != nil {
				return err
			}
			out = append(out, f)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FireWatch marks the existing fire id watched. model.ErrNotFound.
func (s *Store) FireWatch(ctx context.Context, id string) error {
	return s.batch(ctx, "fire watch", func(tx *bolt.Tx) error {
		f, err := getFire(s.dict(tx), []byte(id))
		if err != nil {
			return err
		}
		if f.Watched {
			return nil
		}
		// A fire its one-off's row holds gets a row of its own first:
		// a watched fire is never held by the row (impliesFire).
		if err := spillRowFire(tx, s.tokens, id, f.ScheduleID); err != nil {
			return err
		}
		f.Watched = true
		return putWatch(tx, f)
	})
}

// FireSetFinished sets the FinishedAt of the watched fire id once.
// model.ErrNotFound.
func (s *Store) FireSetFinished(ctx context.Context, id string, at time.Time) (bool, error) {
	var set bool
	err := s.batch(ctx, "fire set finished", func(tx *bolt.Tx) error {
		set = false
		f, err := getFire(s.dict(tx), []byte(id))
		if err != nil {
			return err
		}
		if !f.Watched || f.FinishedAt != nil {
			return nil
		}
		if err := tx.Bucket(bFireWatching).Delete([]byte(id)); err != nil {
			return err
		}
		set = true
		return tx.Bucket(bFireFinished).Put([]byte(id), putTime(nil, at.UTC()))
	})
	if err != nil {
		return false, err
	}
	return set, nil
}

// afterKey is sc's key in bSchedAfter; nil if it has no After.
func afterKey(sc *model.Schedule) []byte {
	if sc == nil || sc.After == nil {
		return nil
	}
	return afterPrefix(sc.After.ScheduleID, sc.ID)
}

// afterPrefix is upstream \0 id.
func afterPrefix(upstream, id string) []byte {
	b := make([]byte, 0, len(upstream)+1+len(id))
	return append(append(append(b, upstream...), 0), id...)
}

// writeAfterKey keeps bSchedAfter with the write of a schedule from old
// to sc (either nil).
func writeAfterKey(tx *bolt.Tx, old, sc *model.Schedule) error {
	o, n := afterKey(old), afterKey(sc)
	if bytes.Equal(o, n) {
		return nil
	}
	b := tx.Bucket(bSchedAfter)
	if o != nil {
		if err := b.Delete(o); err != nil {
			return err
		}
	}
	if n != nil {
		return b.Put(n, nil)
	}
	return nil
}

// ScheduleListAfter returns up to p.Limit schedules with After set, by
// id after p.After (by upstream then id without p.Upstream).
// Cross-tenant.
func (s *Store) ScheduleListAfter(ctx context.Context, p *store.ScheduleListAfterParams) ([]*model.Schedule, error) {
	limit := limitOr(p.Limit, 1000, 1000)
	var out []*model.Schedule
	err := s.view(ctx, "schedule list after", func(tx *bolt.Tx) error {
		out = nil
		var ids []string
		var prefix []byte
		if p.Upstream != "" {
			prefix = afterPrefix(p.Upstream, "")
		}
		scanPrefix(tx, bSchedAfter, prefix, func(k, _ []byte) bool {
			if i := bytes.IndexByte(k, 0); i >= 0 && string(k[i+1:]) > p.After {
				ids = append(ids, string(k[i+1:]))
			}
			return true
		})
		slices.Sort(ids)
		dict := s.dict(tx)
		for _, id := range ids {
			if len(out) >= limit {
				break
			}
			sc, _, err := getScheduleRow(dict, []byte(id))
			if err != nil {
				if errors.Is(err, model.ErrNotFound) {
					continue
				}
				return err
			}
			out = append(out, sc)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
