package mongo

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// maxListLimit is the largest page of every list method; a limit of 0 or
// less means the largest page.
const maxListLimit = 1000

func clampLimit(n int) int64 {
	if n <= 0 || n > maxListLimit {
		return maxListLimit
	}
	return int64(n)
}

// inBatch bounds the ids of one $in so that a query stays far below the
// 16 MB command limit.
const inBatch = 1000

// ScheduleCreateMany stores the items: ids that exist are looked up at
// once; in one transaction with the items' fires where
// the server has them (scheduleCreateManyTxn), else the children of the
// other items go in one unordered insert, then their schedules in another,
// then the fires of the stored items with one FireInsertMany. A schedule
// insert that loses to a concurrent create of its id (duplicate key) has
// its children removed and its item reports ErrConflict (its fires are not
// written). On any other failure of the schedule insert the call fails;
// schedules it did write stay (a retry with the same ids finds them as
// conflicts). A failure of the fires' write fails the call too, leaving
// the stored schedules without some of their fires.
func (s *Store) ScheduleCreateMany(ctx context.Context, items []store.ScheduleNew) ([]error, error) {
	res := make([]error, len(items))
	ids := make([]string, 0, len(items))
	first := make(map[string]bool, len(items))
	for i, it := range items {
		if first[it.Schedule.ID] {
			res[i] = model.ErrConflict
			continue
		}
		first[it.Schedule.ID] = true
		ids = append(ids, it.Schedule.ID)
	}
	taken := make(map[string]bool)
	for chunk := range slices.Chunk(ids, inBatch) {
		docs, err := findAll[idOnly](ctx, s.schedules, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: chunk}}}},
			options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return nil, fmt.Errorf("schedule create many (%d): %w", len(items), err)
		}
		for _, d := range docs {
			taken[d.ID] = true
		}
	}
	var (
		todo     []int // indexes into items, in write order
		children []model.Child
		spans    [][2]int // todo[j]'s children are children[spans[j][0]:spans[j][1]]
	)
	for i, it := range items {
		if res[i] != nil {
			continue
		}
		if taken[it.Schedule.ID] {
			res[i] = model.ErrConflict
			continue
		}
		todo = append(todo, i)
		spans = append(spans, [2]int{len(children), len(children) + len(it.Children)})
		children = append(children, it.Children...)
	}
	if len(todo) == 0 {
		return res, nil
	}
	if s.caps.transactions {
		return s.scheduleCreateManyTxn(ctx, items, todo, res)
	}
	childIDs, err := s.insertChildren(ctx, children)
	if err != nil {
		return nil, fmt.Errorf("schedule create many (%d): %w", len(items), err)
	}
	docs := make([]any, len(todo))
	for j, i := range todo {
		docs[j] = toScheduleDoc(items[i].Schedule)
	}
	_, err = s.schedules.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err != nil {
		var bwe mongo.BulkWriteException
		if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
			return nil, fmt.Errorf("schedule create many (%d): %w", len(items), interpretError(err))
		}
		var lost []bson.ObjectID
		for _, we := range bwe.WriteErrors {
			if !mongo.IsDuplicateKeyError(we) || we.Index < 0 || we.Index >= len(todo) {
				return nil, fmt.Errorf("schedule create many (%d): %w", len(items), interpretError(err))
			}
			res[todo[we.Index]] = model.ErrConflict
			sp := spans[we.Index]
			lost = append(lost, childIDs[sp[0]:sp[1]]...)
		}
		if err := s.deleteChildrenByID(context.WithoutCancel(ctx), lost); err != nil {
			return nil, fmt.Errorf("schedule create many (%d): removing the children of conflicting items: %w", len(items), err)
		}
	}
	var fs []store.FireNew
	for _, i := range todo {
		if res[i] == nil {
			fs = append(fs, items[i].Fires...)
		}
	}
	if len(fs) > 0 {
		if _, _, err := s.FireInsertMany(ctx, fs); err != nil {
			return nil, fmt.Errorf("schedule create many (%d): the schedules are stored, their fires: %w", len(items), err)
		}
	}
	return res, nil
}

