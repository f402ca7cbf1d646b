package mongo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Status sets used by several queries.
var (
	claimableStatuses = []string{string(model.EventPending), string(model.EventRetrying)}
	waitingStatuses   = []string{string(model.EventPending), string(model.EventRetrying), string(model.EventScheduled)}
	tokenStatuses     = []string{string(model.EventDelivering), string(model.EventDelivered)}
	deletableStatuses = []string{string(model.EventReleased), string(model.EventCancelled)}
)

func in[T any](vs []T) bson.D { return bson.D{{Key: "$in", Value: vs}} }

// The hot queries on events ask for one status at a time (an equality)
// instead of one $in of several. MongoDB serves either from the same
// index. FerretDB pushes equalities down to PostgreSQL but evaluates $in
// (and ranges) itself, after decoding every document that the rest of the
// filter lets through: a token count over a policy's events decoded all
// of its thousands of waiting events to find the few holding tokens.
// Decoding is most of FerretDB's CPU under the chaos tests (a profile of
// a long multi-instance run: 70% in its JSON decoding, 53% of all in finds
// and 23% in the aggregations behind counts).

// withStatus returns filter with status = st appended.
func withStatus(filter bson.D, st string) bson.D {
	return append(filter[:len(filter):len(filter)], bson.E{Key: "status", Value: st})
}

// countStatuses counts the documents matching filter with each of
// statuses, each count stopping at max when max > 0.
func countStatuses(ctx context.Context, c *mongo.Collection, filter bson.D, statuses []string, max int) (int, error) {
	total := 0
	for _, st := range statuses {
		n, err := c.CountDocuments(ctx, withStatus(filter, st), countOpts(max))
		if err != nil {
			return 0, interpretError(err)
		}
		total += int(n)
	}
	return total, nil
}

// findStatuses finds, per status, the first limit documents matching filter
// in the order of opts' sort, and returns the first limit of them all in the
// order of cmp (which must agree with that sort); limit <= 0 is all of them.
// opts carries the same limit: the server pages the cursor, so any limit is
// honoured whatever the batch size.
func findStatuses[T any](ctx context.Context, c *mongo.Collection, filter bson.D, statuses []string, limit int, cmp func(a, b T) int, opts *options.FindOptionsBuilder) ([]T, error) {
	var out []T
	for _, st := range statuses {
		docs, err := findAll[T](ctx, c, withStatus(filter, st), opts)
		if err != nil {
			return nil, err
		}
		out = append(out, docs...)
	}
	if len(statuses) > 1 {
		slices.SortFunc(out, cmp)
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// batchOf is the first batch of a find that returns at most n documents:
// all of them, so that no getMore follows (the server still ends a batch
// at 16 MB). Without it the first batch holds 101 documents.
func batchOf(n int) int32 {
	return int32(min(max(n, 1), math.MaxInt32))
}

// EventInsertMany inserts the events whose ids do not exist yet, as one
// unordered bulk insert: a duplicate _id fails only its own document, so the
// events of a rescanned window are left untouched and the rest still go in.
// Returns how many were inserted. Cross-tenant.
func (s *Store) EventInsertMany(ctx context.Context, events []*model.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	docs := make([]any, len(events))
	for i, e := range events {
		docs[i] = toEventDoc(e)
	}
	_, err := s.events.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	dups, onlyDups := duplicateWrites(err)
	if err != nil && !onlyDups {
		return 0, fmt.Errorf("event insert many (%d events): %w", len(events), interpretError(err))
	}
	// The heads after their events (see heads.go); an error makes the
	// caller write the events again, and so their heads.
	if err := s.eventHeads(ctx, written(events, err)); err != nil {
		return 0, fmt.Errorf("event insert many (%d events): %w", len(events), err)
	}
	return len(events) - dups, nil
}

// duplicateWrites counts the duplicate-key write errors of a bulk write and
// reports whether there were no other errors.
func duplicateWrites(err error) (dups int, onlyDups bool) {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
		return 0, false
	}
	for _, we := range bwe.WriteErrors {
		if !isDuplicateCode(we.Code) {
			return 0, false
		}
		dups++
	}
	return dups, true
}

// written returns the events of a bulk insert that err, its error, does
// not name.
func written(events []*model.Event, err error) []*model.Event {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) {
		return events
	}
	failed := make(map[int]bool, len(bwe.WriteErrors))
	for _, we := range bwe.WriteErrors {
		failed[we.Index] = true
	}
	out := make([]*model.Event, 0, len(events)-len(failed))
	for i, e := range events {
		if !failed[i] {
			out = append(out, e)
		}
	}
	return out
}

