package mongo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/store"
)

// An event's lane is its (tenant, policy, priority), which EventClaimDue
// shares a claim over (store.ShareClaim). Each event document carries it
// as one string field, lane, written at insert, so that the claim index
// (shard, status, lane, launchAt, index, _id) holds each lane's waiting
// events together in the order the claim takes them
// (store.CompareInLane): the claim walks the lanes with one query each (a
// skip scan, dueLanes) and reads of each lane no more events than it
// counts and takes, whatever the backlog behind them.

// laneSep joins a lane's parts. Ids are printable (a prefix and the
// IDText of their bytes), so a control character cannot occur in them
// and every lane string names exactly one (tenant, policy, priority).
const laneSep = "\x1f"

// eventLane is the lane field of an event.
func eventLane(tenantID, policyID string, priority int) string {
	return tenantID + laneSep + policyID + laneSep + strconv.Itoa(priority)
}

// laneIndex is the claim's (shard, status, lane, launchAt, index, _id)
// index, partial on the waiting statuses if partial.
func laneIndex(partial bool) mongo.IndexModel {
	keys := bson.D{{Key: "shard", Value: 1}, {Key: "status", Value: 1}, {Key: "lane", Value: 1},
		{Key: "launchAt", Value: 1}, {Key: "index", Value: 1}, {Key: "_id", Value: 1}}
	if !partial {
		return mongo.IndexModel{Keys: keys, Options: options.Index().SetName("shard_status_lane_launch_index_id")}
	}
	return mongo.IndexModel{Keys: keys, Options: options.Index().SetName("shard_status_lane_launch_index_id_waiting").
		SetPartialFilterExpression(bson.D{{Key: "status", Value: in(waitingStatuses)}})}
}

// laneIndexBuilding reports whether the background build has the lane
// index still to build: until it has, the claim takes the due events in
// launch order through the (shard, status, launchAt, _id) index of the
// previous version, as that version did, because a walk of the lanes
// without their index would read the whole backlog for each lane.
func (s *Store) laneIndexBuilding() bool {
	name := collEvents + "." + indexName(laneIndex(s.caps.partialIndexes))
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	return slices.Contains(s.idx.building, name)
}

// byLaunch orders a claim's candidates: earliest launchAt, then _id.
func byLaunch(a, b claimCand) int {
	return cmp.Or(cmp.Compare(a.LaunchAt, b.LaunchAt), cmp.Compare(a.ID, b.ID))
}

// inLane orders a lane's candidates as the lane index does.
func inLane(a, b claimCand) int {
	return cmp.Or(cmp.Compare(a.LaunchAt, b.LaunchAt), cmp.Compare(a.Index, b.Index), cmp.Compare(a.ID, b.ID))
}

var (
	launchSort = bson.D{{Key: "launchAt", Value: 1}, {Key: "_id", Value: 1}}
	laneSort   = bson.D{{Key: "launchAt", Value: 1}, {Key: "index", Value: 1}, {Key: "_id", Value: 1}}
)

// claimFind is the find of at most limit claim candidates in sort order,
// all in the first batch.
func claimFind(limit int, sort bson.D) *options.FindOptionsBuilder {
	return options.Find().
		SetSort(sort).
		SetLimit(int64(limit)).SetBatchSize(batchOf(limit)).
		SetProjection(bson.D{{Key: "status", Value: 1}, {Key: "fence", Value: 1}, {Key: "launchAt", Value: 1}, {Key: "index", Value: 1}})
}

// dueFilter matches the shard's events with launchAt before p.DueBefore.
func dueFilter(p *store.EventClaimParams) bson.D {
	return bson.D{
		{Key: "shard", Value: p.Shard},
		{Key: "launchAt", Value: bson.D{{Key: "$lt", Value: unixNano(p.DueBefore)}}},
	}
}

// claimByLaunch returns at most limit due candidates of the shard in
// launch order, those of p.SkipPolicies left out.
func (s *Store) claimByLaunch(ctx context.Context, p *store.EventClaimParams, limit int) ([]claimCand, error) {
	filter := dueFilter(p)
	if len(p.SkipPolicies) > 0 {
		filter = append(filter, bson.E{Key: "policyId", Value: bson.D{{Key: "$nin", Value: p.SkipPolicies}}})
	}
	due, err := findStatuses(ctx, s.events, filter, claimableStatuses, limit, byLaunch, claimFind(limit, launchSort))
	if err != nil {
		return nil, fmt.Errorf("find due: %w", err)
	}
	return due, nil
}

