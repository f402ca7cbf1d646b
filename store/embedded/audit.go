package embedded

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Audit records are JSON rows of bucket audit keyed by id (ids begin with
// their second, so the bucket is in time order), indexed by tenant\0id
// and by objectId\0id. Buckets added after layout 12: Open creates them in
// a directory without them, and a schedulerd that knows no audit ignores
// them, so they need no new layout.
var (
	bAudit       = []byte("audit")
	bAuditTenant = []byte("audit_by_tenant")
	bAuditObject = []byte("audit_by_object")
)

// AuditAppend stores the records whose ids are new, in one group commit.
func (s *Store) AuditAppend(ctx context.Context, rs []*model.AuditRecord) error {
	if len(rs) == 0 {
		return nil
	}
	return s.batch(ctx, "audit append", func(tx *bolt.Tx) error {
		rows, byTenant, byObject := tx.Bucket(bAudit), tx.Bucket(bAuditTenant), tx.Bucket(bAuditObject)
		for _, r := range rs {
			id := []byte(r.ID)
			if rows.Get(id) != nil {
				continue
			}
			if err := putJSON(tx, bAudit, id, r); err != nil {
				return err
			}
			if err := byTenant.Put(strKey(r.TenantID, r.ID), nil); err != nil {
				return err
			}
			if r.ObjectID != "" {
				if err := byObject.Put(strKey(r.ObjectID, r.ID), nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// AuditList pages the records of p through the object index, the tenant
// index or (every tenant's) the rows.
func (s *Store) AuditList(ctx context.Context, p *store.AuditListParams) ([]*model.AuditRecord, error) {
	limit := clampLimit(p.Limit)
	var out []*model.AuditRecord
	err := s.view(ctx, "audit list", func(tx *bolt.Tx) error {
		out = nil
		index, prefix, indexed := bAudit, []byte(nil), true
		switch {
		case p.ObjectID != "":
			index, prefix = bAuditObject, strKey(p.ObjectID)
		case p.TenantID != "":
			index, prefix = bAuditTenant, strKey(p.TenantID)
		default:
			indexed = false
		}
		start := p.After
		if !p.From.IsZero() {
			if floor := model.AuditIDFloor(p.From); floor > start {
				start = floor
			}
		}
		rows := tx.Bucket(bAudit)
		c := tx.Bucket(index).Cursor()
		seek := append(append([]byte(nil), prefix...), start...)
		for k, v := c.Seek(seek); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = c.Next() {
			id := string(k)
			if indexed {
				id, _ = readStr(k[len(prefix):])
			}
			if id == p.After {
				continue
			}
			if sec, ok := model.AuditIDSecond(id); ok && !p.To.IsZero() && sec > p.To.Unix() {
				break
			}
			if indexed {
				v = rows.Get([]byte(id))
				if v == nil {
					continue // removed by the retention meanwhile
				}
			}
			var r model.AuditRecord
			if err := jsonUnmarshal(v, &r); err != nil {
				return err
			}
			if !auditMatches(&r, p) {
				continue
			}
			out = append(out, &r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// auditMatches reports whether r passes p's filters.
func auditMatches(r *model.AuditRecord, p *store.AuditListParams) bool {
	switch {
	case p.TenantID != "" && r.TenantID != p.TenantID:
		return false
	case p.ObjectID != "" && r.ObjectID != p.ObjectID:
		return false
	case !p.From.IsZero() && r.At.Before(p.From):
		return false
	case !p.To.IsZero() && !r.At.Before(p.To):
		return false
	}
	return true
}

// AuditDeleteBefore removes up to limit records older than t, walking the
// rows from the oldest second until t's.
func (s *Store) AuditDeleteBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	limit = max(limit, 1)
	var n int
	err := s.update(ctx, "audit delete", func(tx *bolt.Tx) error {
		n = 0
		var doomed []*model.AuditRecord
		c := tx.Bucket(bAudit).Cursor()
		for k, v := c.First(); k != nil && len(doomed) < limit; k, v = c.Next() {
			if sec, ok := model.AuditIDSecond(string(k)); ok && sec > t.Unix() {
				break
			}
			var r model.AuditRecord
			if err := jsonUnmarshal(v, &r); err != nil {
				return err
			}
			if r.At.Before(t) {
				doomed = append(doomed, &r)
			}
		}
		rows, byTenant, byObject := tx.Bucket(bAudit), tx.Bucket(bAuditTenant), tx.Bucket(bAuditObject)
		for _, r := range doomed {
			if err := rows.Delete([]byte(r.ID)); err != nil {
				return err
			}
			if err := byTenant.Delete(strKey(r.TenantID, r.ID)); err != nil {
				return err
			}
			if r.ObjectID != "" {
				if err := byObject.Delete(strKey(r.ObjectID, r.ID)); err != nil {
					return err
				}
			}
		}
		n = len(doomed)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