func isDuplicateCode(code int) bool { return code == 11000 || code == 11001 || code == 12582 }

// EventGet returns the tenant's event. ErrNotFound.
func (s *Store) EventGet(ctx context.Context, tenantID, id string) (*model.Event, error) {
	var d eventDoc
	if err := s.events.FindOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "tenantId", Value: tenantID}}).Decode(&d); err != nil {
		return nil, fmt.Errorf("event get %s: %w", id, interpretError(err))
	}
	return d.model(), nil
}

// EventGetByID returns any tenant's event. ErrNotFound.
func (s *Store) EventGetByID(ctx context.Context, id string) (*model.Event, error) {
	var d eventDoc
	if err := s.events.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
		return nil, fmt.Errorf("event get by id %s: %w", id, interpretError(err))
	}
	return d.model(), nil
}

// EventGetMany returns the events of ids that exist, by id.
func (s *Store) EventGetMany(ctx context.Context, ids []string) (map[string]*model.Event, error) {
	docs, err := findByIDs[eventDoc](ctx, s, s.events, ids, nil)
	if err != nil {
		return nil, fmt.Errorf("event get many (%d): %w", len(ids), err)
	}
	out := make(map[string]*model.Event, len(docs))
	for _, e := range eventModels(docs) {
		out[e.ID] = e
	}
	return out, nil
}

// findByIDs returns the documents of c among ids that exist, decoded as T,
// with the projection proj unless it is nil: $in queries of inBatch ids
// each, or against FerretDB, which evaluates $in itself over the whole
// collection (2.3 s a call in a long chaos run) but pushes {_id: x} down,
// one lookup an id, eight at a time.
func findByIDs[T any](ctx context.Context, s *Store, c *mongo.Collection, ids []string, proj bson.D) ([]T, error) {
	var docs []T
	if !s.serialise {
		for chunk := range slices.Chunk(ids, inBatch) {
			find := options.Find().SetBatchSize(batchOf(len(chunk)))
			if proj != nil {
				find.SetProjection(proj)
			}
			part, err := findAll[T](ctx, c, bson.D{{Key: "_id", Value: in(chunk)}}, find)
			if err != nil {
				return nil, err
			}
			docs = append(docs, part...)
		}
		return docs, nil
	}
	findOne := options.FindOne()
	if proj != nil {
		findOne.SetProjection(proj)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, id := range ids {
		g.Go(func() error {
			var d T
			err := c.FindOne(gctx, bson.D{{Key: "_id", Value: id}}, findOne).Decode(&d)
			if errors.Is(err, mongo.ErrNoDocuments) {
				return nil
			}
			if err != nil {
				return interpretError(err)
			}
			mu.Lock()
			docs = append(docs, d)
			mu.Unlock()
			return nil
		})
	}
	return docs, g.Wait()
}

// EventList pages a tenant's events by id.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) ([]*model.Event, error) {
	filter := bson.D{{Key: "tenantId", Value: p.TenantID}}
	if p.After != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: p.After}}})
	}
	if p.ScheduleID != "" {
		filter = append(filter, bson.E{Key: "scheduleId", Value: p.ScheduleID})
	}
	if p.FireID != "" {
		filter = append(filter, bson.E{Key: "fireId", Value: p.FireID})
	}
	if p.Status != "" {
		filter = append(filter, bson.E{Key: "status", Value: string(p.Status)})
	}
	if !p.From.IsZero() || !p.To.IsZero() {
		r := bson.D{}
		if !p.From.IsZero() {
			r = append(r, bson.E{Key: "$gte", Value: unixNano(p.From)})
		}
		if !p.To.IsZero() {
			r = append(r, bson.E{Key: "$lt", Value: unixNano(p.To)})
		}
		filter = append(filter, bson.E{Key: "launchAt", Value: r})
	}
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(clampLimit(p.Limit))
	docs, err := findAll[eventDoc](ctx, s.events, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("event list tenant %s: %w", p.TenantID, err)
	}
	return eventModels(docs), nil
}

