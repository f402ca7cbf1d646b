package embedded

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// PolicyCreate inserts p. model.ErrConflict if the id or (tenant, name)
// exists.
func (s *Store) PolicyCreate(ctx context.Context, p *model.Policy) error {
	return s.update(ctx, "policy create", func(tx *bolt.Tx) error {
		name := strKey(p.TenantID, p.Name)
		if tx.Bucket(bPolicies).Get([]byte(p.ID)) != nil || tx.Bucket(bPolicyName).Get(name) != nil {
			return model.ErrConflict
		}
		if err := putJSON(tx, bPolicies, []byte(p.ID), p); err != nil {
			return err
		}
		if err := tx.Bucket(bPolicyName).Put(name, []byte(p.ID)); err != nil {
			return err
		}
		return tx.Bucket(bPolicyTenant).Put(strKey(p.TenantID, p.ID), nil)
	})
}

// PolicyGet returns the tenant's policy. model.ErrNotFound.
func (s *Store) PolicyGet(ctx context.Context, tenantID, id string) (*model.Policy, error) {
	p, err := s.PolicyGetByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if p.TenantID != tenantID {
		return nil, wrap("policy get", model.ErrNotFound)
	}
	return p, nil
}

// PolicyGetByID returns any tenant's policy. model.ErrNotFound.
func (s *Store) PolicyGetByID(ctx context.Context, id string) (*model.Policy, error) {
	var p model.Policy
	err := s.view(ctx, "policy get", func(tx *bolt.Tx) error {
		return getJSON(tx, bPolicies, []byte(id), &p)
	})
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// PolicyList lists a tenant's policies by id.
func (s *Store) PolicyList(ctx context.Context, tenantID string) ([]*model.Policy, error) {
	var out []*model.Policy
	err := s.view(ctx, "policy list", func(tx *bolt.Tx) error {
		out = nil
		prefix := strKey(tenantID)
		var err error
		scanPrefix(tx, bPolicyTenant, prefix, func(k, _ []byte) bool {
			id, _ := readStr(k[len(prefix):])
			var p model.Policy
			if err = getJSON(tx, bPolicies, []byte(id), &p); err != nil {
				return false
			}
			out = append(out, &p)
			return true
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PolicyListAll lists every tenant's policies by id. Cross-tenant.
func (s *Store) PolicyListAll(ctx context.Context) ([]*model.Policy, error) {
	var out []*model.Policy
	err := s.view(ctx, "policy list all", func(tx *bolt.Tx) error {
		out = nil
		var err error
		scanPrefix(tx, bPolicies, nil, func(_, v []byte) bool {
			var p model.Policy
			if err = jsonUnmarshal(v, &p); err != nil {
				return false
			}
			out = append(out, &p)
			return true
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PolicyUpdate replaces name, maxInFlight, tokenTimeout, autoRelease,
// ratePerSecond, burst, concurrencyKey, maxInFlightTotal and labels if
// the stored Version equals expectedVersion; the stored Version becomes
// expectedVersion+1. InUse and TimedOut are kept. model.ErrNotFound,
// model.ErrConflict (version moved, or the new name is taken).
func (s *Store) PolicyUpdate(ctx context.Context, p *model.Policy, expectedVersion int64) error {
	return s.update(ctx, "policy update", func(tx *bolt.Tx) error {
		var cur model.Policy
		if err := getJSON(tx, bPolicies, []byte(p.ID), &cur); err != nil {
			return err
		}
		if cur.TenantID != p.TenantID {
			return model.ErrNotFound
		}
		if cur.Version != expectedVersion {
			return model.ErrConflict
		}
		if cur.Name != p.Name {
			names := tx.Bucket(bPolicyName)
			newName := strKey(p.TenantID, p.Name)
			if names.Get(newName) != nil {
				return model.ErrConflict
			}
			if err := names.Delete(strKey(cur.TenantID, cur.Name)); err != nil {
				return err
			}
			if err := names.Put(newName, []byte(p.ID)); err != nil {
				return err
			}
		}
		cur.Name, cur.MaxInFlight, cur.TokenTimeout, cur.AutoRelease = p.Name, p.MaxInFlight, p.TokenTimeout, p.AutoRelease
		cur.RatePerSecond, cur.Burst = p.RatePerSecond, p.Burst
		cur.Adaptive, cur.EffectiveLimit, cur.LimitReason, cur.LimitChangedAt = p.Adaptive, p.EffectiveLimit, p.LimitReason, p.LimitChangedAt
		cur.ConcurrencyKey, cur.MaxInFlightTotal = p.ConcurrencyKey, p.MaxInFlightTotal
		cur.Labels = p.Labels
		cur.Limits = p.Limits
		cur.Version = expectedVersion + 1
		if !p.UpdatedAt.IsZero() {
			cur.UpdatedAt = p.UpdatedAt
		}
		return putJSON(tx, bPolicies, []byte(p.ID), &cur)
	})
}

// PolicyDelete removes the tenant's policy. model.ErrNotFound.
func (s *Store) PolicyDelete(ctx context.Context, tenantID, id string) error {
	return s.update(ctx, "policy delete", func(tx *bolt.Tx) error {
		var cur model.Policy
		if err := getJSON(tx, bPolicies, []byte(id), &cur); err != nil {
			return err
		}
		if cur.TenantID != tenantID {
			return model.ErrNotFound
		}
		if err := tx.Bucket(bPolicyName).Delete(strKey(cur.TenantID, cur.Name)); err != nil {
			return err
		}
		if err := tx.Bucket(bPolicyTenant).Delete(strKey(cur.TenantID, cur.ID)); err != nil {
			return err
		}
		return tx.Bucket(bPolicies).Delete([]byte(id))
	})
}

// PolicyAcquireTokens takes up to want free tokens. The read and the write
// are one serialisable transaction, so InUse never exceeds TokenCap;
// concurrent callers share commits. model.ErrNotFound.
func (s *Store) PolicyAcquireTokens(ctx context.Context, policyID string, want int) (int, error) {
	var got int
	err := s.batch(ctx, "policy acquire tokens", func(tx *bolt.Tx) error {
		got = 0
		var p model.Policy
		if err := getJSON(tx, bPolicies, []byte(policyID), &p); err != nil {
			return err
		}
		free := p.TokenCap() - p.InUse
		if free <= 0 || want <= 0 {
			return nil
		}
		got = min(want, free)
		p.InUse += got
		return putJSON(tx, bPolicies, []byte(policyID), &p)
	})
	if err != nil {
		return 0, err
	}
	return got, nil
}

// PolicyReleaseTokens gives n tokens back (InUse never goes below zero) and
// counts timedOut reclaimed tokens. model.ErrNotFound.
func (s *Store) PolicyReleaseTokens(ctx context.Context, policyID string, n int, timedOut int) error {
	return s.batch(ctx, "policy release tokens", func(tx *bolt.Tx) error {
		var p model.Policy
		if err := getJSON(tx, bPolicies, []byte(policyID), &p); err != nil {
			return err
		}
		p.InUse = max(p.InUse-n, 0)
		p.TimedOut += int64(timedOut)
		return putJSON(tx, bPolicies, []byte(policyID), &p)
	})
}

// PolicySetLimit records an adaptive policy's effective limit without
// changing Version. model.ErrNotFound.
func (s *Store) PolicySetLimit(ctx context.Context, policyID string, limit int, reason string, at time.Time) error {
	return s.batch(ctx, "policy set limit", func(tx *bolt.Tx) error {
		var p model.Policy
		if err := getJSON(tx, bPolicies, []byte(policyID), &p); err != nil {
			return err
		}
		p.EffectiveLimit, p.LimitReason, p.LimitChangedAt = limit, reason, at.UTC()
		return putJSON(tx, bPolicies, []byte(policyID), &p)
	})
}

// PolicySetHold sets or clears the tenant's policy's hold; Version stays.
// model.ErrNotFound.
func (s *Store) PolicySetHold(ctx context.Context, tenantID, policyID string, h *model.PolicyHold) error {
	return s.update(ctx, "policy set hold", func(tx *bolt.Tx) error {
		var p model.Policy
		if err := getJSON(tx, bPolicies, []byte(policyID), &p); err != nil {
			return err
		}
		if p.TenantID != tenantID {
			return model.ErrNotFound
		}
		p.Hold = nil
		if h != nil {
			c := *h
			c.Until, c.SetAt = c.Until.UTC(), c.SetAt.UTC()
			p.Hold = &c
		}
		return putJSON(tx, bPolicies, []byte(policyID), &p)
	})
}

// PolicySetHoldTime records the measured hold time without changing
// Version. model.ErrNotFound.
func (s *Store) PolicySetHoldTime(ctx context.Context, policyID string, hold time.Duration) error {
	return s.batch(ctx, "policy set hold time", func(tx *bolt.Tx) error {
		var p model.Policy
		if err := getJSON(tx, bPolicies, []byte(policyID), &p); err != nil {
			return err
		}
		p.HoldTime = max(hold, 0)
		return putJSON(tx, bPolicies, []byte(policyID), &p)
	})
}

// PolicySetInUse overwrites InUse if Version equals expectedVersion and
// InUse equals expectedInUse. It does
// not change Version: token counts are not an edit of the policy, and a
// reconciliation must not make the tenant's next PolicyUpdate conflict.
// model.ErrNotFound, model.ErrConflict.
func (s *Store) PolicySetInUse(ctx context.Context, policyID string, expectedVersion int64, expectedInUse, inUse int) error {
	return s.batch(ctx, "policy set in use", func(tx *bolt.Tx) error {
		var p model.Policy
		if err := getJSON(tx, bPolicies, []byte(policyID), &p); err != nil {
			return err
		}
		if p.Version != expectedVersion || p.InUse != expectedInUse {
			return model.ErrConflict
		}
		p.InUse = max(inUse, 0)
		return putJSON(tx, bPolicies, []byte(policyID), &p)
	})
}

// LeaseAcquire gives the lease to owner if it is free, expired at now, or
// already owner's (keeping the fence). A new owner gets the stored fence
// plus one. model.ErrConflict if another owner holds it.
func (s *Store) LeaseAcquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (model.Lease, error) {
	var l model.Lease
	err := s.batch(ctx, "lease acquire", func(tx *bolt.Tx) error {
		l = model.Lease{}
		switch err := getJSON(tx, bLeases, []byte(name), &l); err {
		case nil:
		case model.ErrNotFound:
			l = model.Lease{Name: name}
		default:
			return err
		}
		switch {
		case l.Owner == owner && owner != "":
			// Renewal, even if expired: nobody took it in between.
		case l.Owner == "" || !now.Before(l.ExpiresAt):
			l.Owner, l.Addr = owner, ""
			l.Fence++
		default:
			return model.ErrConflict
		}
		l.ExpiresAt = now.Add(ttl)
		return putJSON(tx, bLeases, []byte(name), &l)
	})
	if err != nil {
		return model.Lease{}, err
	}
	return l, nil
}

// LeaseRenew extends the lease if owner still holds it with fence, expired
// or not. model.ErrConflict otherwise.
func (s *Store) LeaseRenew(ctx context.Context, name, owner string, fence int64, now time.Time, ttl time.Duration) (model.Lease, error) {
	return s.updateHeldLease(ctx, "lease renew", name, owner, fence, func(l *model.Lease) { l.ExpiresAt = now.Add(ttl) })
}

// LeaseRelease frees the lease if owner holds it with fence; the fence is
// kept so that the next owner's is larger. model.ErrConflict otherwise.
func (s *Store) LeaseRelease(ctx context.Context, name, owner string, fence int64) error {
	_, err := s.updateHeldLease(ctx, "lease release", name, owner, fence, func(l *model.Lease) {
		l.Owner, l.ExpiresAt = "", time.Time{}
	})
	return err
}

// LeaseAdvertise records addr on the lease if owner holds it with fence.
// model.ErrConflict otherwise.
func (s *Store) LeaseAdvertise(ctx context.Context, name, owner string, fence int64, addr string) error {
	_, err := s.updateHeldLease(ctx, "lease advertise", name, owner, fence, func(l *model.Lease) { l.Addr = addr })
	return err
}

// updateHeldLease applies change to the lease if owner holds it with fence
// (expired or not) and returns it as written; model.ErrConflict otherwise.
func (s *Store) updateHeldLease(ctx context.Context, op, name, owner string, fence int64, change func(*model.Lease)) (model.Lease, error) {
	var l model.Lease
	err := s.batch(ctx, op, func(tx *bolt.Tx) error {
		l = model.Lease{}
		switch err := getJSON(tx, bLeases, []byte(name), &l); err {
		case nil:
		case model.ErrNotFound:
			return model.ErrConflict
		default:
			return err
		}
		if l.Owner != owner || owner == "" || l.Fence != fence {
			return model.ErrConflict
		}
		change(&l)
		return putJSON(tx, bLeases, []byte(name), &l)
	})
	if err != nil {
		return model.Lease{}, err
	}
	return l, nil
}

// LeaseList returns the leases whose name starts with prefix, released ones
// included (Owner empty).
func (s *Store) LeaseList(ctx context.Context, prefix string) ([]model.Lease, error) {
	var out []model.Lease
	err := s.view(ctx, "lease list", func(tx *bolt.Tx) error {
		out = nil
		var err error
		scanPrefix(tx, bLeases, []byte(prefix), func(_, v []byte) bool {
			var l model.Lease
			if err = jsonUnmarshal(v, &l); err != nil {
				return false
			}
			out = append(out, l)
			return true
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
