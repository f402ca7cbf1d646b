package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// fieldAtDate is At of an audit record as a BSON date, for the TTL index
// of the audit retention (see retention.go).
const fieldAtDate = "atDate"

// auditDoc is an audit record. Diff and Previous are kept as JSON text:
// they are only ever read back whole.
type auditDoc struct {
	ID        string        `bson:"_id"`
	At        int64         `bson:"at"`
	AtDate    bson.DateTime `bson:"atDate"`
	TenantID  string        `bson:"tenantId"`
	KeyPrefix string        `bson:"keyPrefix,omitempty"`
	Action    string        `bson:"action"`
	ObjectID  string        `bson:"objectId,omitempty"`
	Version   int64         `bson:"version,omitempty"`
	Diff      string        `bson:"diff,omitempty"`
	Note      string        `bson:"note,omitempty"`
	RequestID string        `bson:"requestId,omitempty"`
	Previous  string        `bson:"previous,omitempty"`
}

func toAuditDoc(r *model.AuditRecord) auditDoc {
	return auditDoc{ID: r.ID, At: unixNano(r.At), AtDate: bsonDate(r.At), TenantID: r.TenantID, KeyPrefix: r.KeyPrefix,
		Action: r.Action, ObjectID: r.ObjectID, Version: r.Version, Diff: string(r.Diff), Note: r.Note,
		RequestID: r.RequestID, Previous: string(r.Previous)}
}

func (d *auditDoc) model() *model.AuditRecord {
	r := &model.AuditRecord{ID: d.ID, At: fromNano(d.At), TenantID: d.TenantID, KeyPrefix: d.KeyPrefix,
		Action: d.Action, ObjectID: d.ObjectID, Version: d.Version, Note: d.Note, RequestID: d.RequestID}
	if d.Diff != "" {
		r.Diff = []byte(d.Diff)
	}
	if d.Previous != "" {
		r.Previous = []byte(d.Previous)
	}
	return r
}

// AuditAppend inserts the records in one unordered bulk write; those whose
// ids exist stay as they are.
func (s *Store) AuditAppend(ctx context.Context, rs []*model.AuditRecord) error {
	if len(rs) == 0 {
		return nil
	}
	docs := make([]any, len(rs))
	for i, r := range rs {
		docs[i] = toAuditDoc(r)
	}
	_, err := s.audit.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err != nil {
		if _, onlyDups := duplicateWrites(err); !onlyDups {
			return fmt.Errorf("audit append (%d records): %w", len(rs), interpretError(err))
		}
	}
	return nil
}

// AuditList pages the records of p by id, over the (objectId, _id) or
// (tenantId, _id) index when p names one.
func (s *Store) AuditList(ctx context.Context, p *store.AuditListParams) ([]*model.AuditRecord, error) {
	filter := bson.D{}
	if p.ObjectID != "" {
		filter = append(filter, bson.E{Key: "objectId", Value: p.ObjectID})
	}
	if p.TenantID != "" {
		filter = append(filter, bson.E{Key: "tenantId", Value: p.TenantID})
	}
	id := bson.D{}
	if p.After != "" {
		id = append(id, bson.E{Key: "$gt", Value: p.After})
	}
	if !p.From.IsZero() {
		// Ids begin with their second: none made at From or later is
		// below its floor.
		if floor := model.AuditIDFloor(p.From); floor > p.After {
			id = append(id, bson.E{Key: "$gte", Value: floor})
		}
	}
	if len(id) > 0 {
		filter = append(filter, bson.E{Key: "_id", Value: id})
	}
	at := bson.D{}
	if !p.From.IsZero() {
		at = append(at, bson.E{Key: "$gte", Value: unixNano(p.From)})
	}
	if !p.To.IsZero() {
		at = append(at, bson.E{Key: "$lt", Value: unixNano(p.To)})
	}
	if len(at) > 0 {
		filter = append(filter, bson.E{Key: "at", Value: at})
	}
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(clampLimit(p.Limit))
	docs, err := findAll[auditDoc](ctx, s.audit, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("audit list: %w", err)
	}
	out := make([]*model.AuditRecord, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}

// AuditDeleteBefore removes up to limit records older than t, oldest
// first: the retention job on FerretDB and the TTL index's backstop on
// MongoDB.
func (s *Store) AuditDeleteBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	filter := bson.D{{Key: "at", Value: bson.D{{Key: "$lt", Value: unixNano(t)}}}}
	opts := options.Find().SetSort(bson.D{{Key: "at", Value: 1}}).SetLimit(int64(max(limit, 1))).
		SetProjection(bson.D{{Key: "_id", Value: 1}})
	docs, err := findAll[struct {
		ID string `bson:"_id"`
	}](ctx, s.audit, filter, opts)
	if err != nil {
		return 0, fmt.Errorf("audit delete before %s: %w", t.Format(time.RFC3339), err)
	}
	if len(docs) == 0 {
		return 0, nil
	}
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	res, err := s.audit.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, filter[0]})
	if err != nil {
		return 0, fmt.Errorf("audit delete before %s: %w", t.Format(time.RFC3339), interpretError(err))
	}
	return int(res.DeletedCount), nil
}