// scheduleCreateManyTxn writes items[todo...], their children and their
// fires in one transaction. A schedule id that a concurrent create took
// meanwhile aborts it: that item becomes ErrConflict and the others go
// again, so an item that conflicts leaves nothing written and the others
// are stored. A new schedule's fires and events are new, so they are
// inserted without reading first; a fire or event id that exists (left
// by an earlier schedule of the same id) aborts the transaction and the
// next one skips the ids that exist. Events beyond
// what a transaction takes are written after the commit (splitForTxn,
// writeRest).
func (s *Store) scheduleCreateManyTxn(ctx context.Context, items []store.ScheduleNew, todo []int, res []error) ([]error, error) {
	checked, tries := false, 0
	for len(todo) > 0 {
		lost := -1
		inFires := false
		var (
			sp       txnSplit
			inserted []bool
		)
		err := s.withTxn(ctx, func(ctx context.Context) error {
			lost, inFires = -1, false
			docs := make([]any, len(todo))
			var (
				children []model.Child
				fs       []store.FireNew
			)
			for j, i := range todo {
				docs[j] = toScheduleDoc(items[i].Schedule)
				children = append(children, items[i].Children...)
				fs = append(fs, items[i].Fires...)
			}
			sp = splitForTxn(fs, txnMaxDocs-len(todo)-len(children), txnMaxBytes)
			// Ordered: the first duplicate ends the insert and names its item.
			if _, err := s.schedules.InsertMany(ctx, docs); err != nil {
				var bwe mongo.BulkWriteException
				if errors.As(err, &bwe) && bwe.WriteConcernError == nil && len(bwe.WriteErrors) == 1 &&
					mongo.IsDuplicateKeyError(bwe.WriteErrors[0]) && bwe.WriteErrors[0].Index < len(todo) {
					lost = bwe.WriteErrors[0].Index
				}
				return err
			}
			if err := s.insertChildrenTxn(ctx, children); err != nil {
				return err
			}
			var err error
			inserted, _, err = s.fireInsertManyTxn(ctx, sp.in, checked)
			inFires = err != nil
			return err
		})
		if err == nil {
			s.finishRest(ctx, sp, inserted)
			return res, nil
		}
		if inFires && mongo.IsDuplicateKeyError(err) {
			if tries++; tries < createWithFiresTries {
				checked = true
				continue
			}
			return nil, fmt.Errorf("schedule create many (%d): %w: fire or event ids taken while they were written: %v", len(items), model.ErrUnavailable, err)
		}
		if lost < 0 {
			return nil, fmt.Errorf("schedule create many (%d): %w", len(items), interpretError(err))
		}
		res[todo[lost]] = model.ErrConflict
		todo = slices.Delete(todo, lost, lost+1)
	}
	return res, nil
}

// idOnly decodes a projection on _id.
type idOnly struct {
	ID string `bson:"_id"`
}

// childDocs are the documents of children, with fresh ids.
func childDocs(children []model.Child) ([]bson.ObjectID, []any) {
	ids := make([]bson.ObjectID, len(children))
	docs := make([]any, len(children))
	for i := range children {
		ids[i] = bson.NewObjectID()
		d := toChildDoc(&children[i])
		d.ID = ids[i]
		docs[i] = d
	}
	return ids, docs
}

// insertChildrenTxn writes children inside a transaction, which takes back
// whatever part of them went in if anything fails.
func (s *Store) insertChildrenTxn(ctx context.Context, children []model.Child) error {
	if len(children) == 0 {
		return nil
	}
	_, docs := childDocs(children)
	_, err := s.children.InsertMany(ctx, docs)
	return err
}