func eventModels(docs []eventDoc) []*model.Event {
	out := make([]*model.Event, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out
}

// claimCand is a claim's candidate as its first read saw it.
type claimCand struct {
	ID       string `bson:"_id"`
	Status   string `bson:"status"`
	Fence    int64  `bson:"fence"`
	LaunchAt int64  `bson:"launchAt"`
	Index    int    `bson:"index"`
}

// EventClaimDue claims due events of one queue shard, at most p.Limit (none
// if p.Limit <= 0), in three steps:
//
//  1. find the candidates, projecting only _id, status, fence and launchAt:
//     the events scheduled under an older fence (through the (shard,
//     status, fence) index), then the due pending and retrying events of
//     each lane, as many as store.ShareClaim gives the lane (claimByLanes);
//  2. one unordered bulk write of compare-and-sets, each conditional on the
//     status and fence the candidate had, so a concurrent claimer or a
//     transition made meanwhile wins and the candidate is skipped; each write
//     also stamps a nonce of this call (on FerretDB, one UpdateMany per
//     status and fence the candidates had, see claimFerret);
//  3. read back the candidates that carry the nonce and p.Fence.
//
// The nonce is what tells this call's wins apart: a bulk write reports only
// totals, and two claimers may hold the same fence (one owner claiming from
// two goroutines), so the fence alone would let both return an event.
func (s *Store) EventClaimDue(ctx context.Context, p *store.EventClaimParams) ([]*model.Event, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	limit := p.Limit
	// Scheduled under another fence: $ne, not $lt, because FerretDB pushes
	// $ne down (and then reads nothing once the shard is taken over, where
	// $lt read every event waiting in this owner's buckets on every pass).
	// A newer fence means a newer owner: those are not candidates.
	older, err := findStatuses(ctx, s.events, bson.D{
		{Key: "shard", Value: p.Shard},
		{Key: "fence", Value: bson.D{{Key: "$ne", Value: p.Fence}}},
	}, []string{string(model.EventScheduled)}, limit, byLaunch, claimFind(limit, launchSort))
	if err != nil {
		return nil, fmt.Errorf("event claim shard %d: find: %w", p.Shard, err)
	}
	cands := slices.DeleteFunc(older, func(c claimCand) bool { return c.Fence > p.Fence })
	var moves []headMove
	if rest := limit - len(cands); rest > 0 {
		var due []claimCand
		if s.laneIndexBuilding() {
			due, err = s.claimByLaunch(ctx, p, rest)
		} else {
			due, moves, err = s.claimByLanes(ctx, p, rest)
		}
		if err != nil {
			return nil, fmt.Errorf("event claim shard %d: %w", p.Shard, err)
		}
		cands = append(cands, due...)
	}
	if len(cands) == 0 {
		return nil, nil
	}

	nonce := bson.NewObjectID()
	set := bson.D{{Key: "$set", Value: bson.D{
		{Key: "status", Value: string(model.EventScheduled)},
		{Key: "fence", Value: p.Fence},
		{Key: "claim", Value: nonce},
	}}}
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = c.ID
	}
	if s.serialise {
		err = s.claimFerret(ctx, cands, set)
	} else {
		writes := make([]mongo.WriteModel, len(cands))
		for i, c := range cands {
			writes[i] = mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "_id", Value: c.ID}, {Key: "status", Value: c.Status}, {Key: "fence", Value: c.Fence}}).
				SetUpdate(set)
		}
		_, err = s.events.BulkWrite(ctx, writes, options.BulkWrite().SetOrdered(false))
		err = interpretError(err)
	}
	if err != nil {
		return nil, fmt.Errorf("event claim shard %d: update: %w", p.Shard, err)
	}
	// The claim stands whatever becomes of its head moves: a head left
	// where it was is early, and a later claim moves it.
	_ = s.moveHeads(ctx, moves)

	var docs []eventDoc
	for chunk := range slices.Chunk(ids, inBatch) {
		part, err := findAll[eventDoc](ctx, s.events,
			bson.D{
				{Key: "_id", Value: in(chunk)},
				{Key: "claim", Value: nonce},
				{Key: "status", Value: string(model.EventScheduled)},
				{Key: "fence", Value: p.Fence},
			}, options.Find().SetBatchSize(batchOf(len(chunk))))
		if err != nil {
			return nil, fmt.Errorf("event claim shard %d: read back: %w", p.Shard, err)
		}
		docs = append(docs, part...)
	}
	slices.SortFunc(docs, func(a, b eventDoc) int {
		return cmp.Or(cmp.Compare(a.LaunchAt, b.LaunchAt), cmp.Compare(a.ID, b.ID))
	})
	out := eventModels(docs)
	prev := make(map[string]string, len(cands))
	for _, c := range cands {
		prev[c.ID] = c.Status
	}
	for _, e := range out {
		e.TakenOver = prev[e.ID] == string(model.EventScheduled)
	}
	return out, nil
}