// claimLane is a lane with due events as dueLanes found it.
type claimLane struct {
	store.ClaimLane
	lane string
	// statuses are the claimable statuses it has due events in, firsts
	// the walk's earliest event of it in each.
	statuses []string
	firsts   []laneHead
}

// claimByLanes returns at most limit due candidates of the shard shared
// over their lanes by store.ShareClaim, each lane's first (inLane): the
// lanes' walk (dueLanes), then, if more than one lane is due, a count of
// each lane's due events up to limit in each status it has them in, and a
// find of each lane's take in each of those statuses; in a policy's lane,
// the schedules' turns (takeTurns), whose head moves it returns too.
func (s *Store) claimByLanes(ctx context.Context, p *store.EventClaimParams, limit int) ([]claimCand, []headMove, error) {
	lanes, err := s.dueLanes(ctx, p, limit)
	if err != nil {
		return nil, nil, err
	}
	if len(lanes) == 0 {
		return nil, nil, nil
	}
	laneFilter := func(l *claimLane) bson.D {
		return append(dueFilter(p), bson.E{Key: "lane", Value: l.lane})
	}
	shares := make([]store.ClaimLane, len(lanes))
	for i := range lanes {
		l := &lanes[i]
		if len(lanes) == 1 {
			l.Due = limit // all it has, up to limit: the find says how many
		} else if l.Due, err = countStatuses(ctx, s.events, laneFilter(l), l.statuses, limit); err != nil {
			return nil, nil, fmt.Errorf("count lane: %w", err)
		}
		l.Due = min(l.Due, limit)
		shares[i] = l.ClaimLane
	}
	var out []claimCand
	var moves []headMove
	turns := !s.turnsIndexBuilding()
	for i, take := range store.ShareClaim(shares, limit) {
		if take == 0 {
			continue
		}
		l := &lanes[i]
		if l.PolicyID != "" && turns {
			got, m, err := s.takeTurns(ctx, p, l, take)
			if err != nil {
				return nil, nil, fmt.Errorf("take turns in lane: %w", err)
			}
			out, moves = append(out, got...), append(moves, m...)
			continue
		}
		got, err := findStatuses(ctx, s.events, laneFilter(l), l.statuses, take, inLane, claimFind(take, laneSort))
		if err != nil {
			return nil, nil, fmt.Errorf("find lane: %w", err)
		}
		out = append(out, got...)
	}
	return out, moves, nil
}

// laneHead is the first event of a lane in (lane, launchAt) order.
type laneHead struct {
	Lane       string `bson:"lane"`
	TenantID   string `bson:"tenantId"`
	PolicyID   string `bson:"policyId"`
	Priority   int    `bson:"priority"`
	LaunchAt   int64  `bson:"launchAt"`
	ScheduleID string `bson:"scheduleId"`
}

// dueLanes walks the lanes of the shard's pending and retrying events
// (a skip scan of the lane index): per status, one find of the first event
// whose lane sorts after the last one seen, sorted by (lane, launchAt), so
// that its launchAt is the lane's earliest and says whether the lane has
// due events. Lanes of p.SkipPolicies are passed over. Events written
// before lanes were have none and come first (a missing field sorts as
// null, before any string); the due ones are given theirs (fillLanes) and
// the walk goes on past them.
func (s *Store) dueLanes(ctx context.Context, p *store.EventClaimParams, limit int) ([]claimLane, error) {
	due := unixNano(p.DueBefore)
	var lanes []claimLane
	byLane := map[string]int{}
	find := options.FindOne().
		SetSort(bson.D{{Key: "lane", Value: 1}, {Key: "launchAt", Value: 1}}).
		SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "lane", Value: 1}, {Key: "tenantId", Value: 1},
			{Key: "policyId", Value: 1}, {Key: "priority", Value: 1}, {Key: "launchAt", Value: 1}, {Key: "scheduleId", Value: 1}})
	for _, st := range claimableStatuses {
		var after *string
		for {
			filter := bson.D{{Key: "shard", Value: p.Shard}, {Key: "status", Value: st}}
			if after != nil {
				filter = append(filter, bson.E{Key: "lane", Value: bson.D{{Key: "$gt", Value: *after}}})
			}
			var h laneHead
			err := s.events.FindOne(ctx, filter, find).Decode(&h)
			if errors.Is(err, mongo.ErrNoDocuments) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("walk lanes: %w", interpretError(err))
			}
			if h.Lane == "" { // written before lanes: none sorts lower
				if h.LaunchAt < due {
					if err := s.fillLanes(ctx, p, st, limit); err != nil {
						return nil, err
					}
				}
				after = new(string) // every lane sorts after ""
				continue
			}
			after = &h.Lane
			if h.LaunchAt >= due || slices.Contains(p.SkipPolicies, h.PolicyID) {
				continue
			}
			i, ok := byLane[h.Lane]
			if !ok {
				i = len(lanes)
				byLane[h.Lane] = i
				lanes = append(lanes, claimLane{lane: h.Lane,
					ClaimLane: store.ClaimLane{TenantID: h.TenantID, PolicyID: h.PolicyID, Priority: h.Priority}})
			}
			lanes[i].statuses = append(lanes[i].statuses, st)
			lanes[i].firsts = append(lanes[i].firsts, h)
		}
	}
	return lanes, nil
}