// withTxn runs fn in one transaction (serverCaps.transactions).
// Session.WithTransaction retries the whole of fn after a
// TransientTransactionError and the commit after an
// UnknownTransactionCommitResult, as MongoDB's drivers document, until the
// client's operation timeout; fn must return every error of the driver
// (wrapped with %w, so that the labels are seen), and so must not write
// outside the transaction.
//
// The transaction reads the primary whatever the URI's readPreference:
// MongoDB refuses a transaction whose reads go elsewhere ("read preference
// in a transaction must be primary"). Once fn has run, a commit may have
// happened even if a later retry of it failed without reaching a server,
// so the error is marked errMayHaveApplied and never maps to ErrNotApplied.
func (s *Store) withTxn(ctx context.Context, fn func(ctx context.Context) error) error {
	sess, err := s.client.StartSession(options.Session().SetDefaultTransactionOptions(
		options.Transaction().SetReadPreference(readpref.Primary())))
	if err != nil {
		return err
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	ran := false
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		ran = true
		return nil, fn(ctx)
	})
	if err != nil && ran {
		return fmt.Errorf("%w: %w", errMayHaveApplied, err)
	}
	return err
}

// insertChildren writes children with fresh ids in unordered batches and
// returns the ids.
func (s *Store) insertChildren(ctx context.Context, children []model.Child) ([]bson.ObjectID, error) {
	if len(children) == 0 {
		return nil, nil
	}
	ids, docs := childDocs(children)
	if _, err := s.children.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
		// Some may have been written. Left behind, they would carry the
		// version a retried write gives the schedule and pass for its
		// children, so remove them while we can (the orphan job is the
		// fallback, as long as no such retry happened).
		if derr := s.deleteChildrenByID(context.WithoutCancel(ctx), ids); derr != nil {
			return nil, fmt.Errorf("insert %d children: %w (and removing them: %v)", len(children), interpretError(err), derr)
		}
		return nil, fmt.Errorf("insert %d children: %w", len(children), interpretError(err))
	}
	return ids, nil
}

func (s *Store) deleteChildrenByID(ctx context.Context, ids []bson.ObjectID) error {
	for chunk := range slices.Chunk(ids, inBatch) {
		if _, err := s.children.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: chunk}}}}); err != nil {
			return interpretError(err)
		}
	}
	return nil
}

// ScheduleGet returns the tenant's schedule. ErrNotFound otherwise.
func (s *Store) ScheduleGet(ctx context.Context, tenantID, id string) (*model.Schedule, error) {
	var d scheduleDoc
	if err := s.schedules.FindOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "tenantId", Value: tenantID}}).Decode(&d); err != nil {
		return nil, fmt.Errorf("schedule get %s: %w", id, interpretError(err))
	}
	return d.model(), nil
}

// ScheduleGetMany returns the schedules with these ids that exist, in any
// order. Cross-tenant (emitter).
func (s *Store) ScheduleGetMany(ctx context.Context, ids []string) ([]*model.Schedule, error) {
	var out []*model.Schedule
	for chunk := range slices.Chunk(ids, inBatch) {
		docs, err := findAll[scheduleDoc](ctx, s.schedules, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: chunk}}}})
		if err != nil {
			return nil, fmt.Errorf("schedule get many (%d ids): %w", len(ids), err)
		}
		for i := range docs {
			out = append(out, docs[i].model())
		}
	}
	return out, nil
}

// ScheduleList pages through a tenant's schedules by id.
func (s *Store) ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*model.Schedule, error) {
	filter := bson.D{{Key: "tenantId", Value: p.TenantID}}
	if p.After != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: p.After}}})
	}
	if p.State != "" {
		filter = append(filter, bson.E{Key: "state", Value: string(p.State)})
	}
	if p.PolicyID != "" {
		filter = append(filter, bson.E{Key: "policyId", Value: p.PolicyID})
	}
	if p.NamePrefix != "" {
		filter = append(filter, bson.E{Key: "name", Value: bson.Regex{Pattern: "^" + regexp.QuoteMeta(p.NamePrefix)}})
	}
	if len(p.Labels) > 0 {
		filter = append(filter, labelsFilter(p.Labels)...)
	}
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(clampLimit(p.Limit))
	docs, err := findAll[scheduleDoc](ctx, s.schedules, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("schedule list tenant %s: %w", p.TenantID, err)
	}
	out := make([]*model.Schedule, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}