// ferretClaimChunk bounds the documents of one claim UpdateMany on FerretDB,
// which writes them one by one (about 15 ms each on SQLite): a thousand in
// one command outlasted the operation timeout.
const ferretClaimChunk = 100

// claimFerret applies the claim's compare-and-sets on FerretDB as one
// UpdateMany per (status, fence) the candidates had: FerretDB runs each
// statement of a bulk write as its own scan of the collection, so a claim of
// a thousand events as single-document statements took minutes. The filter
// is re-checked per document, as in the bulk write.
func (s *Store) claimFerret(ctx context.Context, cands []claimCand, set bson.D) error {
	type key struct {
		status string
		fence  int64
	}
	var keys []key
	groups := map[key][]string{}
	for _, c := range cands {
		k := key{c.Status, c.Fence}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], c.ID)
	}
	for _, k := range keys {
		for chunk := range slices.Chunk(groups[k], ferretClaimChunk) {
			filter := bson.D{{Key: "_id", Value: in(chunk)}, {Key: "status", Value: k.status}, {Key: "fence", Value: k.fence}}
			unlock := s.lockCAS(s.events, chunk...)
			_, err := s.events.UpdateMany(ctx, filter, set)
			unlock()
			if err != nil {
				return interpretError(err)
			}
		}
	}
	return nil
}

// EventTransition applies the transitions in rounds, each one unordered
// bulk write of compare-and-sets stamped with a nonce of the round, and
// reads back which documents carry the nonce: those transitions won. A
// transition goes in a later round than the one it requires and than any
// earlier transition of the same event, so the call keeps the order the
// contract promises with as few round trips as the chains allow (one for
// independent transitions, two for a release and the start it hands its
// token to).
//
// A failed round ends the call with model.ErrUnavailable, which wraps
// model.ErrNotApplied only if no transition of the call can have applied:
// a round that failed without reaching the server after an earlier round
// won something leaves a half-applied call, which callers must read back.
func (s *Store) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	results := make([]error, len(ts))
	rounds := transitionRounds(ts)
	applied := false
	for _, r := range rounds {
		var idx []int
		for _, i := range r {
			if ts[i].RequiresPrevious && (i == 0 || results[i-1] != nil) {
				results[i] = fmt.Errorf("event transition %s %s→%s: previous transition failed: %w", ts[i].ID, ts[i].From, ts[i].To, model.ErrConflict)
				continue
			}
			idx = append(idx, i)
		}
		if len(idx) == 0 {
			continue
		}
		won, err := s.transitionRound(ctx, ts, idx, results)
		if err != nil {
			return results, fmt.Errorf("event transition (%d): %w", len(ts), callError(err, applied))
		}
		applied = applied || won
	}
	s.transitionHeads(ctx, ts, results)
	return results, nil
}

// transitionHeads writes the heads of the events that ts made waiting
// (see heads.go), read back as they are now. The transitions stand
// whatever becomes of it: a head that a failure left out is found by the
// walk of the lanes once its event is its lane's earliest.
func (s *Store) transitionHeads(ctx context.Context, ts []store.EventTransition, results []error) {
	var ids []string
	for i, t := range ts {
		if results[i] == nil && slices.Contains(claimableStatuses, string(t.To)) {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	ws, err := findByIDs[waitingHead](ctx, s, s.events, ids, waitingHeadProjection)
	if err == nil {
		_ = s.writeHeads(ctx, ws)
	}
}

// transitionRounds groups the indexes of ts into rounds: a transition that
// requires the previous one, or that names an event an earlier transition
// of the call names, goes in a round after that one. Each round holds an
// event at most once, so its writes may run in any order.
func transitionRounds(ts []store.EventTransition) [][]int {
	var rounds [][]int
	round := make([]int, len(ts))
	last := make(map[string]int, len(ts))
	for i := range ts {
		r := 0
		if ts[i].RequiresPrevious && i > 0 {
			r = round[i-1] + 1
		}
		if j, ok := last[ts[i].ID]; ok {
			r = max(r, round[j]+1)
		}
		round[i] = r
		last[ts[i].ID] = i
		if r == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], i)
	}
	return rounds
}

