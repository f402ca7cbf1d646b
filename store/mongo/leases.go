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
// Where the server judges expiries (see clock.go), "expired at now" and the
// stored expiry are on its clock; the lease returned expires at now+ttl on
// the caller's, which is never later than the stored one (the server
// stamps it after the call began). ErrConflict if another owner holds it.
func (s *Store) LeaseAcquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (model.Lease, error) {
	after := options.FindOneAndUpdate().SetReturnDocument(options.After)
	defer s.lockCAS(s.leases, name)()

	var d leaseDoc
	err := s.leases.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}},
		s.leaseUpdate(name, now.Add(ttl), nil), after).Decode(&d)
	if err == nil {
		return leaseFor(d, now, ttl), nil
	}
	if !errors.Is(err, mongo.ErrNoDocuments) {
		return model.Lease{}, fmt.Errorf("lease acquire %s: %w", name, interpretError(err))
	}

	err = s.leases.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: name}, {Key: "$or", Value: bson.A{
			bson.D{{Key: "owner", Value: ""}},
			bson.D{s.before("expiresAt", now, true)},
		}}},
		s.leaseUpdate(name, now.Add(ttl), &owner), after).Decode(&d)
	if err == nil {
		return leaseFor(d, now, ttl), nil
	}
	if !errors.Is(err, mongo.ErrNoDocuments) {
		return model.Lease{}, fmt.Errorf("lease acquire %s: %w", name, interpretError(err))
	}

	// A new lease: its first expiry is on the caller's clock.
	d = leaseDoc{Name: name, Owner: owner, Fence: 1, ExpiresAt: unixNano(now.Add(ttl))}
	if isMemberLease(name) {
		date := bsonDate(now.Add(ttl))
		d.ExpiresDate = &date
	}
	if _, err := s.leases.InsertOne(ctx, d); err != nil {
		err = interpretError(err)
		if errors.Is(err, model.ErrConflict) {
			err = fmt.Errorf("%w: %w", model.ErrConflict, errLeaseHeld)
		}
		return model.Lease{}, fmt.Errorf("lease acquire %s: %w", name, err)
	}
	return d.model(), nil
}

// leaseUpdate sets the lease's expiry to expires (and its TTL date if it
// is a member lease); with newOwner, also the owner and fence+1. On the
// server's clock it is a pipeline update, the only kind that reads $$NOW.
func (s *Store) leaseUpdate(name string, expires time.Time, newOwner *string) any {
	set := bson.D{{Key: "expiresAt", Value: s.instant(expires)}}
	if isMemberLease(name) {
		set = append(set, bson.E{Key: fieldExpiresDate, Value: s.instantDate(expires)})
	}
	if !s.caps.serverClock {
		update := bson.D{}
		if newOwner != nil {
			set = append(set, bson.E{Key: "owner", Value: *newOwner}, bson.E{Key: "addr", Value: ""})
			update = append(update, bson.E{Key: "$inc", Value: bson.D{{Key: "fence", Value: int64(1)}}})
		}
		return append(bson.D{{Key: "$set", Value: set}}, update...)
	}
	if newOwner != nil {
		// $literal: an owner name starting with $ is not a field path.
		set = append(set, bson.E{Key: "owner", Value: bson.D{{Key: "$literal", Value: *newOwner}}}, bson.E{Key: "addr", Value: ""},
			bson.E{Key: "fence", Value: bson.D{{Key: "$add", Value: bson.A{"$fence", int64(1)}}}})
	}
	return mongo.Pipeline{{{Key: "$set", Value: set}}}
}

// leaseFor is the stored lease d as its holder sees it: expiring at
// now+ttl on the holder's clock (see LeaseAcquire).
func leaseFor(d leaseDoc, now time.Time, ttl time.Duration) model.Lease {
	l := d.model()
	l.ExpiresAt = fromNano(unixNano(now.Add(ttl)))
	return l
}

// LeaseRenew extends the lease if owner still holds it with fence, even if
// it expired, as long as nobody took it. ErrConflict otherwise.
func (s *Store) LeaseRenew(ctx context.Context, name, owner string, fence int64, now time.Time, ttl time.Duration) (model.Lease, error) {
	defer s.lockCAS(s.leases, name)()
	var d leaseDoc
	err := s.leases.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}, {Key: "fence", Value: fence}},
		s.leaseUpdate(name, now.Add(ttl), nil),
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return model.Lease{}, fmt.Errorf("lease renew %s fence %d: %w", name, fence, model.ErrConflict)
	}
	if err != nil {
		return model.Lease{}, fmt.Errorf("lease renew %s fence %d: %w", name, fence, interpretError(err))
	}
	return leaseFor(d, now, ttl), nil
}

// LeaseRelease frees the lease if owner holds it with fence. The fence is
// kept so the next owner's is larger; a member lease's TTL date becomes
// the server's now. ErrConflict otherwise.
func (s *Store) LeaseRelease(ctx context.Context, name, owner string, fence int64) error {
	defer s.lockCAS(s.leases, name)()
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: ""}, {Key: "expiresAt", Value: int64(0)}}}}
	if isMemberLease(name) {
		update = append(update, bson.E{Key: "$currentDate", Value: bson.D{{Key: fieldExpiresDate, Value: true}}})
	}
	res, err := s.leases.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}, {Key: "fence", Value: fence}}, update)
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
