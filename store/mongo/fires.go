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

// FireInsert stores f unless a fire with f.ID exists (the _id decides, so
// two emitters rescanning one window record one fire). Cross-tenant.
func (s *Store) FireInsert(ctx context.Context, f *model.Fire) (bool, error) {
	_, err := s.fires.InsertOne(ctx, toFireDoc(f))
	if mongo.IsDuplicateKeyError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fire insert %s: %w", f.ID, interpretError(err))
	}
	return true, nil
}

// FireGet returns the tenant's fire. ErrNotFound.
func (s *Store) FireGet(ctx context.Context, tenantID, id string) (*model.Fire, error) {
	var d fireDoc
	if err := s.fires.FindOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "tenantId", Value: tenantID}}).Decode(&d); err != nil {
		return nil, fmt.Errorf("fire get %s: %w", id, interpretError(err))
	}
	return d.model(), nil
}

// FireList pages a tenant's schedule's fires, newest first.
func (s *Store) FireList(ctx context.Context, p *store.FireListParams) ([]*model.Fire, error) {
	filter := bson.D{{Key: "scheduleId", Value: p.ScheduleID}, {Key: "tenantId", Value: p.TenantID}}
	if !p.Before.IsZero() {
		filter = append(filter, bson.E{Key: "fireTime", Value: bson.D{{Key: "$lt", Value: unixNano(p.Before)}}})
	}
	opts := options.Find().SetSort(bson.D{{Key: "fireTime", Value: -1}}).SetLimit(clampLimit(p.Limit))
	docs, err := findAll[fireDoc](ctx, s.fires, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("fire list schedule %s: %w", p.ScheduleID, err)
	}
	out := make([]*model.Fire, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}

// FireLatestBefore returns the schedule's fire with the latest FireTime
// strictly before t. ErrNotFound if none. Cross-tenant.
func (s *Store) FireLatestBefore(ctx context.Context, scheduleID string, t time.Time) (*model.Fire, error) {
	var d fireDoc
	filter := bson.D{{Key: "scheduleId", Value: scheduleID}, {Key: "fireTime", Value: bson.D{{Key: "$lt", Value: unixNano(t)}}}}
	err := s.fires.FindOne(ctx, filter, options.FindOne().SetSort(bson.D{{Key: "fireTime", Value: -1}})).Decode(&d)
	if err != nil {
		return nil, fmt.Errorf("fire latest before schedule %s: %w", scheduleID, interpretError(err))
	}
	return d.model(), nil
}

// FireSetDecision sets the decision and note of an existing fire.
// ErrNotFound.
func (s *Store) FireSetDecision(ctx context.Context, id string, d model.FireDecision, note string) error {
	set := bson.D{{Key: "decision", Value: string(d)}}
	update := bson.D{{Key: "$set", Value: set}}
	if note != "" {
		set = append(set, bson.E{Key: "note", Value: note})
		update = bson.D{{Key: "$set", Value: set}}
	} else {
		update = append(update, bson.E{Key: "$unset", Value: bson.D{{Key: "note", Value: ""}}})
	}
	defer s.lockCAS(s.fires, id)()
	res, err := s.fires.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, update)
	if err == nil && res.MatchedCount == 0 {
		err = mongo.ErrNoDocuments
	}
	if err != nil {
		return fmt.Errorf("fire set decision %s: %w", id, interpretError(err))
	}
	return nil
}

// FireSetRemaining lowers the fire's Remaining to remaining, never raising
// it. ErrNotFound.
func (s *Store) FireSetRemaining(ctx context.Context, id string, remaining int) error {
	remaining = max(remaining, 0)
	defer s.lockCAS(s.fires, id)()
	filter := bson.D{{Key: "_id", Value: id}, {Key: "remaining", Value: bson.D{{Key: "$gt", Value: remaining}}}}
	res, err := s.fires.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "remaining", Value: remaining}}}})
	if err == nil && res.MatchedCount == 0 {
		// Not lower than the stored value, or no such fire.
		var n int64
		n, err = s.fires.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}})
		if err == nil && n == 0 {
			err = mongo.ErrNoDocuments
		}
	}
	if err != nil {
		return fmt.Errorf("fire set remaining %s: %w", id, interpretError(err))
	}
	return nil
}