// callError is the error of a transition call whose round failed with err
// (already interpreted). An error that says the round did not apply says so
// of the call only if no earlier round won: otherwise the call is half
// applied, which is as ambiguous as a lost reply.
func callError(err error, applied bool) error {
	if !applied || !errors.Is(err, model.ErrNotApplied) {
		return err
	}
	return fmt.Errorf("%w: earlier transitions of the call applied; this one failed: %v", model.ErrUnavailable, err)
}

// transitionRound applies ts[idx...] (distinct events) and sets their
// results; it reports whether any of them won. It fails with
// model.ErrUnavailable when the write or its read-back failed, and when a
// won transition cannot be told apart from one that lost (a concurrent
// writer changed the event again before the read-back).
func (s *Store) transitionRound(ctx context.Context, ts []store.EventTransition, idx []int, results []error) (bool, error) {
	nonce := bson.NewObjectID()
	writes := make([]mongo.WriteModel, len(idx))
	ids := make([]string, len(idx))
	for k, i := range idx {
		ids[k] = ts[i].ID
		filter, update := s.transitionWrite(&ts[i], nonce)
		writes[k] = mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update)
	}
	var matched int64
	for lo, n := 0, s.bulkSize(len(writes)); lo < len(writes); lo += n {
		hi := min(lo+n, len(writes))
		unlock := s.lockCAS(s.events, ids[lo:hi]...)
		res, err := s.events.BulkWrite(ctx, writes[lo:hi], options.BulkWrite().SetOrdered(false))
		unlock()
		if err != nil {
			if lo > 0 {
				// Earlier chunks of this round were sent.
				return false, callError(interpretError(err), true)
			}
			return false, interpretError(err)
		}
		matched += res.MatchedCount
	}

	if len(idx) == 1 {
		// One write: its matched count is its result.
		if matched == 1 {
			return true, nil
		}
		t := &ts[idx[0]]
		err := s.notFoundOrConflict(ctx, s.events, bson.D{{Key: "_id", Value: t.ID}})
		if errors.Is(err, model.ErrUnavailable) {
			return false, err
		}
		results[idx[0]] = fmt.Errorf("event transition %s %s→%s: %w", t.ID, t.From, t.To, err)
		return false, nil
	}

	stamps, err := s.readStamps(ctx, ids)
	if err != nil {
		// The writes were sent: whatever the read's error says, not that
		// they did not apply.
		return matched > 0, fmt.Errorf("%w: read back: %v", model.ErrUnavailable, err)
	}
	seen := make(map[string]bool, len(ids))
	won := 0
	for id, txn := range stamps {
		seen[id] = txn == nonce
		if txn == nonce {
			won++
		}
	}
	if int64(won) != matched {
		return matched > 0, fmt.Errorf("%w: %d transitions matched but %d still carry their stamp: the events changed again before the read-back",
			model.ErrUnavailable, matched, won)
	}
	for _, i := range idx {
		t := &ts[i]
		mine, ok := seen[t.ID]
		switch {
		case !ok:
			results[i] = fmt.Errorf("event transition %s %s→%s: %w", t.ID, t.From, t.To, model.ErrNotFound)
		case !mine:
			results[i] = fmt.Errorf("event transition %s %s→%s: %w", t.ID, t.From, t.To, model.ErrConflict)
		}
	}
	return won > 0, nil
}

// readStamps returns the transition stamp of each event of ids that exists
// (the zero ObjectID if it has none).
func (s *Store) readStamps(ctx context.Context, ids []string) (map[string]bson.ObjectID, error) {
	type stamp struct {
		ID  string        `bson:"_id"`
		Txn bson.ObjectID `bson:"txn"`
	}
	docs, err := findByIDs[stamp](ctx, s, s.events, ids, bson.D{{Key: "txn", Value: 1}})
	if err != nil {
		return nil, err
	}
	out := make(map[string]bson.ObjectID, len(docs))
	for _, d := range docs {
		out[d.ID] = d.Txn
	}
	return out, nil
}

