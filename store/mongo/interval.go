package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// ScheduleIntervalDue finds the active interval schedules of p.Partition
// whose next fire is before p.Before through the (partition, intervalDue,
// _id) index, from p.After (see store.ScheduleStore).
func (s *Store) ScheduleIntervalDue(ctx context.Context, p *store.ScheduleIntervalDueParams) ([]*model.Schedule, error) {
	filter := bson.D{
		{Key: "partition", Value: p.Partition},
		{Key: "intervalDue", Value: bson.D{{Key: "$lt", Value: unixNano(p.Before)}}},
	}
	if !p.After.End.IsZero() || p.After.ID != "" {
		after := unixNano(p.After.End)
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "intervalDue", Value: bson.D{{Key: "$gt", Value: after}}}},
			bson.D{{Key: "intervalDue", Value: after}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: p.After.ID}}}},
		}})
	}
	opts := options.Find().SetSort(bson.D{{Key: "partition", Value: 1}, {Key: "intervalDue", Value: 1}, {Key: "_id", Value: 1}}).
		SetLimit(clampLimit(p.Limit))
	cur, err := s.schedules.Find(ctx, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("schedule interval due: %w", interpretError(err))
	}
	var docs []scheduleDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("schedule interval due: %w", interpretError(err))
	}
	out := make([]*model.Schedule, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}

// ScheduleIntervalAdvance moves intervalNext and intervalDue forward in
// one conditional update (see store.ScheduleStore).
func (s *Store) ScheduleIntervalAdvance(ctx context.Context, p *store.ScheduleIntervalAdvanceParams) error {
	next := unixNano(p.Next)
	_, err := s.schedules.UpdateOne(ctx, bson.D{
		{Key: "_id", Value: p.ID},
		{Key: "version", Value: p.Version},
		{Key: "intervalDue", Value: bson.D{{Key: "$lt", Value: next}}},
	}, bson.D{{Key: "$set", Value: bson.D{{Key: "intervalNext", Value: next}, {Key: "intervalDue", Value: next}}}})
	if err != nil {
		return fmt.Errorf("schedule interval advance %s: %w", p.ID, interpretError(err))
	}
	return nil
}
