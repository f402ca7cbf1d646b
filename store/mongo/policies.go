package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
)

// PolicyCreate inserts p. ErrConflict if the id or (tenant, name) exists; the
// unique index on (tenantId, name) decides.
func (s *Store) PolicyCreate(ctx context.Context, p *model.Policy) error {
	if _, err := s.policies.InsertOne(ctx, toPolicyDoc(p)); err != nil {
		return fmt.Errorf("policy create %s: %w", p.ID, interpretError(err))
	}
	return nil
}

// PolicyGet returns the tenant's policy. ErrNotFound.
func (s *Store) PolicyGet(ctx context.Context, tenantID, id string) (*model.Policy, error) {
	var d policyDoc
	if err := s.policies.FindOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "tenantId", Value: tenantID}}).Decode(&d); err != nil {
		return nil, fmt.Errorf("policy get %s: %w", id, interpretError(err))
	}
	return d.model(), nil
}

// PolicyGetByID returns any tenant's policy. ErrNotFound.
func (s *Store) PolicyGetByID(ctx context.Context, id string) (*model.Policy, error) {
	var d policyDoc
	if err := s.policiesMajority.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
		return nil, fmt.Errorf("policy get by id %s: %w", id, interpretError(err))
	}
	return d.model(), nil
}

// PolicyList lists a tenant's policies ordered by ID.
func (s *Store) PolicyList(ctx context.Context, tenantID string) ([]*model.Policy, error) {
	return s.policyList(ctx, bson.D{{Key: "tenantId", Value: tenantID}})
}

// PolicyListAll lists every tenant's policies ordered by ID. Cross-tenant.
func (s *Store) PolicyListAll(ctx context.Context) ([]*model.Policy, error) {
	return s.policyList(ctx, bson.D{})
}

func (s *Store) policyList(ctx context.Context, filter bson.D) ([]*model.Policy, error) {
	docs, err := findAll[policyDoc](ctx, s.policies, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("policy list: %w", err)
	}
	out := make([]*model.Policy, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}

// PolicyUpdate sets name, maxInFlight, tokenTimeout, autoRelease,
// ratePerSecond, burst, the adaptive fields, labels and updatedAt if the stored version is expectedVersion, and makes the version
// expectedVersion+1 (p.Version is set to it). InUse and TimedOut are not
// touched, so token traffic never conflicts with an edit. ErrNotFound,
// ErrConflict (version moved, or the new name is taken).
func (s *Store) PolicyUpdate(ctx context.Context, p *model.Policy, expectedVersion int64) error {
	p.Version = expectedVersion + 1
	filter := bson.D{{Key: "_id", Value: p.ID}, {Key: "tenantId", Value: p.TenantID}, {Key: "version", Value: expectedVersion}}
	d := toPolicyDoc(p)
	update := bson.D{{Key: "$set", Value: bson.D{
		{Key: "name", Value: p.Name},
		{Key: "maxInFlight", Value: p.MaxInFlight},
		{Key: "tokenTimeout", Value: int64(p.TokenTimeout)},
		{Key: "autoRelease", Value: p.AutoRelease},
		{Key: "ratePerSecond", Value: p.RatePerSecond},
		{Key: "burst", Value: p.Burst},
		{Key: "adaptiveMin", Value: d.AdaptiveMin},
		{Key: "adaptiveMax", Value: d.AdaptiveMax},
		{Key: "effectiveLimit", Value: d.EffectiveLimit},
		{Key: "limitReason", Value: d.LimitReason},
		{Key: "limitChangedAt", Value: d.LimitChangedAt},
		{Key: "concurrencyKey", Value: p.ConcurrencyKey},
		{Key: "maxInFlightTotal", Value: p.MaxInFlightTotal},
		{Key: "labels", Value: d.Labels},
		{Key: "limits", Value: d.Limits},
		{Key: "version", Value: p.Version},
		{Key: "updatedAt", Value: unixNano(p.UpdatedAt)},
	}}}
	unlock := s.lockCAS(s.policies, p.ID)
	res, err := s.policies.UpdateOne(ctx, filter, update)
	unlock()
	if err == nil && res.MatchedCount == 0 {
		err = s.notFoundOrConflict(ctx, s.policies, bson.D{{Key: "_id", Value: p.ID}, {Key: "tenantId", Value: p.TenantID}})
	}
	if err != nil {
		return fmt.Errorf("policy update %s: %w", p.ID, interpretError(err))
	}
	return nil
}

// PolicyDelete removes the tenant's policy. ErrNotFound.
func (s *Store) PolicyDelete(ctx context.Context, tenantID, id string) error {
	unlock := s.lockCAS(s.policies, id)
	res, err := s.policies.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "tenantId", Value: tenantID}})
	unlock()
	if err == nil && res.DeletedCount == 0 {
		err = model.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("policy delete %s: %w", id, interpretError(err))
	}
	return nil
}