// transitionWrite returns the compare-and-set of t (id, from-status and the
// optional fence and token expiry in the filter) with its update, which
// stamps nonce on the event. The token expiry is judged on the clock that
// EventFindTokenExpired reads by (s.before), so that a token the reclaim
// found expired is taken back without waiting for the caller's clock.
func (s *Store) transitionWrite(t *store.EventTransition, nonce bson.ObjectID) (filter bson.D, update any) {
	filter = bson.D{{Key: "_id", Value: t.ID}, {Key: "status", Value: string(t.From)}}
	if t.Fence != 0 {
		filter = append(filter, bson.E{Key: "fence", Value: t.Fence})
	}
	if t.TokenExpiredBy != nil {
		expired := s.before("tokenExpiresAt", *t.TokenExpiredBy, true)
		if expired.Key == "$expr" {
			// An $expr matches a missing field; the contract wants a token.
			filter = append(filter, bson.E{Key: "tokenExpiresAt", Value: bson.D{{Key: "$exists", Value: true}}})
		}
		filter = append(filter, expired)
	}
	if t.AttemptsAtMost != nil {
		filter = append(filter, bson.E{Key: "attempts", Value: bson.D{{Key: "$lte", Value: *t.AttemptsAtMost}}})
	}
	set := bson.D{{Key: "status", Value: string(t.To)}, {Key: "txn", Value: nonce}}
	if !t.LaunchAt.IsZero() {
		set = append(set, bson.E{Key: "launchAt", Value: unixNano(t.LaunchAt)})
	}
	switch {
	case t.ResetAttempts:
		set = append(set, bson.E{Key: "attempts", Value: 0})
	case t.Attempts != 0:
		set = append(set, bson.E{Key: "attempts", Value: t.Attempts})
	}
	if t.LastError != "" {
		set = append(set, bson.E{Key: "lastError", Value: t.LastError})
	}
	if t.TokenExpiresAt != nil {
		set = append(set, bson.E{Key: "tokenExpiresAt", Value: unixNano(*t.TokenExpiresAt)})
	}
	if t.TokenTimedOut && !t.ClearOutcome {
		set = append(set, bson.E{Key: "tokenTimedOut", Value: true})
	}
	if t.DeliveredAt != nil && !t.ClearOutcome {
		set = append(set, bson.E{Key: "deliveredAt", Value: unixNano(*t.DeliveredAt)})
	}
	if t.FinishedAt != nil && !t.ClearOutcome {
		set = append(set, bson.E{Key: "finishedAt", Value: unixNano(*t.FinishedAt)})
	}
	if !t.At.IsZero() {
		set = append(set, bson.E{Key: "updatedAt", Value: unixNano(t.At)})
	}
	var unset bson.D
	// The TTL date of retention follows the status (see retention.go); a
	// finished event that stays so without a new finishedAt keeps it.
	keepDate := t.From == t.To && t.FinishedAt == nil
	if d := finishedDate(t.To, t.FinishedAt, t.At); d != nil && !keepDate {
		set = append(set, bson.E{Key: fieldFinishedDate, Value: *d})
	} else if (t.From == model.EventReleased || t.From == model.EventCancelled) && !keepDate {
		unset = append(unset, bson.E{Key: fieldFinishedDate, Value: ""})
	}
	if t.ClearToken && t.TokenExpiresAt == nil {
		unset = append(unset, bson.E{Key: "tokenExpiresAt", Value: ""})
	}
	if t.ClearOutcome {
		unset = append(unset, bson.E{Key: "deliveredAt", Value: ""}, bson.E{Key: "finishedAt", Value: ""},
			bson.E{Key: "tokenTimedOut", Value: ""})
	}
	if t.ClearExpiry {
		unset = append(unset, bson.E{Key: "expireAt", Value: ""})
	}
	if t.TokenExpiresAt != nil && s.caps.serverClock {
		// Stamped on the clock that judges it (clock.go).
		return filter, s.onServerClock(set, unset, "tokenExpiresAt", *t.TokenExpiresAt)
	}
	plain := bson.D{{Key: "$set", Value: set}}
	if len(unset) > 0 {
		plain = append(plain, bson.E{Key: "$unset", Value: unset})
	}
	return filter, plain
}

// EventCountByTenant counts over the (tenantId, _id) index, stopping at
// max when max > 0.
func (s *Store) EventCountByTenant(ctx context.Context, tenantID string, max int) (int, error) {
	n, err := s.events.CountDocuments(ctx, bson.D{{Key: "tenantId", Value: tenantID}}, countOpts(max))
	if err != nil {
		return 0, fmt.Errorf("event count by tenant %s: %w", tenantID, interpretError(err))
	}
	return int(n), nil
}

