package embedded

import (
	"bytes"
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Calendars are JSON rows of bucket calendars keyed by tenant\0id, so that
// a tenant's calendars are one prefix and no other tenant's id is found.

// CalendarCreate inserts c. model.ErrConflict if the tenant has a calendar
// with c's id.
func (s *Store) CalendarCreate(ctx context.Context, c *model.Calendar) error {
	return s.update(ctx, "calendar create", func(tx *bolt.Tx) error {
		key := strKey(c.TenantID, c.ID)
		if tx.Bucket(bCalendars).Get(key) != nil {
			return model.ErrConflict
		}
		return putJSON(tx, bCalendars, key, c)
	})
}

// CalendarGet returns the tenant's calendar. model.ErrNotFound.
func (s *Store) CalendarGet(ctx context.Context, tenantID, id string) (*model.Calendar, error) {
	var c model.Calendar
	if err := s.view(ctx, "calendar get", func(tx *bolt.Tx) error {
		return getJSON(tx, bCalendars, strKey(tenantID, id), &c)
	}); err != nil {
		return nil, err
	}
	return &c, nil
}

// CalendarList pages through a tenant's calendars by id.
func (s *Store) CalendarList(ctx context.Context, p *store.CalendarListParams) ([]*model.Calendar, error) {
	limit := clampLimit(p.Limit)
	var out []*model.Calendar
	err := s.view(ctx, "calendar list", func(tx *bolt.Tx) error {
		out = nil
		prefix := strKey(p.TenantID)
		after := strKey(p.TenantID, p.After)
		c := tx.Bucket(bCalendars).Cursor()
		k, v := c.Seek(prefix)
		if p.After != "" {
			if k, v = c.Seek(after); bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = c.Next() {
			var cal model.Calendar
			if err := jsonUnmarshal(v, &cal); err != nil {
				return err
			}
			out = append(out, &cal)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CalendarUpdate replaces the calendar if its stored Version equals
// expectedVersion. model.ErrNotFound, model.ErrConflict.
func (s *Store) CalendarUpdate(ctx context.Context, c *model.Calendar, expectedVersion int64) error {
	return s.update(ctx, "calendar update", func(tx *bolt.Tx) error {
		key := strKey(c.TenantID, c.ID)
		var cur model.Calendar
		if err := getJSON(tx, bCalendars, key, &cur); err != nil {
			return err
		}
		if cur.Version != expectedVersion {
			return model.ErrConflict
		}
		return putJSON(tx, bCalendars, key, c)
	})
}

// CalendarDelete removes the tenant's calendar. model.ErrNotFound.
func (s *Store) CalendarDelete(ctx context.Context, tenantID, id string) error {
	return s.update(ctx, "calendar delete", func(tx *bolt.Tx) error {
		key := strKey(tenantID, id)
		b := tx.Bucket(bCalendars)
		if b.Get(key) == nil {
			return model.ErrNotFound
		}
		return b.Delete(key)
	})
}

// CalendarCountByTenant counts the keys of the tenant's prefix, stopping at
// max when max > 0.
func (s *Store) CalendarCountByTenant(ctx context.Context, tenantID string, max int) (int, error) {
	var n int
	err := s.view(ctx, "calendar count", func(tx *bolt.Tx) error {
		n = 0
		scanPrefix(tx, bCalendars, strKey(tenantID), func(_, _ []byte) bool {
			n++
			return max <= 0 || n < max
		})
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
