package mongo

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
)

var errLeaseHeld = errors.New("lease held by another owner")

// LeaseAcquire gives the lease to owner for ttl. Three conditional writes,
// each atomic, tried in order until one applies:
//
//  1. owner already holds it: extend, keeping the fence;
//  2. it is free (released, or expired at now): take it with fence+1;
//  3. it does not exist: insert it with fence 1 (a duplicate key means
//     someone else created it first).
//
// ErrConflict if another owner holds it.
func (s *Store) LeaseAcquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (model.Lease, error) {
	expires := unixNano(now.Add(ttl))
	after := options.FindOneAndUpdate().SetReturnDocument(options.After)
	defer s.lockCAS(s.leases, name)()

	var d leaseDoc
	err := s.leases.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "expiresAt", Value: expires}}}}, after).Decode(&d)
	if err == nil {
		return d.model(), nil
	}
	if !errors.Is(err, mongo.ErrNoDocuments) {
		return model.Lease{}, fmt.Errorf("lease acquire %s: %w", name, interpretError(err))
	}

	err = s.leases.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: name}, {Key: "$or", Value: bson.A{
			bson.D{{Key: "owner", Value: ""}},
			bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: unixNano(now)}}}},
		}}},
		bson.D{
			{Key: "$set", Value: bson.D{{Key: "owner", Value: owner}, {Key: "expiresAt", Value: expires}, {Key: "addr", Value: ""}}},
			{Key: "$inc", Value: bson.D{{Key: "fence", Value: int64(1)}}},
		}, after).Decode(&d)
	if err == nil {
		return d.model(), nil
	}
	if !errors.Is(err, mongo.ErrNoDocuments) {
		return model.Lease{}, fmt.Errorf("lease acquire %s: %w", name, interpretError(err))
	}

	d = leaseDoc{Name: name, Owner: owner, Fence: 1, ExpiresAt: expires}
	if _, err := s.leases.InsertOne(ctx, d); err != nil {
		err = interpretError(err)
		if errors.Is(err, model.ErrConflict) {
			err = fmt.Errorf("%w: %w", model.ErrConflict, errLeaseHeld)
		}
		return model.Lease{}, fmt.Errorf("lease acquire %s: %w", name, err)
	}
	return d.model(), nil
}

// LeaseRenew extends the lease if owner still holds it with fence, even if
// it expired, as long as nobody took it. ErrConflict otherwise.
func (s *Store) LeaseRenew(ctx context.Context, name, owner string, fence int64, now time.Time, ttl time.Duration) (model.Lease, error) {
	defer s.lockCAS(s.leases, name)()
	var d leaseDoc
	err := s.leases.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}, {Key: "fence", Value: fence}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "expiresAt", Value: unixNano(now.Add(ttl))}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return model.Lease{}, fmt.Errorf("lease renew %s fence %d: %w", name, fence, model.ErrConflict)
	}
	if err != nil {
		return model.Lease{}, fmt.Errorf("lease renew %s fence %d: %w", name, fence, interpretError(err))
	}
	return d.model(), nil
}

// LeaseRelease frees the lease if owner holds it with fence. The fence is
// kept so the next owner's is larger. ErrConflict otherwise.
func (s *Store) LeaseRelease(ctx context.Context, name, owner string, fence int64) error {
	defer s.lockCAS(s.leases, name)()
	res, err := s.leases.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}, {Key: "fence", Value: fence}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: ""}, {Key: "expiresAt", Value: int64(0)}}}})
	if err == nil && res.MatchedCount == 0 {
		err = model.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("lease release %s fence %d: %w", name, fence, interpretError(err))
	}
	return nil
}

// LeaseAdvertise records addr on the lease if owner holds it with fence.
// ErrConflict otherwise.
func (s *Store) LeaseAdvertise(ctx context.Context, name, owner string, fence int64, addr string) error {
	defer s.lockCAS(s.leases, name)()
	res, err := s.leases.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}, {Key: "fence", Value: fence}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "addr", Value: addr}}}})
	if err == nil && res.MatchedCount == 0 {
		err = model.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("lease advertise %s fence %d: %w", name, fence, interpretError(err))
	}
	return nil
}

// LeaseList returns the leases whose name starts with prefix, by name.
func (s *Store) LeaseList(ctx context.Context, prefix string) ([]model.Lease, error) {
	filter := bson.D{}
	if prefix != "" {
		filter = bson.D{{Key: "_id", Value: bson.Regex{Pattern: "^" + regexp.QuoteMeta(prefix)}}}
	}
	docs, err := findAll[leaseDoc](ctx, s.leases, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("lease list %q: %w", prefix, err)
	}
	out := make([]model.Lease, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}
