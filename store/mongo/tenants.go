package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// TenantCreate inserts t. ErrConflict if the id exists.
func (s *Store) TenantCreate(ctx context.Context, t *model.Tenant) error {
	if _, err := s.tenants.InsertOne(ctx, toTenantDoc(t)); err != nil {
		return fmt.Errorf("tenant create %s: %w", t.ID, interpretError(err))
	}
	return nil
}

// TenantGet returns ErrNotFound for an unknown id.
func (s *Store) TenantGet(ctx context.Context, id string) (*model.Tenant, error) {
	var d tenantDoc
	if err := s.tenants.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
		return nil, fmt.Errorf("tenant get %s: %w", id, interpretError(err))
	}
	return d.model(), nil
}

// TenantUpdate replaces t.ID if its stored version is expectedVersion (a
// tenant stored before versions were kept has none, which counts as 0).
// ErrNotFound for an unknown id, ErrConflict on another version.
func (s *Store) TenantUpdate(ctx context.Context, t *model.Tenant, expectedVersion int64) error {
	filter := bson.D{{Key: "_id", Value: t.ID}, {Key: "version", Value: expectedVersion}}
	if expectedVersion == 0 {
		filter = bson.D{{Key: "_id", Value: t.ID}, {Key: "version", Value: bson.D{{Key: "$in", Value: bson.A{0, nil}}}}}
	}
	res, err := s.tenants.ReplaceOne(ctx, filter, toTenantDoc(t))
	if err != nil {
		return fmt.Errorf("tenant update %s: %w", t.ID, interpretError(err))
	}
	if res.MatchedCount == 1 {
		return nil
	}
	if _, err := s.TenantGet(ctx, t.ID); err != nil {
		return err
	}
	return fmt.Errorf("tenant update %s: %w", t.ID, model.ErrConflict)
}

// APIKeyCreate inserts k. ErrConflict if the id or the hash exists (the hash
// is unique by index, so two instances cannot both store it).
func (s *Store) APIKeyCreate(ctx context.Context, k *model.APIKey) error {
	if _, err := s.apiKeys.InsertOne(ctx, toAPIKeyDoc(k)); err != nil {
		return fmt.Errorf("api key create %s: %w", k.ID, interpretError(err))
	}
	return nil
}

// APIKeyGetByHash finds a key by its hash, revoked or not. ErrNotFound.
func (s *Store) APIKeyGetByHash(ctx context.Context, hash string) (*model.APIKey, error) {
	var d apiKeyDoc
	if err := s.apiKeys.FindOne(ctx, bson.D{{Key: "hash", Value: hash}}).Decode(&d); err != nil {
		return nil, fmt.Errorf("api key get by hash: %w", interpretError(err))
	}
	return d.model(), nil
}

// APIKeyList lists a tenant's keys, oldest first (ties by id).
func (s *Store) APIKeyList(ctx context.Context, tenantID string) ([]*model.APIKey, error) {
	opts := options.Find().SetSort(bson.D{{Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}})
	docs, err := findAll[apiKeyDoc](ctx, s.apiKeys, bson.D{{Key: "tenantId", Value: tenantID}}, opts)
	if err != nil {
		return nil, fmt.Errorf("api key list tenant %s: %w", tenantID, err)
	}
	out := make([]*model.APIKey, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}

// APIKeyRevoke sets RevokedAt if it is not set yet, so revoking twice keeps
// the first time. ErrNotFound if the key is not the tenant's.
func (s *Store) APIKeyRevoke(ctx context.Context, tenantID, keyID string, at time.Time) error {
	defer s.lockCAS(s.apiKeys, keyID)()
	filter := bson.D{
		{Key: "_id", Value: keyID},
		{Key: "tenantId", Value: tenantID},
		{Key: "revokedAt", Value: bson.D{{Key: "$exists", Value: false}}},
	}
	res, err := s.apiKeys.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "revokedAt", Value: unixNano(at)}}}})
	if err != nil {
		return fmt.Errorf("api key revoke %s: %w", keyID, interpretError(err))
	}
	if res.MatchedCount == 1 {
		return nil
	}
	// Nothing matched: either already revoked (fine) or not the tenant's.
	if err := s.exists(ctx, s.apiKeys, bson.D{{Key: "_id", Value: keyID}, {Key: "tenantId", Value: tenantID}}); err != nil {
		return fmt.Errorf("api key revoke %s: %w", keyID, err)
	}
	return nil
}