// ScheduleUpdate replaces the schedule if its stored version is
// expectedVersion; the stored version becomes expectedVersion+1 (sc.Version
// is set to it). Where the server has transactions the whole of it is one
// (scheduleUpdateTxn). Otherwise, with children, the new children are
// written first, then the schedule (the compare-and-set), then the children
// of older versions are deleted; a lost compare-and-set deletes exactly the
// children it wrote.
// Without children the stored children keep their version and so become
// stale, for ChildrenDeleteOrphans (callers that keep the timing pass the
// children again). ErrNotFound, ErrConflict.
func (s *Store) ScheduleUpdate(ctx context.Context, sc *model.Schedule, expectedVersion int64, children []model.Child) error {
	sc.Version = expectedVersion + 1
	if s.caps.transactions {
		return s.scheduleUpdateTxn(ctx, sc, expectedVersion, children)
	}
	var ids []bson.ObjectID
	if children != nil {
		var err error
		if ids, err = s.insertChildren(ctx, children); err != nil {
			return fmt.Errorf("schedule update %s: %w", sc.ID, err)
		}
	}

	filter := bson.D{{Key: "_id", Value: sc.ID}, {Key: "tenantId", Value: sc.TenantID}, {Key: "version", Value: expectedVersion}}
	unlock := s.lockCAS(s.schedules, sc.ID)
	res, err := s.schedules.ReplaceOne(ctx, filter, toScheduleDoc(sc))
	unlock()
	if err == nil && res.MatchedCount == 0 {
		err = s.notFoundOrConflict(ctx, s.schedules, bson.D{{Key: "_id", Value: sc.ID}, {Key: "tenantId", Value: sc.TenantID}})
	} else {
		err = interpretError(err)
	}
	if err != nil {
		if errors.Is(err, model.ErrConflict) || errors.Is(err, model.ErrNotFound) {
			if derr := s.deleteChildrenByID(ctx, ids); derr != nil {
				return fmt.Errorf("schedule update %s: %w (and removing the new children: %v)", sc.ID, err, derr)
			}
		}
		return fmt.Errorf("schedule update %s: %w", sc.ID, err)
	}

	if children == nil {
		return nil
	}
	_, err = s.children.DeleteMany(ctx, bson.D{
		{Key: "scheduleId", Value: sc.ID},
		{Key: "scheduleVersion", Value: bson.D{{Key: "$lt", Value: sc.Version}}},
	})
	if err != nil {
		return fmt.Errorf("schedule update %s: children: %w", sc.ID, interpretError(err))
	}
	return nil
}

// errNoMatch ends a transaction whose compare-and-set matched nothing.
var errNoMatch = errors.New("no document matched")

// scheduleUpdateTxn is ScheduleUpdate in one transaction: the
// compare-and-set, then the children's replacement, or nothing.
func (s *Store) scheduleUpdateTxn(ctx context.Context, sc *model.Schedule, expectedVersion int64, children []model.Child) error {
	filter := bson.D{{Key: "_id", Value: sc.ID}, {Key: "tenantId", Value: sc.TenantID}, {Key: "version", Value: expectedVersion}}
	err := s.withTxn(ctx, func(ctx context.Context) error {
		res, err := s.schedules.ReplaceOne(ctx, filter, toScheduleDoc(sc))
		if err != nil {
			return err
		}
		if res.MatchedCount == 0 {
			return errNoMatch
		}
		if children == nil {
			return nil
		}
		if _, err := s.children.DeleteMany(ctx, bson.D{
			{Key: "scheduleId", Value: sc.ID},
			{Key: "scheduleVersion", Value: bson.D{{Key: "$lt", Value: sc.Version}}},
		}); err != nil {
			return err
		}
		return s.insertChildrenTxn(ctx, children)
	})
	if errors.Is(err, errNoMatch) {
		err = s.notFoundOrConflict(ctx, s.schedules, bson.D{{Key: "_id", Value: sc.ID}, {Key: "tenantId", Value: sc.TenantID}})
	} else {
		err = interpretError(err)
	}
	if err != nil {
		return fmt.Errorf("schedule update %s: %w", sc.ID, err)
	}
	return nil
}