// laneless is an event without a lane, as the fills read it.
type laneless struct {
	ID       string `bson:"_id"`
	TenantID string `bson:"tenantId"`
	PolicyID string `bson:"policyId"`
	Priority int    `bson:"priority"`
}

// lanelessProjection reads what an event's lane is made of.
var lanelessProjection = bson.D{{Key: "tenantId", Value: 1}, {Key: "policyId", Value: 1}, {Key: "priority", Value: 1}}

// fillLanes gives the earliest limit due events of status st that have no
// lane (written by a version before lanes) theirs. If there were more, the
// claim still finds limit due events in lanes, and a later claim fills the
// next ones.
func (s *Store) fillLanes(ctx context.Context, p *store.EventClaimParams, st string, limit int) error {
	filter := append(dueFilter(p), bson.E{Key: "status", Value: st}, bson.E{Key: "lane", Value: nil})
	docs, err := findAll[laneless](ctx, s.events, filter, options.Find().
		SetSort(bson.D{{Key: "launchAt", Value: 1}, {Key: "_id", Value: 1}}).
		SetLimit(int64(limit)).SetBatchSize(batchOf(limit)).SetProjection(lanelessProjection))
	if err != nil {
		return fmt.Errorf("find events without a lane: %w", err)
	}
	return s.setLanes(ctx, docs)
}

// lanePage is how many events without a lane fillAllLanes reads at once.
const lanePage = 1000

// fillAllLanes gives every event without a lane its own, in pages in _id
// order (each page a range of the _id index, so that the whole fill reads
// the collection once), before the lane index is built: the claims that
// follow the build then share the backlog a previous version left over
// its lanes. Events that instances of that version write meanwhile get
// theirs from the claims (fillLanes).
func (s *Store) fillAllLanes(ctx context.Context) error {
	after := ""
	for {
		docs, err := findAll[laneless](ctx, s.events,
			bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}, {Key: "lane", Value: nil}},
			options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(lanePage).SetBatchSize(lanePage).
				SetProjection(lanelessProjection))
		if err != nil {
			return fmt.Errorf("find events without a lane: %w", err)
		}
		if err := s.setLanes(ctx, docs); err != nil {
			return err
		}
		if len(docs) < lanePage {
			return nil
		}
		after = docs[len(docs)-1].ID
	}
}

// setLanes writes the lanes of docs, one UpdateMany per lane and chunk of
// ids, each document only if it still has no lane.
func (s *Store) setLanes(ctx context.Context, docs []laneless) error {
	var order []string
	ids := map[string][]string{}
	for _, d := range docs {
		l := eventLane(d.TenantID, d.PolicyID, d.Priority)
		if _, ok := ids[l]; !ok {
			order = append(order, l)
		}
		ids[l] = append(ids[l], d.ID)
	}
	chunk := inBatch
	if s.serialise {
		chunk = ferretClaimChunk
	}
	for _, l := range order {
		for part := range slices.Chunk(ids[l], chunk) {
			unlock := s.lockCAS(s.events, part...)
			_, err := s.events.UpdateMany(ctx,
				bson.D{{Key: "_id", Value: in(part)}, {Key: "lane", Value: nil}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "lane", Value: l}}}})
			unlock()
			if err != nil {
				return fmt.Errorf("fill lanes: %w", interpretError(err))
			}
		}
	}
	return nil
}
