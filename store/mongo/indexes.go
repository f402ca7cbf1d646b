package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Index builds stay off the start path. On a populated collection of a
// replica set an index build is two-phase: createIndexes returns only when
// every voting member has built it (the commit quorum), and an interrupted
// createIndexes (its maxTimeMS passing, the client going away) aborts the
// build (MongoDB manual, "Index Builds on Populated Collections"). Built
// within a start deadline, a large build would never finish: each start
// aborts it and the next one begins it again. So Open builds at once only
// the missing indexes of empty collections, which MongoDB creates in one
// step without a build (createIndexes on an empty collection), and hands
// the others to a background build that has a day for each index. The
// queries work meanwhile, on the indexes the previous version built.
// IndexStatus says what is still building (the application's /readyz shows
// it), and BuildIndexes builds everything in the foreground, for an
// operator who builds the indexes of a new version ahead of its rollout
// (schedulerd mongo-indexes).

// indexBuildTimeout bounds one createIndexes of the background build or of
// BuildIndexes: the driver turns a deadline into the command's maxTimeMS,
// and the operation timeout (60 s by default) would abort a large build.
const indexBuildTimeout = 24 * time.Hour

// indexRetryMax bounds the wait between attempts of a failed background
// build (a stepdown aborts it; a missing privilege fails it at once).
const (
	indexRetryFirst = 30 * time.Second
	indexRetryMax   = 10 * time.Minute
)

// superseded are indexes of earlier versions whose queries current ones
// serve, by collection: each is dropped once the index that covers it
// exists. Most are prefixes of their successors. The claim's non-partial
// (shard, status, launchAt, _id) covers (shard, status, launchAt); its
// partial variant covers only the waiting statuses, so where it is used
// the old index stays. The lane index gained the events' index in their
// fires after launchAt (the turns of store.CompareInLane); its
// predecessor's queries are the lane walk's, on the prefix the two
// share, and the lanes' finds, which now sort by the new one.
var superseded = map[string][]struct{ name, by string }{
	collEvents: {
		{"policy_status", "policy_status_launch"},
		{"shard_status_launch", "shard_status_launch_id"},
		{"shard_status_lane_launch_id", "shard_status_lane_launch_index_id"},
		{"shard_status_lane_launch_id_waiting", "shard_status_lane_launch_index_id_waiting"},
	},
}

// indexJob is one missing index.
type indexJob struct {
	coll  string
	model mongo.IndexModel
	// replaces is an index on the same keys dropped right before the
	// build (a TTL index's full predecessor, see ttlSpec.old); until the
	// new one is built the purge jobs are the only retention.
	replaces string
	// before runs right before the build: the fill of the field that a
	// new index is on (fillAllLanes before the lane index).
	before func(context.Context) error
}

func (j indexJob) String() string { return j.coll + "." + indexName(j.model) }

// indexBuild is the state of the background build.
type indexBuild struct {
	mu       sync.Mutex
	building []string // coll.name of the indexes not built yet
	err      error    // the last failure, nil after a success
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	done     chan struct{} // closed when the background build ends
}

// stop ends the background build (an index it was building is aborted
// and is built at the next start) and waits for it.
func (b *indexBuild) stop() {
	b.mu.Lock()
	cancel := b.cancel
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	b.wg.Wait()
}

// IndexStatus reports the indexes (collection.name) that the background
// build has not finished, and its last failure (nil if none since its last
// success). Both are empty once every index exists, and when Open was told
// to skip the indexes.
func (s *Store) IndexStatus() (building []string, err error) {
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	return slices.Clone(s.idx.building), s.idx.err
}

// IndexesDone returns a channel closed when the background build has built
// every index (or Close stopped it); it is closed at once if Open started
// none.
func (s *Store) IndexesDone() <-chan struct{} {
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	if s.idx.done == nil {
		s.idx.done = make(chan struct{})
		close(s.idx.done)
	}
	return s.idx.done
}

// startIndexes builds the missing indexes of empty collections and starts
// the background build of the others.
func (s *Store) startIndexes(ctx context.Context) error {
	jobs, err := s.missingIndexes(ctx)
	if err != nil {
		return err
	}
	var later []indexJob
	emptyColl := map[string]bool{}
	for _, j := range jobs {
		empty, seen := emptyColl[j.coll]
		if !seen {
			if empty, err = s.isEmpty(ctx, j.coll); err != nil {
				return err
			}
			emptyColl[j.coll] = empty
		}
		if !empty {
			later = append(later, j)
			continue
		}
		if err := s.createIndex(ctx, j); err != nil {
			return err
		}
	}
	if len(later) == 0 {
		return s.pruneSuperseded(ctx)
	}
	s.startBackground(later)
	return nil
}

// BuildIndexes builds every missing index and drops the superseded ones,
// waiting for each build (the commit quorum of a replica set) for up to a
// day unless ctx ends first. It is for an operator, ahead of a rollout;
// instances build in the background what is still missing when they start.
func (s *Store) BuildIndexes(ctx context.Context, progress func(index string)) error {
	jobs, err := s.missingIndexes(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if progress != nil {
			progress(j.String())
		}
		if err := s.createIndex(ctx, j); err != nil {
			return err
		}
	}
	return s.pruneSuperseded(ctx)
}