// ScheduleDelete removes the tenant's schedule, then its children (a crash in
// between leaves orphans for ChildrenDeleteOrphans; in one transaction where
// the server has them). ErrNotFound.
func (s *Store) ScheduleDelete(ctx context.Context, tenantID, id string) error {
	if s.caps.transactions {
		err := s.withTxn(ctx, func(ctx context.Context) error {
			res, err := s.schedules.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "tenantId", Value: tenantID}})
			if err != nil {
				return err
			}
			if res.DeletedCount == 0 {
				return model.ErrNotFound
			}
			_, err = s.children.DeleteMany(ctx, bson.D{{Key: "scheduleId", Value: id}})
			return err
		})
		if err != nil {
			return fmt.Errorf("schedule delete %s: %w", id, interpretError(err))
		}
		return nil
	}
	unlock := s.lockCAS(s.schedules, id)
	res, err := s.schedules.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "tenantId", Value: tenantID}})
	unlock()
	if err != nil {
		return fmt.Errorf("schedule delete %s: %w", id, interpretError(err))
	}
	if res.DeletedCount == 0 {
		return fmt.Errorf("schedule delete %s: %w", id, model.ErrNotFound)
	}
	if _, err := s.children.DeleteMany(ctx, bson.D{{Key: "scheduleId", Value: id}}); err != nil {
		return fmt.Errorf("schedule delete %s: children: %w", id, interpretError(err))
	}
	return nil
}

// ScheduleCountByPolicy counts a tenant's schedules that name policyID.
func (s *Store) ScheduleCountByPolicy(ctx context.Context, tenantID, policyID string) (int, error) {
	n, err := s.schedules.CountDocuments(ctx, bson.D{{Key: "tenantId", Value: tenantID}, {Key: "policyId", Value: policyID}})
	if err != nil {
		return 0, fmt.Errorf("schedule count by policy %s: %w", policyID, interpretError(err))
	}
	return int(n), nil
}

// ScheduleCountByTenant counts the schedules that are not completed over
// the (tenantId, state) index, stopping at max when max > 0.
func (s *Store) ScheduleCountByTenant(ctx context.Context, tenantID string, max int) (int, error) {
	filter := bson.D{{Key: "tenantId", Value: tenantID}, {Key: "state", Value: bson.D{{Key: "$ne", Value: string(model.ScheduleCompleted)}}}}
	n, err := s.schedules.CountDocuments(ctx, filter, countOpts(max))
	if err != nil {
		return 0, fmt.Errorf("schedule count by tenant %s: %w", tenantID, interpretError(err))
	}
	return int(n), nil
}

// countOpts limits a count to max when max > 0.
func countOpts(max int) *options.CountOptionsBuilder {
	o := options.Count()
	if max > 0 {
		o.SetLimit(int64(max))
	}
	return o
}

// childProjection moves only the fields of a model.Child.
var childProjection = bson.D{
	{Key: "_id", Value: 0}, {Key: "scheduleId", Value: 1}, {Key: "tenantId", Value: 1},
	{Key: "scheduleVersion", Value: 1}, {Key: "partition", Value: 1}, {Key: "timezone", Value: 1},
	{Key: "launchExpression", Value: 1}, {Key: "minute", Value: 1},
}

