package mongo

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// In a lane of a policy the schedules take turns (store.ShareTurns): a
// claim reads the schedules whose earliest waiting event is due from the
// eventHeads collection, one document per (shard, status, lane, schedule)
// with that event's launchAt, and each schedule's events through the
// (shard, status, lane, scheduleId, launchAt, index, _id) index.
//
// A head may be early, never late, but for a write that failed between an
// event and its head:
//   - a write that makes an event waiting in a policy's lane (an insert, a
//     transition to pending or retrying) then lowers the head with $min and
//     bumps its seq with $inc (writeHeads);
//   - a claim moves a head only to what it read of the schedule's events,
//     after its own writes, by compare-and-set on the seq it read (and
//     bumps it), so a write or a claim that raced it either fails the set
//     or lowers the head after it;
//   - other ways out of the waiting statuses (cancels, expiries, purges)
//     leave their heads early, and the claims that meet them move them;
//   - the walk of the lanes reads each lane's earliest event: a schedule
//     of one without a head due (a write that failed after its event) gets
//     one there.

// headDoc is a schedule's head in a lane of a policy.
type headDoc struct {
	ID         string `bson:"_id"`
	Shard      int    `bson:"shard"`
	Status     string `bson:"status"`
	Lane       string `bson:"lane"`
	ScheduleID string `bson:"scheduleId"`
	LaunchAt   int64  `bson:"launchAt"`
	Seq        int64  `bson:"seq"`
}

func headID(shard int, status, lane, scheduleID string) string {
	return strconv.Itoa(shard) + laneSep + status + laneSep + lane + laneSep + scheduleID
}

// headsIndex is the claim's (shard, status, lane, launchAt, scheduleId)
// index on eventHeads.
func headsIndex() mongo.IndexModel {
	return mongo.IndexModel{Keys: bson.D{{Key: "shard", Value: 1}, {Key: "status", Value: 1}, {Key: "lane", Value: 1},
		{Key: "launchAt", Value: 1}, {Key: "scheduleId", Value: 1}}, Options: options.Index().SetName("shard_status_lane_launch_schedule")}
}

// turnsIndex is the (shard, status, lane, scheduleId, launchAt, index, _id)
// index of the events of a policy's lanes, partial on those if partial.
func turnsIndex(partial bool) mongo.IndexModel {
	keys := bson.D{{Key: "shard", Value: 1}, {Key: "status", Value: 1}, {Key: "lane", Value: 1}, {Key: "scheduleId", Value: 1},
		{Key: "launchAt", Value: 1}, {Key: "index", Value: 1}, {Key: "_id", Value: 1}}
	if !partial {
		return mongo.IndexModel{Keys: keys, Options: options.Index().SetName("shard_status_lane_schedule_launch_index_id")}
	}
	return mongo.IndexModel{Keys: keys, Options: options.Index().SetName("shard_status_lane_schedule_launch_index_id_waiting").
		SetPartialFilterExpression(bson.D{{Key: "status", Value: in(claimableStatuses)}, {Key: "policyId", Value: bson.D{{Key: "$gt", Value: ""}}}})}
}

// turnsIndexBuilding reports whether the background build has the turns
// index still to build: until it has, a policy's lane is claimed in the
// lane's order, as the version before turns did.
func (s *Store) turnsIndexBuilding() bool {
	name := collEvents + "." + indexName(turnsIndex(s.caps.partialIndexes))
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	return slices.Contains(s.idx.building, name)
}

// waitingHead is what a head is made of, as an event has it.
type waitingHead struct {
	Shard      int    `bson:"shard"`
	Status     string `bson:"status"`
	Lane       string `bson:"lane"`
	ScheduleID string `bson:"scheduleId"`
	PolicyID   string `bson:"policyId"`
	LaunchAt   int64  `bson:"launchAt"`
}