// PolicyAcquireTokens takes up to want tokens. Each attempt is one UpdateOne
// whose filter only matches while k more tokens fit under the maxInFlight it
// read ({inUse: {$lte: max-k}, maxInFlight: max}) and which adds k with $inc;
// the server applies filter and update atomically, so InUse can never pass
// MaxInFlight however many instances acquire at once. An attempt that lost
// to a concurrent acquire reads again and retries with what is left.
// Returns how many it took (0 if none are free). ErrNotFound.
func (s *Store) PolicyAcquireTokens(ctx context.Context, policyID string, want int) (int, error) {
	if want <= 0 {
		return 0, nil
	}
	type counts struct {
		MaxInFlight      int    `bson:"maxInFlight"`
		ConcurrencyKey   string `bson:"concurrencyKey"`
		MaxInFlightTotal int    `bson:"maxInFlightTotal"`
		InUse            int    `bson:"inUse"`
	}
	proj := options.FindOne().SetProjection(bson.D{{Key: "maxInFlight", Value: 1}, {Key: "concurrencyKey", Value: 1},
		{Key: "maxInFlightTotal", Value: 1}, {Key: "inUse", Value: 1}})
	for {
		var c counts
		if err := s.policies.FindOne(ctx, bson.D{{Key: "_id", Value: policyID}}, proj).Decode(&c); err != nil {
			return 0, fmt.Errorf("policy acquire tokens %s: %w", policyID, interpretError(err))
		}
		// A keyed policy is bounded by its total (model.Policy.TokenCap).
		limit := (&model.Policy{MaxInFlight: c.MaxInFlight, ConcurrencyKey: c.ConcurrencyKey, MaxInFlightTotal: c.MaxInFlightTotal}).TokenCap()
		k := min(want, limit-c.InUse)
		if k <= 0 {
			return 0, nil
		}
		filter := bson.D{
			{Key: "_id", Value: policyID},
			{Key: "maxInFlight", Value: c.MaxInFlight},
			{Key: "inUse", Value: bson.D{{Key: "$lte", Value: limit - k}}},
		}
		if c.ConcurrencyKey != "" {
			// The bound it read still holds.
			filter = append(filter, bson.E{Key: "concurrencyKey", Value: c.ConcurrencyKey},
				bson.E{Key: "maxInFlightTotal", Value: c.MaxInFlightTotal})
		}
		unlock := s.lockCAS(s.policies, policyID)
		res, err := s.policies.UpdateOne(ctx, filter, bson.D{{Key: "$inc", Value: bson.D{{Key: "inUse", Value: k}}}})
		unlock()
		if err != nil {
			return 0, fmt.Errorf("policy acquire tokens %s: %w", policyID, interpretError(err))
		}
		if res.MatchedCount == 1 {
			return k, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("policy acquire tokens %s: %w", policyID, unavailable(err))
		}
	}
}