// ChildrenFind returns the children of one partition and timezone whose
// (LaunchExpression, Minute) is one of p.Keys. The query's bounds on the
// (partition, timezone, launchExpression, minute) index are the expressions
// times the minutes; pairs outside p.Keys are dropped here, which costs
// little because windows are short and expressions few.
func (s *Store) ChildrenFind(ctx context.Context, p *store.ChildrenFindParams) ([]model.Child, error) {
	if len(p.Keys) == 0 {
		return nil, nil
	}
	want := make(map[model.ChildKey]bool, len(p.Keys))
	var exprs []string
	var minutes []int
	for _, k := range p.Keys {
		if want[k] {
			continue
		}
		want[k] = true
		if !slices.Contains(exprs, k.LaunchExpression) {
			exprs = append(exprs, k.LaunchExpression)
		}
		if !slices.Contains(minutes, k.Minute) {
			minutes = append(minutes, k.Minute)
		}
	}
	filter := bson.D{
		{Key: "partition", Value: p.Partition},
		{Key: "timezone", Value: p.Timezone},
		{Key: "launchExpression", Value: bson.D{{Key: "$in", Value: exprs}}},
		{Key: "minute", Value: bson.D{{Key: "$in", Value: minutes}}},
	}
	docs, err := findAll[childDoc](ctx, s.children, filter, options.Find().SetProjection(childProjection))
	if err != nil {
		return nil, fmt.Errorf("children find partition %d tz %s: %w", p.Partition, p.Timezone, err)
	}
	out := make([]model.Child, 0, len(docs))
	for i := range docs {
		if want[model.ChildKey{LaunchExpression: docs[i].LaunchExpression, Minute: docs[i].Minute}] {
			out = append(out, docs[i].model())
		}
	}
	return out, nil
}