var waitingHeadProjection = bson.D{{Key: "shard", Value: 1}, {Key: "status", Value: 1}, {Key: "lane", Value: 1},
	{Key: "scheduleId", Value: 1}, {Key: "policyId", Value: 1}, {Key: "launchAt", Value: 1}}

func headOf(e *model.Event) waitingHead {
	return waitingHead{Shard: e.Shard, Status: string(e.Status), Lane: eventLane(e.TenantID, e.PolicyID, e.Priority),
		ScheduleID: e.ScheduleID, PolicyID: e.PolicyID, LaunchAt: unixNano(e.LaunchAt)}
}

// writeHeads lowers the heads of the waiting events of policies' lanes
// among ws to their launch times, in one unordered bulk write of upserts.
func (s *Store) writeHeads(ctx context.Context, ws []waitingHead) error {
	at := map[string]int{}
	var heads []waitingHead
	for _, w := range ws {
		if w.PolicyID == "" || w.Lane == "" || !slices.Contains(claimableStatuses, w.Status) {
			continue
		}
		id := headID(w.Shard, w.Status, w.Lane, w.ScheduleID)
		if i, ok := at[id]; ok {
			heads[i].LaunchAt = min(heads[i].LaunchAt, w.LaunchAt)
			continue
		}
		at[id] = len(heads)
		heads = append(heads, w)
	}
	if len(heads) == 0 {
		return nil
	}
	writes := make([]mongo.WriteModel, len(heads))
	ids := make([]string, len(heads))
	for i, h := range heads {
		ids[i] = headID(h.Shard, h.Status, h.Lane, h.ScheduleID)
		writes[i] = mongo.NewUpdateOneModel().SetUpsert(true).SetFilter(bson.D{{Key: "_id", Value: ids[i]}}).SetUpdate(lowerHead(h))
	}
	if err := s.bulkHeads(ctx, writes, ids); err != nil {
		return fmt.Errorf("write heads: %w", err)
	}
	return nil
}

// bulkHeads applies writes to eventHeads, the i-th to the head ids[i], in
// unordered bulk writes.
func (s *Store) bulkHeads(ctx context.Context, writes []mongo.WriteModel, ids []string) error {
	for lo, n := 0, s.bulkSize(len(writes)); lo < len(writes); lo += n {
		hi := min(lo+n, len(writes))
		unlock := s.lockCAS(s.heads, ids[lo:hi]...)
		_, err := s.heads.BulkWrite(ctx, writes[lo:hi], options.BulkWrite().SetOrdered(false))
		unlock()
		if err != nil {
			return interpretError(err)
		}
	}
	return nil
}

// lowerHead is the upsert of w's head.
func lowerHead(w waitingHead) bson.D {
	return bson.D{
		{Key: "$min", Value: bson.D{{Key: "launchAt", Value: w.LaunchAt}}},
		{Key: "$inc", Value: bson.D{{Key: "seq", Value: int64(1)}}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "shard", Value: w.Shard}, {Key: "status", Value: w.Status},
			{Key: "lane", Value: w.Lane}, {Key: "scheduleId", Value: w.ScheduleID}}},
	}
}

// eventHeads is writeHeads of events.
func (s *Store) eventHeads(ctx context.Context, es []*model.Event) error {
	ws := make([]waitingHead, 0, len(es))
	for _, e := range es {
		if e.PolicyID != "" {
			ws = append(ws, headOf(e))
		}
	}
	return s.writeHeads(ctx, ws)
}

