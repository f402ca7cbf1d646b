package embedded

import (
	"bytes"
	"context"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// TenantCreate inserts t. model.ErrConflict if the id exists.
func (s *Store) TenantCreate(ctx context.Context, t *model.Tenant) error {
	return s.update(ctx, "tenant create", func(tx *bolt.Tx) error {
		key := []byte(t.ID)
		if tx.Bucket(bTenants).Get(key) != nil {
			return model.ErrConflict
		}
		return putJSON(tx, bTenants, key, t)
	})
}

// TenantGet returns model.ErrNotFound for an unknown id.
func (s *Store) TenantGet(ctx context.Context, id string) (*model.Tenant, error) {
	var t model.Tenant
	err := s.view(ctx, "tenant get", func(tx *bolt.Tx) error {
		return getJSON(tx, bTenants, []byte(id), &t)
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// TenantUpdate replaces t.ID if its stored Version is expectedVersion.
// model.ErrNotFound for an unknown id, model.ErrConflict on another version.
func (s *Store) TenantUpdate(ctx context.Context, t *model.Tenant, expectedVersion int64) error {
	return s.update(ctx, "tenant update", func(tx *bolt.Tx) error {
		var old model.Tenant
		if err := getJSON(tx, bTenants, []byte(t.ID), &old); err != nil {
			return err
		}
		if old.Version != expectedVersion {
			return model.ErrConflict
		}
		return putJSON(tx, bTenants, []byte(t.ID), t)
	})
}

// APIKeyCreate inserts k. model.ErrConflict if the id or the hash exists.
func (s *Store) APIKeyCreate(ctx context.Context, k *model.APIKey) error {
	return s.update(ctx, "api key create", func(tx *bolt.Tx) error {
		if tx.Bucket(bAPIKeys).Get([]byte(k.ID)) != nil || tx.Bucket(bAPIKeyHash).Get([]byte(k.Hash)) != nil {
			return model.ErrConflict
		}
		if err := putJSON(tx, bAPIKeys, []byte(k.ID), k); err != nil {
			return err
		}
		if err := tx.Bucket(bAPIKeyHash).Put([]byte(k.Hash), []byte(k.ID)); err != nil {
			return err
		}
		return tx.Bucket(bAPIKeyTenant).Put(strKey(k.TenantID, k.ID), nil)
	})
}

// APIKeyGetByHash finds a key by its hash, revoked or not.
// model.ErrNotFound if none.
func (s *Store) APIKeyGetByHash(ctx context.Context, hash string) (*model.APIKey, error) {
	var k model.APIKey
	err := s.view(ctx, "api key get by hash", func(tx *bolt.Tx) error {
		id := tx.Bucket(bAPIKeyHash).Get([]byte(hash))
		if id == nil {
			return model.ErrNotFound
		}
		return getJSON(tx, bAPIKeys, id, &k)
	})
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// APIKeyList lists a tenant's keys, oldest first.
func (s *Store) APIKeyList(ctx context.Context, tenantID string) ([]*model.APIKey, error) {
	var keys []*model.APIKey
	err := s.view(ctx, "api key list", func(tx *bolt.Tx) error {
		keys = nil
		var err error
		scanPrefix(tx, bAPIKeyTenant, strKey(tenantID), func(k, _ []byte) bool {
			_, rest := readStr(k)
			id, _ := readStr(rest)
			var key model.APIKey
			if err = getJSON(tx, bAPIKeys, []byte(id), &key); err != nil {
				return false
			}
			keys = append(keys, &key)
			return true
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if !keys[i].CreatedAt.Equal(keys[j].CreatedAt) {
			return keys[i].CreatedAt.Before(keys[j].CreatedAt)
		}
		return keys[i].ID < keys[j].ID
	})
	return keys, nil
}

// APIKeyRevoke sets RevokedAt once. model.ErrNotFound if the key is not the
// tenant's.
func (s *Store) APIKeyRevoke(ctx context.Context, tenantID, keyID string, at time.Time) error {
	return s.update(ctx, "api key revoke", func(tx *bolt.Tx) error {
		var k model.APIKey
		if err := getJSON(tx, bAPIKeys, []byte(keyID), &k); err != nil {
			return err
		}
		if k.TenantID != tenantID {
			return model.ErrNotFound
		}
		if k.RevokedAt != nil {
			return nil
		}
		k.RevokedAt = &at
		return putJSON(tx, bAPIKeys, []byte(keyID), &k)
	})
}

// IdempotencyPut stores r unless (TenantID, Key) has a record; then it
// returns that record and model.ErrConflict.
func (s *Store) IdempotencyPut(ctx context.Context, r *model.IdempotencyRecord) (*model.IdempotencyRecord, error) {
	var existing *model.IdempotencyRecord
	err := s.update(ctx, "idempotency put", func(tx *bolt.Tx) error {
		existing = nil
		key := strKey(r.TenantID, r.Key)
		var old model.IdempotencyRecord
		switch err := getJSON(tx, bIdempotency, key, &old); {
		case err == nil:
			existing = &old
			return model.ErrConflict
		case err != model.ErrNotFound:
			return err
		}
		return putJSON(tx, bIdempotency, key, r)
	})
	return existing, err
}

// IdempotencyPutMany stores the records in one transaction, each unless
// its (TenantID, Key) has a record.
func (s *Store) IdempotencyPutMany(ctx context.Context, rs []*model.IdempotencyRecord) ([]*model.IdempotencyRecord, error) {
	existing := make([]*model.IdempotencyRecord, len(rs))
	err := s.batch(ctx, "idempotency put many", func(tx *bolt.Tx) error {
		for i, r := range rs {
			existing[i] = nil
			key := strKey(r.TenantID, r.Key)
			var old model.IdempotencyRecord
			switch err := getJSON(tx, bIdempotency, key, &old); {
			case err == nil:
				existing[i] = &old
				continue
			case err != model.ErrNotFound:
				return err
			}
			if err := putJSON(tx, bIdempotency, key, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return existing, nil
}

// IdempotencyGet returns model.ErrNotFound if there is no record.
func (s *Store) IdempotencyGet(ctx context.Context, tenantID, key string) (*model.IdempotencyRecord, error) {
	var r model.IdempotencyRecord
	err := s.view(ctx, "idempotency get", func(tx *bolt.Tx) error {
		return getJSON(tx, bIdempotency, strKey(tenantID, key), &r)
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// IdempotencyDeleteBefore removes records created before t. Records are few
// and short-lived, so a full scan is cheaper than an index kept on every put.
func (s *Store) IdempotencyDeleteBefore(ctx context.Context, t time.Time) (int, error) {
	var n int
	err := s.update(ctx, "idempotency delete before", func(tx *bolt.Tx) error {
		var old [][]byte
		var err error
		scanPrefix(tx, bIdempotency, nil, func(k, v []byte) bool {
			var r model.IdempotencyRecord
			if err = jsonUnmarshal(v, &r); err != nil {
				return false
			}
			if r.CreatedAt.Before(t) {
				old = append(old, bytes.Clone(k))
			}
			return true
		})
		if err != nil {
			return err
		}
		n = len(old)
		return deleteKeys(tx, bIdempotency, old)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// TenantList returns up to p.Limit tenants with an id after p.After, by id.
func (s *Store) TenantList(ctx context.Context, p *store.TenantListParams) ([]*model.Tenant, error) {
	after, limit := p.After, limitOr(p.Limit, 1000, 1000)
	var out []*model.Tenant
	err := s.view(ctx, "tenant list", func(tx *bolt.Tx) error {
		out = nil
		c := tx.Bucket(bTenants).Cursor()
		for k, v := c.Seek([]byte(after)); k != nil && len(out) < limit; k, v = c.Next() {
			if string(k) <= after {
				continue
			}
			var t model.Tenant
			if err := jsonUnmarshal(v, &t); err != nil {
				return err
			}
			out = append(out, &t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