// ChildTimezones lists the distinct timezones that have children, sorted.
func (s *Store) ChildTimezones(ctx context.Context) ([]string, error) {
	// A $group, not distinct: FerretDB v1 refuses the maxTimeMS that the
	// operation timeout adds to a distinct command.
	cur, err := s.children.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$timezone"}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("child timezones: %w", interpretError(err))
	}
	var rows []struct {
		Timezone string `bson:"_id"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, fmt.Errorf("child timezones: %w", interpretError(err))
	}
	tzs := make([]string, len(rows))
	for i, r := range rows {
		tzs[i] = r.Timezone
	}
	sort.Strings(tzs)
	return tzs, nil
}

// orphanGrace is how old a child of a missing (or not yet updated) schedule
// must be before it counts as an orphan; no create or update takes that long.
const orphanGrace = 10 * time.Minute

// The orphan clean-up runs on one instance at a time: the holder of the
// store's own unit lease orphanLease, which it keeps by taking it again on
// each pass (the emitter's passes are minutes apart, well inside the TTL).
// A holder that closes its store releases it (Close); one that dies is
// replaced once the lease expires.
const (
	orphanLease    = "store/unit/orphan-children"
	orphanLeaseTTL = 15 * time.Minute
	// orphanPage bounds the index entries one read of the clean-up returns.
	orphanPage = 1000
)

// ChildrenDeleteOrphans removes children whose schedule does not exist or
// has another version, on the holder of orphanLease only (0 elsewhere).
// Without $lookup (FerretDB has none) it walks the (scheduleId,
// scheduleVersion) index in pages of orphanPage entries, a covered
// query that reads no child document, looks up the versions of the page's
// schedules, and deletes the orphans of each stale pair by the same index.
// Memory is bounded by a page whatever the number of children.
func (s *Store) ChildrenDeleteOrphans(ctx context.Context) (int, error) {
	now := s.opts.Clock.Now()
	s.orphanMu.Lock()
	l, err := s.LeaseAcquire(ctx, orphanLease, s.opts.Owner, now, orphanLeaseTTL)
	switch {
	case err == nil:
		s.orphanFence = l.Fence
	case errors.Is(err, model.ErrConflict):
		s.orphanFence = 0
	}
	s.orphanMu.Unlock()
	if err != nil {
		if errors.Is(err, model.ErrConflict) {
			return 0, nil
		}
		return 0, fmt.Errorf("children delete orphans: %w", err)
	}
	type pair struct {
		ScheduleID      string `bson:"scheduleId"`
		ScheduleVersion int64  `bson:"scheduleVersion"`
	}
	// Children are written before their schedule where there are no
	// transactions, so a child whose schedule is missing or older may
	// belong to a create or update in progress: only those older than
	// orphanGrace (by their ObjectID) are removed. Children of a version
	// the schedule has moved past are removed at once.
	young := bson.NewObjectIDFromTimestamp(now.Add(-orphanGrace))
	opts := options.Find().
		SetSort(bson.D{{Key: "scheduleId", Value: 1}, {Key: "scheduleVersion", Value: 1}}).
		SetLimit(int64(s.orphanPage)).
		SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "scheduleId", Value: 1}, {Key: "scheduleVersion", Value: 1}})
	deleted := 0
	var last *pair
	for {
		filter := bson.D{}
		if last != nil {
			filter = bson.D{{Key: "$or", Value: bson.A{
				bson.D{{Key: "scheduleId", Value: bson.D{{Key: "$gt", Value: last.ScheduleID}}}},
				bson.D{{Key: "scheduleId", Value: last.ScheduleID}, {Key: "scheduleVersion", Value: bson.D{{Key: "$gt", Value: last.ScheduleVersion}}}},
			}}}
		}
		refs, err := findAll[pair](ctx, s.children, filter, opts)
		if err != nil {
			return deleted, fmt.Errorf("children delete orphans: %w", err)
		}
		if len(refs) == 0 {
			return deleted, nil
		}
		full, end := len(refs) == s.orphanPage, refs[len(refs)-1]
		pairs := slices.Compact(refs)
		var ids []string
		for _, p := range pairs {
			if len(ids) == 0 || ids[len(ids)-1] != p.ScheduleID {
				ids = append(ids, p.ScheduleID)
			}
		}
		type ver struct {
			ID      string `bson:"_id"`
			Version int64  `bson:"version"`
		}
		vs, err := findAll[ver](ctx, s.schedules, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
			options.Find().SetProjection(bson.D{{Key: "version", Value: 1}}))
		if err != nil {
			return deleted, fmt.Errorf("children delete orphans: schedules: %w", err)
		}
		versions := make(map[string]int64, len(vs))
		for _, v := range vs {
			versions[v.ID] = v.Version
		}
		for _, p := range pairs {
			v, ok := versions[p.ScheduleID]
			if ok && v == p.ScheduleVersion {
				continue
			}
			filter := bson.D{{Key: "scheduleId", Value: p.ScheduleID}, {Key: "scheduleVersion", Value: p.ScheduleVersion}}
			if !ok || v < p.ScheduleVersion {
				filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$lt", Value: young}}})
			}
			res, err := s.children.DeleteMany(ctx, filter)
			if err != nil {
				return deleted, fmt.Errorf("children delete orphans: %w", interpretError(err))
			}
			deleted += int(res.DeletedCount)
		}
		if !full {
			return deleted, nil
		}
		last = &end
	}
}

// releaseOrphanLease releases orphanLease if this process holds it. A
// lease lost meanwhile (ErrConflict) is no error.
func (s *Store) releaseOrphanLease(ctx context.Context) error {
	s.orphanMu.Lock()
	defer s.orphanMu.Unlock()
	if s.orphanFence == 0 {
		return nil
	}
	err := s.LeaseRelease(ctx, orphanLease, s.opts.Owner, s.orphanFence)
	s.orphanFence = 0
	if err != nil && !errors.Is(err, model.ErrConflict) {
		return fmt.Errorf("mongo close: %w", err)
	}
	return nil
}

// WatermarkGet returns the partition's watermark, or a zero Watermark.
func (s *Store) WatermarkGet(ctx context.Context, partition int) (model.Watermark, error) {
	var d watermarkDoc
	err := s.watermarks.FindOne(ctx, bson.D{{Key: "_id", Value: partition}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return model.Watermark{}, nil
	}
	if err != nil {
		return model.Watermark{}, fmt.Errorf("watermark get partition %d: %w", partition, interpretError(err))
	}
	return model.Watermark{Partition: d.Partition, Until: fromNano(d.Until), Fence: d.Fence}, nil
}

// WatermarkAdvance moves the watermark forward by one conditional upsert:
// the filter matches only an older watermark with a fence no newer than
// w.Fence; if the document exists but does not match, the upsert's insert
// collides on _id and the duplicate key means ErrConflict.
func (s *Store) WatermarkAdvance(ctx context.Context, w model.Watermark) error {
	defer s.lockCAS(s.watermarks, strconv.Itoa(w.Partition))()
	filter := bson.D{
		{Key: "_id", Value: w.Partition},
		{Key: "until", Value: bson.D{{Key: "$lt", Value: unixNano(w.Until)}}},
		{Key: "fence", Value: bson.D{{Key: "$lte", Value: w.Fence}}},
	}
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "until", Value: unixNano(w.Until)}, {Key: "fence", Value: w.Fence}}}}
	_, err := s.watermarks.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("watermark advance partition %d fence %d: %w", w.Partition, w.Fence, interpretError(err))
	}
	return nil
}

// createWithFiresTries bounds the transactions of one
// scheduleCreateManyTxn that find fire or event ids taken.
const createWithFiresTries = 3

// fireInsertManyTxn is FireInsertMany inside a transaction, which needs
// every write to succeed: with checked it first reads which fire and
// event ids exist and inserts only the others; without, it inserts all
// of them, and a duplicate id fails the transaction.
func (s *Store) fireInsertManyTxn(ctx context.Context, fs []store.FireNew, checked bool) ([]bool, int, error) {
	if len(fs) == 0 {
		return nil, 0, nil
	}
	inserted := make([]bool, len(fs))
	ids := make([]string, len(fs))
	for i, fn := range fs {
		inserted[i] = true
		ids[i] = fn.Fire.ID
	}
	if checked {
		have, err := s.existingIDs(ctx, s.fires, ids)
		if err != nil {
			return nil, 0, err
		}
		for i, id := range ids {
			inserted[i] = !have[id]
		}
	}
	var docs []any
	var events []*model.Event
	for i, fn := range fs {
		if inserted[i] {
			docs = append(docs, toFireDoc(fn.Fire))
			events = append(events, fn.Events...)
		}
	}
	if len(docs) > 0 {
		if _, err := s.fires.InsertMany(ctx, docs); err != nil {
			return nil, 0, err
		}
	}
	if checked && len(events) > 0 {
		eids := make([]string, len(events))
		for i, e := range events {
			eids[i] = e.ID
		}
		have, err := s.existingIDs(ctx, s.events, eids)
		if err != nil {
			return nil, 0, err
		}
		events = slices.DeleteFunc(events, func(e *model.Event) bool { return have[e.ID] })
	}
	if len(events) == 0 {
		return inserted, 0, nil
	}
	edocs := make([]any, len(events))
	for i, e := range events {
		edocs[i] = toEventDoc(e)
	}
	if _, err := s.events.InsertMany(ctx, edocs); err != nil {
		return nil, 0, err
	}
	if err := s.eventHeads(ctx, events); err != nil {
		return nil, 0, err
	}
	return inserted, len(events), nil
}

// existingIDs returns which of ids exist in coll. Driver errors are
// returned as they are (see withTxn).
func (s *Store) existingIDs(ctx context.Context, coll *mongo.Collection, ids []string) (map[string]bool, error) {
	have := make(map[string]bool)
	for chunk := range slices.Chunk(ids, inBatch) {
		cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: chunk}}}},
			options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return nil, err
		}
		var docs []idOnly
		if err := cur.All(ctx, &docs); err != nil {
			return nil, err
		}
		for _, d := range docs {
			have[d.ID] = true
		}
	}
	return have, nil
}

// labelsFilter matches the stored label pairs (see labelPairs) against sel:
// a pair "key=value", or for a requirement of any value one that starts
// with "key=" (an anchored prefix, which an index bounds). Several
// requirements combine under $and.
func labelsFilter(sel []model.LabelRequirement) bson.D {
	one := func(r model.LabelRequirement) bson.E {
		if r.Any {
			return bson.E{Key: "labels", Value: bson.Regex{Pattern: "^" + regexp.QuoteMeta(r.Key+"=")}}
		}
		return bson.E{Key: "labels", Value: r.Key + "=" + r.Value}
	}
	if len(sel) == 1 {
		return bson.D{one(sel[0])}
	}
	and := make(bson.A, len(sel))
	for i, r := range sel {
		and[i] = bson.D{one(r)}
	}
	return bson.D{{Key: "$and", Value: and}}
}
