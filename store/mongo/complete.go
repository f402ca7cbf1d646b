package mongo

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// unfinishedStatuses are the statuses of events that still have work.
var unfinishedStatuses = []string{
	string(model.EventPending), string(model.EventScheduled), string(model.EventDelivering),
	string(model.EventDelivered), string(model.EventRetrying),
}

// ScheduleComplete walks the (endsAt, _id) index from p.After and
// completes each schedule that may complete with a compare-and-set on its
// version (see store.ScheduleStore).
func (s *Store) ScheduleComplete(ctx context.Context, p *store.ScheduleCompleteParams) (store.ScheduleCompleteResult, error) {
	res := store.ScheduleCompleteResult{Last: p.After}
	filter := bson.D{{Key: "endsAt", Value: bson.D{{Key: "$lte", Value: unixNano(p.Now)}}}}
	if !p.After.End.IsZero() || p.After.ID != "" {
		after := unixNano(p.After.End)
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "endsAt", Value: bson.D{{Key: "$gt", Value: after}}}},
			bson.D{{Key: "endsAt", Value: after}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: p.After.ID}}}},
		}})
	}
	opts := options.Find().SetSort(bson.D{{Key: "endsAt", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(clampLimit(p.Limit))
	cur, err := s.schedules.Find(ctx, filter, opts)
	if err != nil {
		return res, fmt.Errorf("schedule complete: %w", interpretError(err))
	}
	var docs []scheduleDoc
	if err := cur.All(ctx, &docs); err != nil {
		return res, fmt.Errorf("schedule complete: %w", interpretError(err))
	}
	for i := range docs {
		d := &docs[i]
		if d.EndsAt == nil {
			continue
		}
		res.Examined++
		res.Last = store.ScheduleEnd{End: fromNano(*d.EndsAt), ID: d.ID}
		done, err := s.completeOne(ctx, d, p)
		if err != nil {
			return res, fmt.Errorf("schedule complete %s: %w", d.ID, err)
		}
		if done {
			res.Completed++
		}
	}
	return res, nil
}

// completeOne completes the schedule of d if it may.
func (s *Store) completeOne(ctx context.Context, d *scheduleDoc, p *store.ScheduleCompleteParams) (bool, error) {
	if d.State != string(model.ScheduleActive) && d.State != "" {
		return false, nil
	}
	exists := func(coll *mongo.Collection, filter bson.D) (bool, error) {
		n, err := coll.CountDocuments(ctx, filter, options.Count().SetLimit(1))
		return n > 0, interpretError(err)
	}
	if busy, err := exists(s.fires, bson.D{{Key: "scheduleId", Value: d.ID}, {Key: "remaining", Value: bson.D{{Key: "$gt", Value: 0}}}}); err != nil || busy {
		return false, err
	}
	if busy, err := exists(s.events, bson.D{{Key: "scheduleId", Value: d.ID}, {Key: "status", Value: in(unfinishedStatuses)}}); err != nil || busy {
		return false, err
	}
	if *d.EndsAt >= unixNano(p.MissedBefore) {
		if d.RunAt == nil {
			return false, nil
		}
		fired, err := exists(s.fires, bson.D{{Key: "scheduleId", Value: d.ID}, {Key: "fireTime", Value: *d.EndsAt}})
		if err != nil || !fired {
			return false, err
		}
	}
	at := unixNano(p.At)
	filter := bson.D{{Key: "_id", Value: d.ID}, {Key: "version", Value: d.Version}, {Key: "state", Value: d.State}}
	update := bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "state", Value: string(model.ScheduleCompleted)}, {Key: "version", Value: d.Version + 1},
			{Key: "updatedAt", Value: at}, {Key: "completedAt", Value: at},
		}},
		{Key: "$unset", Value: bson.D{{Key: "endsAt", Value: ""}, {Key: "intervalDue", Value: ""}}},
	}
	unlock := s.lockCAS(s.schedules, d.ID)
	r, err := s.schedules.UpdateOne(ctx, filter, update)
	unlock()
	if err != nil {
		return false, interpretError(err)
	}
	return r.ModifiedCount == 1, nil
}

// ScheduleDeleteCompleted deletes the completed schedules whose
// completedAt is before p.Before, oldest first: their fires, then as
// ScheduleDelete does.
func (s *Store) ScheduleDeleteCompleted(ctx context.Context, p *store.ScheduleDeleteCompletedParams) (int, error) {
	opts := options.Find().SetSort(bson.D{{Key: "completedAt", Value: 1}}).SetLimit(clampLimit(p.Limit)).
		SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "tenantId", Value: 1}})
	cur, err := s.schedules.Find(ctx, bson.D{{Key: "completedAt", Value: bson.D{{Key: "$lt", Value: unixNano(p.Before)}}}}, opts)
	if err != nil {
		return 0, fmt.Errorf("schedule delete completed: %w", interpretError(err))
	}
	var docs []struct {
		ID       string `bson:"_id"`
		TenantID string `bson:"tenantId"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return 0, fmt.Errorf("schedule delete completed: %w", interpretError(err))
	}
	n := 0
	for _, d := range docs {
		// Fires go first: a crash before the schedule goes leaves it
		// for the next call, which finds it again.
		if _, err := s.fires.DeleteMany(ctx, bson.D{{Key: "scheduleId", Value: d.ID}}); err != nil {
			return n, fmt.Errorf("schedule delete completed %s: fires: %w", d.ID, interpretError(err))
		}
		if err := s.ScheduleDelete(ctx, d.TenantID, d.ID); err != nil && !errors.Is(err, model.ErrNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}

// fillEnds sets endsAt on the active schedules with an end that a version
// without it wrote, once: while the (endsAt, _id) index, created after
// it, is missing. A fill cut short runs again at the next start.
func (s *Store) fillEnds(ctx context.Context) error {
	specs, err := s.schedules.Indexes().ListSpecifications(ctx)
	if err != nil && !isNamespaceNotFound(err) {
		return fmt.Errorf("list indexes on %s: %w", collSchedules, interpretError(err))
	}
	for _, sp := range specs {
		if sp.Name == "ends_id" {
			return nil
		}
	}
	filter := bson.D{
		{Key: "endsAt", Value: bson.D{{Key: "$exists", Value: false}}},
		{Key: "state", Value: bson.D{{Key: "$ne", Value: string(model.ScheduleCompleted)}}},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: "runAt", Value: bson.D{{Key: "$exists", Value: true}}}},
			bson.D{{Key: "endAt", Value: bson.D{{Key: "$exists", Value: true}}}},
		}},
	}
	cur, err := s.schedules.Find(ctx, filter)
	if err != nil {
		return fmt.Errorf("fill endsAt: %w", interpretError(err))
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		var d scheduleDoc
		if err := cur.Decode(&d); err != nil {
			return fmt.Errorf("fill endsAt: %w", err)
		}
		nd := toScheduleDoc(d.model())
		if nd.EndsAt == nil {
			continue
		}
		_, err := s.schedules.UpdateOne(ctx, bson.D{{Key: "_id", Value: d.ID}, {Key: "version", Value: d.Version}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "endsAt", Value: *nd.EndsAt}}}})
		if err != nil {
			return fmt.Errorf("fill endsAt of %s: %w", d.ID, interpretError(err))
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("fill endsAt: %w", interpretError(err))
	}
	return nil
}