// EventCountByFire counts a fire's events per status with one $group over
// the (fireId, status) index. Cross-tenant.
func (s *Store) EventCountByFire(ctx context.Context, fireID string) (store.EventCounts, error) {
	counts, err := s.countByStatus(ctx, bson.D{{Key: "fireId", Value: fireID}})
	if err != nil {
		return nil, fmt.Errorf("event count by fire %s: %w", fireID, err)
	}
	return counts, nil
}

// countByStatus counts the events matching filter per status with one
// $group.
func (s *Store) countByStatus(ctx context.Context, filter bson.D) (store.EventCounts, error) {
	pipeline := mongo.Pipeline{
		{{Key: "$match", Value: filter}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$status"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	}
	cur, err := s.events.Aggregate(ctx, pipeline)
	if err != nil {
		return nil, interpretError(err)
	}
	var rows []struct {
		Status string `bson:"_id"`
		N      int    `bson:"n"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, interpretError(err)
	}
	counts := store.EventCounts{}
	for _, r := range rows {
		counts[model.EventStatus(r.Status)] = r.N
	}
	return counts, nil
}

// EventLastFinished returns the latest FinishedAt among a fire's events, or
// nil.
func (s *Store) EventLastFinished(ctx context.Context, fireID string) (*time.Time, error) {
	var d struct {
		FinishedAt *int64 `bson:"finishedAt"`
	}
	filter := bson.D{{Key: "fireId", Value: fireID}, {Key: "finishedAt", Value: bson.D{{Key: "$exists", Value: true}}}}
	opts := options.FindOne().SetSort(bson.D{{Key: "finishedAt", Value: -1}}).SetProjection(bson.D{{Key: "finishedAt", Value: 1}})
	err := s.events.FindOne(ctx, filter, opts).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("event last finished fire %s: %w", fireID, interpretError(err))
	}
	return fromNanoPtr(d.FinishedAt), nil
}

// EventCancelPending cancels the schedule's (or one fire's) waiting events
// with one UpdateMany: each document is still changed by its own
// conditional write (the status filter is re-checked per document), so an
// event a handler moved on meanwhile is left alone. Cross-tenant.
func (s *Store) EventCancelPending(ctx context.Context, scheduleID, fireID string, at time.Time) (int, error) {
	return s.finishWaiting(ctx, "event cancel pending", scheduleID, fireID, at, model.EventCancelled, "")
}

// EventExpireWaiting moves the fire's waiting events to expired in one
// update, as EventCancelPending cancels them. Cross-tenant.
func (s *Store) EventExpireWaiting(ctx context.Context, scheduleID, fireID string, at time.Time, reason string) (int, error) {
	return s.finishWaiting(ctx, "event expire waiting", scheduleID, fireID, at, model.EventExpired, reason)
}

// finishWaiting moves the schedule's (or one fire's) waiting events to the
// finished status to, with reason (if set) as their lastError.
func (s *Store) finishWaiting(ctx context.Context, op, scheduleID, fireID string, at time.Time, to model.EventStatus, reason string) (int, error) {
	filter := bson.D{{Key: "scheduleId", Value: scheduleID}}
	if fireID != "" {
		filter = append(filter, bson.E{Key: "fireId", Value: fireID})
	}
	filter = append(filter, bson.E{Key: "status", Value: in(waitingStatuses)})
	set := bson.D{
		{Key: "status", Value: string(to)},
		{Key: "finishedAt", Value: unixNano(at)},
		{Key: "updatedAt", Value: unixNano(at)},
	}
	if d := finishedDate(to, &at, at); d != nil {
		set = append(set, bson.E{Key: fieldFinishedDate, Value: *d})
	}
	if reason != "" {
		set = append(set, bson.E{Key: "lastError", Value: reason})
	}
	update := bson.D{{Key: "$set", Value: set}}
	unlock := s.lockCAS(s.events)
	res, err := s.events.UpdateMany(ctx, filter, update)
	unlock()
	if err != nil {
		return 0, fmt.Errorf("%s schedule %s: %w", op, scheduleID, interpretError(err))
	}
	return int(res.ModifiedCount), nil
}

// EventFindTokenExpired returns the policy's token-holding events whose
// token expired before t, oldest expiry first, t judged on the server's
// clock where it can (see clock.go). The reclaim's transition
// (TokenExpiredBy) is judged on the same clock. Cross-tenant.
func (s *Store) EventFindTokenExpired(ctx context.Context, policyID string, t time.Time, limit int) ([]*model.Event, error) {
	filter := bson.D{{Key: "policyId", Value: policyID}}
	if expired := s.before("tokenExpiresAt", t, false); expired.Key == "$expr" {
		filter = append(filter, bson.E{Key: "tokenExpiresAt", Value: bson.D{{Key: "$exists", Value: true}}}, expired)
	} else {
		filter = append(filter, expired)
	}
	opts := options.Find().SetSort(bson.D{{Key: "tokenExpiresAt", Value: 1}, {Key: "_id", Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit)).SetBatchSize(batchOf(limit))
	}
	byExpiry := func(a, b eventDoc) int {
		// The $lt filter matched only documents that have the field.
		return cmp.Or(cmp.Compare(*a.TokenExpiresAt, *b.TokenExpiresAt), cmp.Compare(a.ID, b.ID))
	}
	docs, err := findStatuses(ctx, s.eventsMajority, filter, tokenStatuses, limit, byExpiry, opts)
	if err != nil {
		return nil, fmt.Errorf("event find token expired policy %s: %w", policyID, err)
	}
	return eventModels(docs), nil
}

// EventCountHoldingTokens counts the policy's delivering and delivered
// events. Cross-tenant.
func (s *Store) EventCountHoldingTokens(ctx context.Context, policyID string) (int, error) {
	n, err := countStatuses(ctx, s.eventsMajority, bson.D{{Key: "policyId", Value: policyID}}, tokenStatuses, 0)
	if err != nil {
		return 0, fmt.Errorf("event count holding tokens policy %s: %w", policyID, err)
	}
	return n, nil
}

// EventCountWaiting counts the policy's pending, retrying and scheduled
// events with LaunchAt <= t.
func (s *Store) EventCountWaiting(ctx context.Context, policyID string, t time.Time) (int, error) {
	filter := bson.D{
		{Key: "policyId", Value: policyID},
		{Key: "launchAt", Value: bson.D{{Key: "$lte", Value: unixNano(t)}}},
	}
	n, err := countStatuses(ctx, s.events, filter, waitingStatuses, 0)
	if err != nil {
		return 0, fmt.Errorf("event count waiting policy %s: %w", policyID, err)
	}
	return n, nil
}

// EventDeleteFinishedBefore is the retention job (FerretDB has no TTL
// indexes): it removes at most limit released or cancelled events finished
// before t (all of them if limit <= 0). The ids are read first because
// DeleteMany has no limit; the delete repeats the condition so an event
// redriven meanwhile stays.
func (s *Store) EventDeleteFinishedBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	filter := bson.D{
		{Key: "status", Value: in(deletableStatuses)},
		{Key: "finishedAt", Value: bson.D{{Key: "$lt", Value: unixNano(t)}}},
	}
	if limit > 0 {
		type idOnly struct {
			ID string `bson:"_id"`
		}
		opts := options.Find().SetLimit(int64(limit)).SetProjection(bson.D{{Key: "_id", Value: 1}})
		docs, err := findAll[idOnly](ctx, s.events, filter, opts)
		if err != nil {
			return 0, fmt.Errorf("event delete finished before %s: %w", t.Format(time.RFC3339), err)
		}
		if len(docs) == 0 {
			return 0, nil
		}
		ids := make([]string, len(docs))
		for i, d := range docs {
			ids[i] = d.ID
		}
		filter = append(bson.D{{Key: "_id", Value: in(ids)}}, filter...)
	}
	unlock := s.lockCAS(s.events)
	res, err := s.events.DeleteMany(ctx, filter)
	unlock()
	if err != nil {
		return 0, fmt.Errorf("event delete finished before %s: %w", t.Format(time.RFC3339), interpretError(err))
	}
	return int(res.DeletedCount), nil
}

// EventCountByStatus counts a tenant's events per status with one $group
// over the (tenantId, _id) index.
func (s *Store) EventCountByStatus(ctx context.Context, tenantID string) (store.EventCounts, error) {
	counts, err := s.countByStatus(ctx, bson.D{{Key: "tenantId", Value: tenantID}})
	if err != nil {
		return nil, fmt.Errorf("event count by status %s: %w", tenantID, err)
	}
	return counts, nil
}
