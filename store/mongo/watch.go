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

// FireListWatched returns up to limit watched fires not finished, by id
// after after, through the (watching, _id) index. Cross-tenant.
func (s *Store) FireListWatched(ctx context.Context, after string, limit int) ([]*model.Fire, error) {
	filter := bson.D{{Key: "watching", Value: 1}}
	if after != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}})
	}
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(clampLimit(limit))
	docs, err := findAll[fireDoc](ctx, s.fires, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("fire list watched: %w", err)
	}
	out := make([]*model.Fire, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}

// FireWatch marks the fire id watched unless it is. ErrNotFound.
func (s *Store) FireWatch(ctx context.Context, id string) error {
	res, err := s.fires.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "watched", Value: bson.D{{Key: "$ne", Value: true}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "watched", Value: true}, {Key: "watching", Value: 1}}}})
	if err != nil {
		return fmt.Errorf("fire watch %s: %w", id, interpretError(err))
	}
	if res.MatchedCount == 0 {
		n, err := s.fires.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}})
		if err != nil {
			return fmt.Errorf("fire watch %s: %w", id, interpretError(err))
		}
		if n == 0 {
			return fmt.Errorf("fire watch %s: %w", id, model.ErrNotFound)
		}
	}
	return nil
}

// FireSetFinished sets FinishedAt of the watched fire id once: a
// conditional update on finishedAt being absent. ErrNotFound.
func (s *Store) FireSetFinished(ctx context.Context, id string, at time.Time) (bool, error) {
	res, err := s.fires.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "watched", Value: true}, {Key: "finishedAt", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{
			{Key: "$set", Value: bson.D{{Key: "finishedAt", Value: unixNano(at)}}},
			{Key: "$unset", Value: bson.D{{Key: "watching", Value: ""}}},
		})
	if err != nil {
		return false, fmt.Errorf("fire set finished %s: %w", id, interpretError(err))
	}
	if res.MatchedCount == 1 {
		return true, nil
	}
	n, err := s.fires.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}})
	if err != nil {
		return false, fmt.Errorf("fire set finished %s: %w", id, interpretError(err))
	}
	if n == 0 {
		return false, fmt.Errorf("fire set finished %s: %w", id, model.ErrNotFound)
	}
	return false, nil
}

// ScheduleListAfter returns up to p.Limit schedules with After set, by
// id after p.After, through the (after.scheduleId, _id) index.
// Cross-tenant.
func (s *Store) ScheduleListAfter(ctx context.Context, p *store.ScheduleListAfterParams) ([]*model.Schedule, error) {
	filter := bson.D{}
	if p.Upstream != "" {
		filter = append(filter, bson.E{Key: "after.scheduleId", Value: p.Upstream})
	} else {
		filter = append(filter, bson.E{Key: "after.scheduleId", Value: bson.D{{Key: "$exists", Value: true}}})
	}
	if p.After != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: p.After}}})
	}
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(clampLimit(p.Limit))
	docs, err := findAll[scheduleDoc](ctx, s.schedules, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("schedule list after: %w", err)
	}
	out := make([]*model.Schedule, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}