// FireListEmitting returns up to limit fires with Remaining > 0, by id.
// Cross-tenant.
func (s *Store) FireListEmitting(ctx context.Context, limit int) ([]*model.Fire, error) {
	filter := bson.D{{Key: "remaining", Value: bson.D{{Key: "$gt", Value: 0}}}}
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(clampLimit(limit))
	docs, err := findAll[fireDoc](ctx, s.fires, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("fire list emitting: %w", err)
	}
	out := make([]*model.Fire, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}

// FireInsertMany inserts the fires in one unordered bulk write, then the
// events of those it inserted in another: a failure between the two leaves
// fires without all their events, which the emitter completes as it does
// after FireInsert. Cross-tenant.
func (s *Store) FireInsertMany(ctx context.Context, fs []store.FireNew) ([]bool, int, error) {
	if len(fs) == 0 {
		return nil, 0, nil
	}
	docs := make([]any, len(fs))
	for i, fn := range fs {
		docs[i] = toFireDoc(fn.Fire)
	}
	inserted := make([]bool, len(fs))
	for i := range inserted {
		inserted[i] = true
	}
	_, err := s.fires.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err != nil {
		var bwe mongo.BulkWriteException
		if _, onlyDups := duplicateWrites(err); !onlyDups || !errors.As(err, &bwe) {
			return nil, 0, fmt.Errorf("fire insert many (%d fires): %w", len(fs), interpretError(err))
		}
		for _, we := range bwe.WriteErrors {
			if we.Index >= 0 && we.Index < len(inserted) {
				inserted[we.Index] = false
			}
		}
	}
	var events []*model.Event
	for i, fn := range fs {
		if inserted[i] {
			events = append(events, fn.Events...)
		}
	}
	n, err := s.EventInsertMany(ctx, events)
	if err != nil {
		return nil, 0, fmt.Errorf("fire insert many: %w", err)
	}
	return inserted, n, nil
}

// FireDeadlineDue returns up to limit fires whose open deadline is not
// after before, earliest first. Cross-tenant.
func (s *Store) FireDeadlineDue(ctx context.Context, before time.Time, limit int) ([]*model.Fire, error) {
	filter := bson.D{{Key: "deadlineOpen", Value: bson.D{{Key: "$lte", Value: unixNano(before)}}}}
	opts := options.Find().SetSort(bson.D{{Key: "deadlineOpen", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(clampLimit(limit))
	docs, err := findAll[fireDoc](ctx, s.fires, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("fire deadline due: %w", err)
	}
	out := make([]*model.Fire, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}

// FireDeadlineDone closes the fire's deadline; with miss, a conditional
// update records it only where none is recorded, so one caller wins.
// ErrNotFound.
func (s *Store) FireDeadlineDone(ctx context.Context, id string, miss *model.DeadlineMiss) (bool, error) {
	defer s.lockCAS(s.fires, id)()
	unset := bson.E{Key: "$unset", Value: bson.D{{Key: "deadlineOpen", Value: ""}}}
	if miss != nil {
		filter := bson.D{{Key: "_id", Value: id}, {Key: "deadlineMissed", Value: bson.D{{Key: "$exists", Value: false}}}}
		update := bson.D{{Key: "$set", Value: bson.D{{Key: "deadlineMissed", Value: toMissDoc(miss)}}}, unset}
		res, err := s.fires.UpdateOne(ctx, filter, update)
		if err != nil {
			return false, fmt.Errorf("fire deadline done %s: %w", id, interpretError(err))
		}
		if res.MatchedCount == 1 {
			return true, nil
		}
	}
	res, err := s.fires.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{unset})
	if err == nil && res.MatchedCount == 0 {
		err = mongo.ErrNoDocuments
	}
	if err != nil {
		return false, fmt.Errorf("fire deadline done %s: %w", id, interpretError(err))
	}
	return false, nil
}