// fillHeads writes the heads of every schedule with waiting events in a
// policy's lane before the turns index is built, a page of lanePage such
// events in _id order at a time (as fillAllLanes reads them): the claims
// that follow the build then take turns over the backlog that a previous
// version left.
func (s *Store) fillHeads(ctx context.Context) error {
	after := ""
	for {
		docs, err := findAll[struct {
			ID string      `bson:"_id"`
			W  waitingHead `bson:",inline"`
		}](ctx, s.events,
			bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}, {Key: "status", Value: in(claimableStatuses)},
				{Key: "policyId", Value: bson.D{{Key: "$gt", Value: ""}}}},
			options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(lanePage).SetBatchSize(lanePage).
				SetProjection(waitingHeadProjection))
		if err != nil {
			return fmt.Errorf("fill heads: %w", err)
		}
		ws := make([]waitingHead, len(docs))
		for i, d := range docs {
			ws[i] = d.W
		}
		if err := s.writeHeads(ctx, ws); err != nil {
			return fmt.Errorf("fill heads: %w", err)
		}
		if len(docs) < lanePage {
			return nil
		}
		after = docs[len(docs)-1].ID
	}
}

// turn is a schedule of a policy's lane as a claim takes its turns.
type turn struct {
	head headDoc
	got  []claimCand // its due events read, in the lane's order
	next *int64      // the launchAt of its first waiting event after got, if read
	end  bool        // every due event of it is in got
}

// headMove is the compare-and-set of a head after a claim.
type headMove struct {
	id     string
	seq    int64
	to     int64
	delete bool
}

// takeTurns returns take of the due events of l, a policy's lane, its
// schedules taking turns, and the moves of their heads to apply once the
// claim's writes are done: the due heads of each status in l (up to take
// each), the walk's earliest event's schedule added if its head is
// missing; then, in rounds, each schedule still with due events reads up
// to an equal share of what take leaves, until take are read or all.
func (s *Store) takeTurns(ctx context.Context, p *store.EventClaimParams, l *claimLane, take int) ([]claimCand, []headMove, error) {
	due := unixNano(p.DueBefore)
	var ts []*turn
	for i, st := range l.statuses {
		heads, err := findAll[headDoc](ctx, s.heads,
			bson.D{{Key: "shard", Value: p.Shard}, {Key: "status", Value: st}, {Key: "lane", Value: l.lane}, {Key: "launchAt", Value: bson.D{{Key: "$lt", Value: due}}}},
			options.Find().SetSort(bson.D{{Key: "launchAt", Value: 1}, {Key: "scheduleId", Value: 1}}).SetLimit(int64(take)).SetBatchSize(batchOf(take)))
		if err != nil {
			return nil, nil, fmt.Errorf("find heads: %w", err)
		}
		first := l.firsts[i]
		found := false
		for _, h := range heads {
			ts = append(ts, &turn{head: h})
			found = found || h.ScheduleID == first.ScheduleID
		}
		if !found {
			w := waitingHead{Shard: p.Shard, Status: st, Lane: l.lane, ScheduleID: first.ScheduleID, LaunchAt: first.LaunchAt}
			id := headID(p.Shard, st, l.lane, w.ScheduleID)
			var h headDoc
			unlock := s.lockCAS(s.heads, id)
			err := s.heads.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: id}}, lowerHead(w),
				options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&h)
			unlock()
			if err != nil {
				return nil, nil, fmt.Errorf("write head: %w", interpretError(err))
			}
			ts = append(ts, &turn{head: h})
		}
	}
	slices.SortStableFunc(ts, func(a, b *turn) int {
		return cmp.Or(cmp.Compare(a.head.LaunchAt, b.head.LaunchAt), cmp.Compare(a.head.ScheduleID, b.head.ScheduleID), cmp.Compare(a.head.Status, b.head.Status))
	})
	if err := s.readTurns(ctx, p, ts, take); err != nil {
		return nil, nil, err
	}
	read := make([]int, len(ts))
	for i, t := range ts {
		read[i] = len(t.got)
	}
	var out []claimCand
	var moves []headMove
	for i, n := range store.ShareTurns(read, take) {
		t := ts[i]
		out = append(out, t.got[:n]...)
		m := headMove{id: t.head.ID, seq: t.head.Seq}
		switch {
		case n < len(t.got):
			m.to = t.got[n].LaunchAt
		case !t.end:
			m.to = t.got[n-1].LaunchAt // more are due: the head stays early
		case t.next != nil:
			m.to = *t.next
		default:
			m.delete = true
		}
		if m.delete || m.to != t.head.LaunchAt {
			moves = append(moves, m)
		}
	}
	return out, moves, nil
}

