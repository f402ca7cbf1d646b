package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// ScheduleResumeDue finds the paused schedules whose resumeAt is not after
// p.Now through the (resumeAt, _id) index, from p.After (see
// store.ScheduleStore).
func (s *Store) ScheduleResumeDue(ctx context.Context, p *store.ScheduleResumeDueParams) ([]*model.Schedule, error) {
	filter := bson.D{
		{Key: "resumeAt", Value: bson.D{{Key: "$lte", Value: unixNano(p.Now)}}},
		{Key: "state", Value: string(model.SchedulePaused)},
	}
	if !p.After.End.IsZero() || p.After.ID != "" {
		after := unixNano(p.After.End)
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "resumeAt", Value: bson.D{{Key: "$gt", Value: after}}}},
			bson.D{{Key: "resumeAt", Value: after}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: p.After.ID}}}},
		}})
	}
	opts := options.Find().SetSort(bson.D{{Key: "resumeAt", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(clampLimit(p.Limit))
	cur, err := s.schedules.Find(ctx, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("schedule resume due: %w", interpretError(err))
	}
	var docs []scheduleDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("schedule resume due: %w", interpretError(err))
	}
	out := make([]*model.Schedule, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}