// PolicyReleaseTokens gives n tokens back and adds timedOut to TimedOut.
// InUse never goes below 0: the common case is one $inc conditional on
// inUse >= n; if fewer are out (a reconciliation lowered InUse meanwhile)
// a second conditional write sets it to 0. ErrNotFound.
func (s *Store) PolicyReleaseTokens(ctx context.Context, policyID string, n int, timedOut int) error {
	if n < 0 {
		n = 0
	}
	for {
		unlock := s.lockCAS(s.policies, policyID)
		res, err := s.policies.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: policyID}, {Key: "inUse", Value: bson.D{{Key: "$gte", Value: n}}}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "inUse", Value: -n}, {Key: "timedOut", Value: int64(timedOut)}}}})
		unlock()
		if err != nil {
			return fmt.Errorf("policy release tokens %s: %w", policyID, interpretError(err))
		}
		if res.MatchedCount == 1 {
			return nil
		}
		unlock = s.lockCAS(s.policies, policyID)
		res, err = s.policies.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: policyID}, {Key: "inUse", Value: bson.D{{Key: "$lt", Value: n}}}},
			bson.D{
				{Key: "$set", Value: bson.D{{Key: "inUse", Value: 0}}},
				{Key: "$inc", Value: bson.D{{Key: "timedOut", Value: int64(timedOut)}}},
			})
		unlock()
		if err != nil {
			return fmt.Errorf("policy release tokens %s: %w", policyID, interpretError(err))
		}
		if res.MatchedCount == 1 {
			return nil
		}
		// Neither matched: the policy is gone, or InUse moved between the
		// two writes; look and retry.
		if err := s.exists(ctx, s.policies, bson.D{{Key: "_id", Value: policyID}}); err != nil {
			return fmt.Errorf("policy release tokens %s: %w", policyID, err)
		}
	}
}

// PolicySetLimit records an adaptive policy's effective limit without
// changing the version. ErrNotFound.
func (s *Store) PolicySetLimit(ctx context.Context, policyID string, limit int, reason string, at time.Time) error {
	update := bson.D{{Key: "$set", Value: bson.D{
		{Key: "effectiveLimit", Value: limit},
		{Key: "limitReason", Value: reason},
		{Key: "limitChangedAt", Value: unixNano(at)},
	}}}
	unlock := s.lockCAS(s.policies, policyID)
	res, err := s.policies.UpdateOne(ctx, bson.D{{Key: "_id", Value: policyID}}, update)
	unlock()
	if err == nil && res.MatchedCount == 0 {
		err = model.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("policy set limit %s: %w", policyID, interpretError(err))
	}
	return nil
}

// PolicySetHold sets or clears the tenant's policy's hold; the version
// stays. ErrNotFound.
func (s *Store) PolicySetHold(ctx context.Context, tenantID, policyID string, h *model.PolicyHold) error {
	var update bson.D
	if h == nil {
		update = bson.D{{Key: "$unset", Value: bson.D{{Key: "hold", Value: ""}}}}
	} else {
		update = bson.D{{Key: "$set", Value: bson.D{{Key: "hold", Value: toHoldDoc(h)}}}}
	}
	unlock := s.lockCAS(s.policies, policyID)
	res, err := s.policies.UpdateOne(ctx, bson.D{{Key: "_id", Value: policyID}, {Key: "tenantId", Value: tenantID}}, update)
	unlock()
	if err == nil && res.MatchedCount == 0 {
		err = model.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("policy set hold %s: %w", policyID, interpretError(err))
	}
	return nil
}

// PolicySetHoldTime records the measured hold time. ErrNotFound.
func (s *Store) PolicySetHoldTime(ctx context.Context, policyID string, hold time.Duration) error {
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "holdTime", Value: int64(max(hold, 0))}}}}
	unlock := s.lockCAS(s.policies, policyID)
	res, err := s.policies.UpdateOne(ctx, bson.D{{Key: "_id", Value: policyID}}, update)
	unlock()
	if err == nil && res.MatchedCount == 0 {
		err = model.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("policy set hold time %s: %w", policyID, interpretError(err))
	}
	return nil
}

// PolicySetInUse overwrites InUse if the version is expectedVersion and
// InUse is expectedInUse. ErrNotFound, ErrConflict.
func (s *Store) PolicySetInUse(ctx context.Context, policyID string, expectedVersion int64, expectedInUse, inUse int) error {
	unlock := s.lockCAS(s.policies, policyID)
	res, err := s.policies.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: policyID}, {Key: "version", Value: expectedVersion}, {Key: "inUse", Value: expectedInUse}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "inUse", Value: max(inUse, 0)}}}})
	unlock()
	if err == nil && res.MatchedCount == 0 {
		err = s.notFoundOrConflict(ctx, s.policies, bson.D{{Key: "_id", Value: policyID}})
	}
	if err != nil {
		return fmt.Errorf("policy set in use %s: %w", policyID, interpretError(err))
	}
	return nil
}