// readTurns reads the schedules' due events in rounds (store.TurnRound),
// eight schedules at a time. A schedule's find reads one event past its
// share, which says whether it has more due and, if not, where its head
// goes.
func (s *Store) readTurns(ctx context.Context, p *store.EventClaimParams, ts []*turn, take int) error {
	due := unixNano(p.DueBefore)
	proj := bson.D{{Key: "status", Value: 1}, {Key: "fence", Value: 1}, {Key: "launchAt", Value: 1}, {Key: "index", Value: 1}}
	read, ended := make([]int, len(ts)), make([]bool, len(ts))
	for {
		for i, t := range ts {
			read[i], ended[i] = len(t.got), t.end
		}
		share := store.TurnRound(read, ended, take)
		if share == 0 {
			return nil
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		var mu sync.Mutex
		for _, t := range ts {
			if t.end {
				continue
			}
			g.Go(func() error {
				filter := bson.D{{Key: "shard", Value: p.Shard}, {Key: "status", Value: t.head.Status}, {Key: "lane", Value: t.head.Lane},
					{Key: "scheduleId", Value: t.head.ScheduleID}, {Key: "policyId", Value: bson.D{{Key: "$gt", Value: ""}}}}
				if len(t.got) > 0 {
					filter = append(filter, after(t.got[len(t.got)-1]))
				}
				docs, err := findAll[claimCand](gctx, s.events, filter,
					options.Find().SetSort(laneSort).SetLimit(int64(share+1)).SetBatchSize(batchOf(share+1)).SetProjection(proj))
				if err != nil {
					return fmt.Errorf("find schedule %s in lane: %w", t.head.ScheduleID, err)
				}
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, d := range docs {
					if d.LaunchAt >= due {
						t.next = &d.LaunchAt
						break
					}
					if n == share {
						break // more are due
					}
					t.got = append(t.got, d)
					n++
				}
				t.end = n < share || t.next != nil || len(docs) <= share
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
}

// after matches the events after c in the lane's order (launchAt, index,
// _id): a round goes on from where the last one stopped, whatever a
// concurrent claim or insert changed before it.
func after(c claimCand) bson.E {
	return bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "launchAt", Value: bson.D{{Key: "$gt", Value: c.LaunchAt}}}},
		bson.D{{Key: "launchAt", Value: c.LaunchAt}, {Key: "index", Value: bson.D{{Key: "$gt", Value: c.Index}}}},
		bson.D{{Key: "launchAt", Value: c.LaunchAt}, {Key: "index", Value: c.Index}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: c.ID}}}},
	}}
}

// moveHeads applies a claim's head moves, each a compare-and-set on the
// seq the claim read, in one unordered bulk write.
func (s *Store) moveHeads(ctx context.Context, moves []headMove) error {
	if len(moves) == 0 {
		return nil
	}
	writes := make([]mongo.WriteModel, len(moves))
	ids := make([]string, len(moves))
	for i, m := range moves {
		ids[i] = m.id
		filter := bson.D{{Key: "_id", Value: m.id}, {Key: "seq", Value: m.seq}}
		if m.delete {
			writes[i] = mongo.NewDeleteOneModel().SetFilter(filter)
		} else {
			writes[i] = mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(bson.D{
				{Key: "$set", Value: bson.D{{Key: "launchAt", Value: m.to}}}, {Key: "$inc", Value: bson.D{{Key: "seq", Value: int64(1)}}}})
		}
	}
	if err := s.bulkHeads(ctx, writes, ids); err != nil {
		return fmt.Errorf("move heads: %w", err)
	}
	return nil
}