// IdempotencyPut stores r unless a record has (TenantID, Key), which a unique
// index decides, and returns (nil, nil); on a duplicate it returns the stored
// record and ErrConflict.
func (s *Store) IdempotencyPut(ctx context.Context, r *model.IdempotencyRecord) (*model.IdempotencyRecord, error) {
	_, err := s.idempotency.InsertOne(ctx, toIdempotencyDoc(r))
	if err == nil {
		return nil, nil
	}
	if !mongo.IsDuplicateKeyError(err) {
		return nil, fmt.Errorf("idempotency put %q: %w", r.Key, interpretError(err))
	}
	existing, gerr := s.IdempotencyGet(ctx, r.TenantID, r.Key)
	if gerr != nil {
		return nil, fmt.Errorf("idempotency put %q: read existing: %w", r.Key, gerr)
	}
	return existing, fmt.Errorf("idempotency put %q: %w", r.Key, model.ErrConflict)
}

// IdempotencyPutMany inserts the records in one unordered bulk insert; the
// unique index decides, and the records of the duplicates are read back.
func (s *Store) IdempotencyPutMany(ctx context.Context, rs []*model.IdempotencyRecord) ([]*model.IdempotencyRecord, error) {
	existing := make([]*model.IdempotencyRecord, len(rs))
	if len(rs) == 0 {
		return existing, nil
	}
	docs := make([]any, len(rs))
	for i, r := range rs {
		docs[i] = toIdempotencyDoc(r)
	}
	_, err := s.idempotency.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err == nil {
		return existing, nil
	}
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
		return nil, fmt.Errorf("idempotency put many (%d): %w", len(rs), interpretError(err))
	}
	for _, we := range bwe.WriteErrors {
		if !mongo.IsDuplicateKeyError(we) || we.Index < 0 || we.Index >= len(rs) {
			return nil, fmt.Errorf("idempotency put many (%d): %w", len(rs), interpretError(err))
		}
		r := rs[we.Index]
		old, gerr := s.IdempotencyGet(ctx, r.TenantID, r.Key)
		if gerr != nil {
			return nil, fmt.Errorf("idempotency put many: read existing: %w", gerr)
		}
		existing[we.Index] = old
	}
	return existing, nil
}

// IdempotencyGet returns ErrNotFound if there is no record.
func (s *Store) IdempotencyGet(ctx context.Context, tenantID, key string) (*model.IdempotencyRecord, error) {
	var d idempotencyDoc
	err := s.idempotency.FindOne(ctx, bson.D{{Key: "tenantId", Value: tenantID}, {Key: "key", Value: key}}).Decode(&d)
	if err != nil {
		return nil, fmt.Errorf("idempotency get %q: %w", key, interpretError(err))
	}
	return d.model(), nil
}

// IdempotencyDeleteBefore removes records created before t; returns how many.
// It is the retention job that a TTL index would be on MongoDB alone.
func (s *Store) IdempotencyDeleteBefore(ctx context.Context, t time.Time) (int, error) {
	res, err := s.idempotency.DeleteMany(ctx, bson.D{{Key: "createdAt", Value: bson.D{{Key: "$lt", Value: unixNano(t)}}}})
	if err != nil {
		return 0, fmt.Errorf("idempotency delete before %s: %w", t.Format(time.RFC3339), interpretError(err))
	}
	return int(res.DeletedCount), nil
}

// findAll runs a find and decodes every document into T.
func findAll[T any](ctx context.Context, c *mongo.Collection, filter any, opts ...options.Lister[options.FindOptions]) ([]T, error) {
	cur, err := c.Find(ctx, filter, opts...)
	if err != nil {
		return nil, interpretError(err)
	}
	var out []T
	if err := cur.All(ctx, &out); err != nil {
		return nil, interpretError(err)
	}
	return out, nil
}

// exists returns nil if a document matches filter, else ErrNotFound. Used
// after a conditional write matched nothing to tell "gone" from "changed".
func (s *Store) exists(ctx context.Context, c *mongo.Collection, filter any) error {
	err := c.FindOne(ctx, filter, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return model.ErrNotFound
	}
	return interpretError(err)
}

// notFoundOrConflict is the error of a compare-and-set that matched nothing:
// ErrNotFound if no document matches filter, else ErrConflict.
func (s *Store) notFoundOrConflict(ctx context.Context, c *mongo.Collection, filter any) error {
	if err := s.exists(ctx, c, filter); err != nil {
		return err
	}
	return model.ErrConflict
}

// TenantList returns up to p.Limit tenants with an id after p.After, by id.
func (s *Store) TenantList(ctx context.Context, p *store.TenantListParams) ([]*model.Tenant, error) {
	filter := bson.D{}
	if p.After != "" {
		filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: p.After}}}}
	}
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(clampLimit(p.Limit))
	docs, err := findAll[tenantDoc](ctx, s.tenants, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("tenant list: %w", err)
	}
	out := make([]*model.Tenant, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}