// startBackground builds jobs one after the other in a goroutine that Close
// stops, retrying a failed build after a growing wait.
func (s *Store) startBackground(jobs []indexJob) {
	ctx, cancel := context.WithCancel(context.Background())
	b := &s.idx
	b.mu.Lock()
	b.cancel = cancel
	b.done = make(chan struct{})
	for _, j := range jobs {
		b.building = append(b.building, j.String())
	}
	done := b.done
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer cancel()
		wait := indexRetryFirst
		for len(jobs) > 0 {
			err := s.createIndex(ctx, jobs[0])
			if ctx.Err() != nil {
				return
			}
			b.mu.Lock()
			b.err = err
			if err == nil {
				b.building = slices.DeleteFunc(b.building, func(n string) bool { return n == jobs[0].String() })
			}
			b.mu.Unlock()
			if err == nil {
				jobs, wait = jobs[1:], indexRetryFirst
				continue
			}
			s.opts.Logger.Warn().Err(err).Str("index", jobs[0].String()).Dur("retryIn", wait).
				Msg("building an index in the background failed; it is tried again")
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(2*wait, indexRetryMax)
		}
		if err := s.pruneSuperseded(ctx); err != nil && ctx.Err() == nil {
			s.opts.Logger.Warn().Err(err).Msg("dropping superseded indexes failed; the next start tries again")
		}
		close(done)
	}()
}

// missingIndexes lists every collection's indexes, brings the TTL
// indexes' retention to the configured one (syncTTL) and returns the
// indexes that do not exist, in a fixed order.
func (s *Store) missingIndexes(ctx context.Context) ([]indexJob, error) {
	all := indexSpecs(s.caps.partialIndexes)
	replaced := map[string]string{} // new name → old name
	if s.caps.ttl {
		for coll, m := range ttlSpecs(s.opts) {
			all[coll] = append(all[coll], m.model())
			replaced[m.name] = m.old
		}
	}
	colls := make([]string, 0, len(all))
	for coll := range all {
		colls = append(colls, coll)
	}
	sort.Strings(colls)
	var jobs []indexJob
	for _, coll := range colls {
		// Create only the missing indexes, one per call. FerretDB v1.24
		// panics (dropping the connection) on a createIndexes of two or more
		// indexes that all exist, and a createIndexes of an existing index
		// can block for good while other clients write; every start after
		// the first would hit one or the other.
		have := map[string]bool{}
		specs, err := s.db.Collection(coll).Indexes().ListSpecifications(ctx)
		if err != nil && !isNamespaceNotFound(err) {
			return nil, fmt.Errorf("list indexes on %s: %w", coll, interpretError(err))
		}
		for _, sp := range specs {
			have[sp.Name] = true
		}
		if err := s.syncTTL(ctx, coll, specs); err != nil {
			return nil, err
		}
		for _, m := range all[coll] {
			if !have[indexName(m)] {
				j := indexJob{coll: coll, model: m}
				if old := replaced[indexName(m)]; have[old] {
					j.replaces = old
				}
				if coll == collEvents && indexName(m) == indexName(laneIndex(s.caps.partialIndexes)) {
					j.before = s.fillAllLanes
				}
				if coll == collEvents && indexName(m) == indexName(turnsIndex(s.caps.partialIndexes)) {
					j.before = s.fillHeads
				}
				jobs = append(jobs, j)
			}
		}
	}
	return jobs, nil
}

// isEmpty reports whether coll has no documents (or does not exist), by
// its metadata count, which reads no documents.
func (s *Store) isEmpty(ctx context.Context, coll string) (bool, error) {
	n, err := s.db.Collection(coll).EstimatedDocumentCount(ctx)
	if err != nil && !isNamespaceNotFound(err) {
		return false, fmt.Errorf("count %s: %w", coll, interpretError(err))
	}
	return n == 0, nil
}

// createIndex builds one index, with indexBuildTimeout for a context
// without a deadline.
func (s *Store) createIndex(ctx context.Context, j indexJob) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, indexBuildTimeout)
		defer cancel()
	}
	if j.before != nil {
		if err := j.before(ctx); err != nil {
			return fmt.Errorf("before index %s: %w", j, err)
		}
	}
	if j.replaces != "" {
		err := s.db.RunCommand(ctx, bson.D{{Key: "dropIndexes", Value: j.coll}, {Key: "index", Value: j.replaces}}).Err()
		if err != nil && !isIndexNotFound(err) {
			return fmt.Errorf("drop index %s.%s (replaced by %s): %w", j.coll, j.replaces, j, interpretError(err))
		}
	}
	if _, err := s.db.Collection(j.coll).Indexes().CreateOne(ctx, j.model); err != nil {
		return fmt.Errorf("create index %s: %w", j, interpretError(err))
	}
	return nil
}

// pruneSuperseded drops the superseded indexes whose successor exists.
func (s *Store) pruneSuperseded(ctx context.Context) error {
	for coll, olds := range superseded {
		specs, err := s.db.Collection(coll).Indexes().ListSpecifications(ctx)
		if err != nil {
			if isNamespaceNotFound(err) {
				continue
			}
			return fmt.Errorf("list indexes on %s: %w", coll, interpretError(err))
		}
		have := map[string]bool{}
		for _, sp := range specs {
			have[sp.Name] = true
		}
		for _, o := range olds {
			if !have[o.name] || !have[o.by] {
				continue
			}
			err := s.db.RunCommand(ctx, bson.D{{Key: "dropIndexes", Value: coll}, {Key: "index", Value: o.name}}).Err()
			if err != nil && !isIndexNotFound(err) {
				return fmt.Errorf("drop index %s.%s (superseded by %s): %w", coll, o.name, o.by, interpretError(err))
			}
		}
	}
	return nil
}

// isIndexNotFound reports MongoDB's IndexNotFound (code 27): another
// instance dropped it first.
func isIndexNotFound(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && ce.Code == 27
}
