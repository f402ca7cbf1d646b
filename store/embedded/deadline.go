package embedded

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// fireDeadlineKey is f's key in fires_by_deadline: deadline, id.
func fireDeadlineKey(f *model.Fire) []byte {
	return append(appendTime(nil, *f.Deadline), f.ID...)
}

// FireDeadlineDue returns up to limit fires whose open deadline is not
// after before, earliest first. Cross-tenant.
func (s *Store) FireDeadlineDue(ctx context.Context, before time.Time, limit int) ([]*model.Fire, error) {
	limit = limitOr(limit, 1000, 1000)
	var out []*model.Fire
	err := s.view(ctx, "fire deadline due", func(tx *bolt.Tx) error {
		out = nil
		dict := s.dict(tx)
		c := tx.Bucket(bFireDeadlines).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
			if len(k) < timeLen || readTime(k).After(before) {
				break
			}
			var f model.Fire
			switch err := getFireInto(dict, k[timeLen:], &f); err {
			case nil:
			case model.ErrNotFound: // deleted with its schedule
				continue
			default:
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

// FireDeadlineDone closes the fire's deadline, recording miss if set and
// none is recorded. model.ErrNotFound.
func (s *Store) FireDeadlineDone(ctx context.Context, id string, miss *model.DeadlineMiss) (bool, error) {
	var recorded bool
	err := s.batch(ctx, "fire deadline done", func(tx *bolt.Tx) error {
		recorded = false
		var f model.Fire
		if err := getFireInto(s.dict(tx), []byte(id), &f); err != nil {
			return err
		}
		if f.Deadline != nil {
			if err := tx.Bucket(bFireDeadlines).Delete(fireDeadlineKey(&f)); err != nil {
				return err
			}
		}
		if miss == nil || f.DeadlineMissed != nil {
			return nil
		}
		m := *miss
		m.At = m.At.UTC()
		f.DeadlineMissed, recorded = &m, true
		if err := spillRowFire(tx, s.tokens, id, f.ScheduleID); err != nil {
			return err
		}
		return putFire(tx, &f)
	})
	if err != nil {
		return false, err
	}
	return recorded, nil
}
