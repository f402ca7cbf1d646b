// Package mongo is the MongoDB driver of the schedulerd store (store.Driver)
// for deployments of many instances.
//
// It is written for the subset of MongoDB that replica sets, sharded
// clusters, Atlas, DocumentDB and FerretDB v1 share: no change streams, no
// aggregation beyond $match/$group. Every state change is one conditional
// single-document write (a compare-and-set on status, version or fence in
// the update's filter); multi-document operations are loops or unordered
// bulk writes of such writes and are safe to repeat after a crash. What
// only some servers have is used where Open finds it (serverCaps): a
// schedule and its children (and a one-off's first fire and events) in one
// transaction on a replica set, TTL
// indexes for retention (retention.go; the delete jobs stay for FerretDB),
// expiries judged by the server's clock (clock.go), partial indexes.
//
// Documents use the model ids as _id. Instants are stored as int64 Unix
// nanoseconds rather than BSON dates: BSON dates keep milliseconds, and fire
// times, launch times and fences of time must survive a round trip exactly
// (an event id is derived from its fire time, and callers compare what they
// wrote with what they read). Durations are int64 nanoseconds too.
package mongo

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"math"
	"os"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/schedulerd/schedulerd/store/mongo/internal/doclock"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Options configures Open. The zero value is usable and durable: writes
// are acknowledged by a majority of the replica set, the reads the services
// rely on go to the primary, and server selection and operations wait long
// enough for an election to end.
type Options struct {
	// Database is the database name. If empty, the database in the URI's
	// path is used, and "schedulerd" if the URI names none.
	Database string
	// ConnectTimeout bounds establishing a connection (default 10s).
	ConnectTimeout time.Duration
	// ServerSelectionTimeout bounds finding a usable server; when it passes
	// an operation fails with model.ErrUnavailable (default 30s, longer
	// than an election, so that a failover is waited out rather than
	// reported).
	ServerSelectionTimeout time.Duration
	// OperationTimeout bounds every operation whose context has no earlier
	// deadline, retries of retryable operations included (the driver's
	// client-side operation timeout; default 60s).
	OperationTimeout time.Duration
	// AllowWeakWriteConcern accepts a write concern in the URI weaker than
	// majority (w=0, w=1, any w but "majority", or journal=false). Without
	// it Open refuses such a URI: an acknowledged write that a failover
	// rolls back loses fences and token counts, and the throttle's bound
	// with them.
	AllowWeakWriteConcern bool
	// SkipIndexes makes Open neither check nor build indexes, for a
	// database whose indexes another instance or BuildIndexes (the
	// schedulerd mongo-indexes command) builds. Without it Open builds the
	// missing indexes of empty collections at once and those of populated
	// ones in the background (see indexes.go).
	SkipIndexes bool
	// Logger receives what the store reports outside a call: a background
	// index build that failed, a retention it could not set (default:
	// discarded).
	Logger zerolog.Logger
	// EventRetention is how long released and cancelled events are kept
	// (default 24h): on MongoDB the expireAfterSeconds of the TTL index on
	// their finishedDate. The handler's purge job deletes them too, and is
	// the only deletion on FerretDB, which has no TTL indexes.
	EventRetention time.Duration
	// IdempotencyRetention is how long idempotency records are kept
	// (default 24h), by the TTL index on their createdDate on MongoDB.
	IdempotencyRetention time.Duration
	// AuditRetention is how long audit records are kept (default 90
	// days), by the TTL index on their atDate on MongoDB.
	AuditRetention time.Duration
	// ClientClock judges lease and token expiries by the instants callers
	// pass even where the server could judge them by its own clock
	// (where Open's probe finds $$NOW, see serverCaps), for tests that drive time
	// with a fake clock.
	ClientClock bool
	// Owner names this process in the store's own lease (the orphan-children
	// clean-up runs on its holder only). Default: host name, process id and
	// a random suffix.
	Owner string
	// Clock is this process's clock (default: the real one): the orphan
	// clean-up's lease and grace are timed by it, and instants are moved
	// from it onto the server's clock (see clock.go).
	Clock clockwork.Clock
}

// Defaults of Options.
const (
	defaultConnectTimeout         = 10 * time.Second
	defaultServerSelectionTimeout = 30 * time.Second
	defaultOperationTimeout       = 60 * time.Second
	defaultRetention              = 24 * time.Hour
	// maxRetention is the largest expireAfterSeconds a TTL index takes
	// (a 32-bit count of seconds).
	maxRetention = math.MaxInt32 * time.Second
)

func (o *Options) setDefaults() {
	o.ConnectTimeout = cmp.Or(o.ConnectTimeout, defaultConnectTimeout)
	o.ServerSelectionTimeout = cmp.Or(o.ServerSelectionTimeout, defaultServerSelectionTimeout)
	o.OperationTimeout = cmp.Or(o.OperationTimeout, defaultOperationTimeout)
	o.EventRetention = cmp.Or(o.EventRetention, defaultRetention)
	o.IdempotencyRetention = cmp.Or(o.IdempotencyRetention, defaultRetention)
	o.AuditRetention = cmp.Or(o.AuditRetention, DefaultAuditRetention)
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Owner == "" {
		h, _ := os.Hostname()
		o.Owner = fmt.Sprintf("%s-%d-%s", h, os.Getpid(), bson.NewObjectID().Hex())
	}
}

func (o Options) validate() error {
	switch {
	case o.ConnectTimeout < 0:
		return fmt.Errorf("mongo options: ConnectTimeout must not be negative, got %s", o.ConnectTimeout)
	case o.ServerSelectionTimeout < 0:
		return fmt.Errorf("mongo options: ServerSelectionTimeout must not be negative, got %s", o.ServerSelectionTimeout)
	case o.OperationTimeout < 0:
		return fmt.Errorf("mongo options: OperationTimeout must not be negative, got %s", o.OperationTimeout)
	case o.EventRetention < time.Second || o.EventRetention > maxRetention:
		return fmt.Errorf("mongo options: EventRetention must be between 1s and %s, got %s", maxRetention, o.EventRetention)
	case o.IdempotencyRetention < time.Second || o.IdempotencyRetention > maxRetention:
		return fmt.Errorf("mongo options: IdempotencyRetention must be between 1s and %s, got %s", maxRetention, o.IdempotencyRetention)
	case o.AuditRetention < time.Second || o.AuditRetention > maxRetention:
		return fmt.Errorf("mongo options: AuditRetention must be between 1s and %s, got %s", maxRetention, o.AuditRetention)
	}
	return nil
}

// DefaultAuditRetention is how long audit records are kept unless
// Options.AuditRetention says otherwise.
const DefaultAuditRetention = 90 * 24 * time.Hour

// MaxRetention is the longest retention Options take: a TTL index counts
// its expiry in 32-bit seconds.
const MaxRetention = maxRetention

// ErrWeakWriteConcern is Open's refusal of a URI whose write concern is
// weaker than majority, without Options.AllowWeakWriteConcern.
var ErrWeakWriteConcern = errors.New("write concern weaker than majority")

// checkWriteConcern refuses a URI whose write concern is weaker than
// majority unless the options allow it.
func checkWriteConcern(cs *connstring.ConnString, o Options) error {
	if o.AllowWeakWriteConcern {
		return nil
	}
	switch {
	case cs.WNumberSet:
		return fmt.Errorf("mongo open: %w: the URI's w=%d: remove w from the URI, or set AllowWeakWriteConcern to accept it", ErrWeakWriteConcern, cs.WNumber)
	case cs.WString != "" && cs.WString != "majority":
		return fmt.Errorf("mongo open: %w: the URI's w=%s: remove w from the URI, or set AllowWeakWriteConcern to accept it", ErrWeakWriteConcern, cs.WString)
	case cs.JSet && !cs.J:
		return fmt.Errorf("mongo open: %w: the URI's journal=false makes acknowledged writes losable: remove it from the URI, or set AllowWeakWriteConcern to accept it", ErrWeakWriteConcern)
	}
	return nil
}

// Collection names.
const (
	collTenants     = "tenants"
	collAPIKeys     = "apiKeys"
	collIdempotency = "idempotency"
	collSchedules   = "schedules"
	collChildren    = "children"
	collWatermarks  = "watermarks"
	collFires       = "fires"
	collEvents      = "events"
	collHeads       = "eventHeads"
	collPolicies    = "policies"
	collLeases      = "leases"
	collCalendars   = "calendars"
	collAudit       = "audit"
)

// Store implements store.Driver on MongoDB.
type Store struct {
	client *mongo.Client
	db     *mongo.Database

	tenants, apiKeys, idempotency   *mongo.Collection
	schedules, children, watermarks *mongo.Collection
	fires, events, policies, leases *mongo.Collection
	calendars, audit                *mongo.Collection
	heads                           *mongo.Collection // see heads.go
	// eventsMajority and policiesMajority read at read concern majority
	// where the server has it (not FerretDB): the throttle's reconciliation
	// reads (PolicyGetByID, EventCountHoldingTokens, EventFindTokenExpired)
	// decide an overwrite of InUse, and at read concern local they could
	// count writes that a primary cut off from the majority will roll back
	// (MongoDB manual, "Read Concern majority"). Every write is majority
	// acknowledged, so such a read sees this process's own writes.
	eventsMajority, policiesMajority *mongo.Collection

	// locks serialise conflicting conditional writes when the server is
	// FerretDB v1, which evaluates an update's filter and writes the result
	// in two steps (find, then replace by _id), so two concurrent
	// compare-and-sets on one document can both succeed. MongoDB applies
	// filter and update atomically per document and needs no lock. The
	// locks are per document (see doclock): one lock for every write made
	// a lease renewal wait behind a takeover's thousands of event claims,
	// long enough under load to lose the lease and move the shard again.
	// They make one process correct against FerretDB (the local test
	// stack); several processes on one FerretDB need the test proxy, which
	// is why FerretDB is a test stand-in, not a deployment target.
	locks     doclock.Set
	serialise bool
	// caps is what the server supports, decided once at Open.
	caps serverCaps
	opts Options
	// orphanPage is the page of the orphan clean-up (orphanPage; tests
	// make it small).
	orphanPage int
	// orphanFence is the fence of orphanLease while this process holds it
	// (0: not held), for Close to release it.
	orphanMu    sync.Mutex
	orphanFence int64

	// idx is the background index build (indexes.go).
	idx indexBuild

	closeOnce sync.Once
	closeErr  error
}

var _ store.Driver = (*Store)(nil)

// Open connects to the MongoDB at uri, checks that it answers, probes what
// it supports (serverCaps) and creates the missing indexes the queries rely
// on: those of empty collections before it returns, those of populated
// ones in the background (see indexes.go). It returns model.ErrUnavailable
// if the server cannot be reached, ErrServerTooOld for a server older than
// MongoDB 4.4, and an error naming AllowWeakWriteConcern if the URI asks
// for a write concern weaker than majority. A URI without w gets
// w=majority, and one without readPreference gets primary.
func Open(ctx context.Context, uri string, opts Options) (*Store, error) {
	return open(ctx, uri, opts, nil)
}

// open is Open with a command monitor (nil: none), which tests use to count
// the commands of an operation.
func open(ctx context.Context, uri string, opts Options, mon *event.CommandMonitor) (*Store, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cs, err := connstring.ParseAndValidate(uri)
	if err != nil {
		return nil, fmt.Errorf("mongo open: parse uri: %w", err)
	}
	dbName := opts.Database
	if dbName == "" {
		dbName = cs.Database
	}
	if dbName == "" {
		dbName = "schedulerd"
	}
	if err := checkWriteConcern(cs, opts); err != nil {
		return nil, err
	}

	co := clientOptions(uri, cs, opts)
	if mon != nil {
		co.SetMonitor(mon)
	}
	client, err := mongo.Connect(co)
	if err != nil {
		return nil, fmt.Errorf("mongo open: connect: %w", interpretError(err))
	}
	s := &Store{client: client, db: client.Database(dbName), opts: opts, orphanPage: orphanPage}
	// Every collection but tenants and API keys is read right after it is
	// written (compare-and-sets, claims and their read-backs, leases,
	// idempotency records), so its reads go to the primary whatever the
	// URI's readPreference; tenants and keys, read on each request and
	// rarely written, follow the URI.
	primary := options.Collection().SetReadPreference(readpref.Primary())
	s.tenants = s.db.Collection(collTenants)
	s.apiKeys = s.db.Collection(collAPIKeys)
	s.idempotency = s.db.Collection(collIdempotency, primary)
	s.schedules = s.db.Collection(collSchedules, primary)
	s.children = s.db.Collection(collChildren, primary)
	s.watermarks = s.db.Collection(collWatermarks, primary)
	s.fires = s.db.Collection(collFires, primary)
	s.events = s.db.Collection(collEvents, primary)
	s.heads = s.db.Collection(collHeads, primary)
	s.policies = s.db.Collection(collPolicies, primary)
	s.leases = s.db.Collection(collLeases, primary)
	s.calendars = s.db.Collection(collCalendars, primary)
	s.audit = s.db.Collection(collAudit, primary)

	if err := s.init(ctx, opts); err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// clientOptions are the client's options: the URI's, then the timeouts of
// opts, and majority writes and primary reads where the URI sets neither.
func clientOptions(uri string, cs *connstring.ConnString, opts Options) *options.ClientOptions {
	co := options.Client().ApplyURI(uri).
		SetConnectTimeout(opts.ConnectTimeout).
		SetServerSelectionTimeout(opts.ServerSelectionTimeout).
		SetTimeout(opts.OperationTimeout).
		SetAppName("schedulerd")
	if !cs.WNumberSet && cs.WString == "" {
		wc := writeconcern.Majority()
		if cs.JSet {
			wc.Journal = &cs.J
		}
		co.SetWriteConcern(wc)
	}
	if cs.ReadPreference == "" {
		co.SetReadPreference(readpref.Primary())
	}
	return co
}

func (s *Store) init(ctx context.Context, opts Options) error {
	var info bson.M
	if err := s.db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		if isWireVersionTooOld(err) {
			return fmt.Errorf("mongo open: %w: %v", ErrServerTooOld, err)
		}
		return fmt.Errorf("mongo open: buildInfo: %w", interpretError(err))
	}
	var hello struct {
		SetName string `bson:"setName"`
	}
	if err := s.db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		// Servers before MongoDB 4.4.2 answer only the older name.
		if err := s.db.RunCommand(ctx, bson.D{{Key: "isMaster", Value: 1}}).Decode(&hello); err != nil {
			return fmt.Errorf("mongo open: hello: %w", interpretError(err))
		}
	}
	_, ferret := info["ferretdbVersion"]
	var probed probes
	if !ferret {
		version, _ := info["version"].(string)
		if err := checkVersion(version); err != nil {
			return fmt.Errorf("mongo open: %w", err)
		}
		var err error
		if probed, err = s.probe(ctx); err != nil {
			return fmt.Errorf("mongo open: %w", err)
		}
	}
	s.caps = decideCaps(ferret, hello.SetName, opts.ClientClock, probed)
	s.serialise = s.caps.ferret
	s.eventsMajority, s.policiesMajority = s.events, s.policies
	if !s.caps.ferret {
		maj := options.Collection().SetReadPreference(readpref.Primary()).SetReadConcern(readconcern.Majority())
		s.eventsMajority, s.policiesMajority = s.db.Collection(collEvents, maj), s.db.Collection(collPolicies, maj)
	}
	if opts.SkipIndexes {
		return nil
	}
	if err := s.fillEnds(ctx); err != nil {
		return fmt.Errorf("mongo open: %w", err)
	}
	if err := s.startIndexes(ctx); err != nil {
		return fmt.Errorf("mongo open: %w", err)
	}
	return nil
}

// ServerClock reports whether expiries are judged by the server's clock.
func (s *Store) ServerClock() bool { return s.caps.serverClock }

// RetentionByTTL reports whether the server deletes released and cancelled
// events, idempotency records and member leases by TTL indexes, so that
// the purge jobs are only a backstop (see retention.go).
func (s *Store) RetentionByTTL() bool { return s.caps.ttl }

// Transactions reports whether a schedule and its children, and a
// one-off's create with its fires (ScheduleCreateMany), are written in
// one transaction.
func (s *Store) Transactions() bool { return s.caps.transactions }

// indexSpecs are the indexes the queries of this package use. Uniqueness
// that the contract promises (API key hash, policy name per tenant,
// idempotency key per tenant) is enforced by unique indexes rather than by
// read-then-write, which would race.
//
// An index whose keys or options change gets a new name: creation skips an
// existing name, so changed keys under an old name would never build.
// partial selects the partial variants (where Open's probe finds them).
func indexSpecs(partial bool) map[string][]mongo.IndexModel {
	idx := func(name string, unique bool, keys ...string) mongo.IndexModel {
		d := bson.D{}
		for _, k := range keys {
			d = append(d, bson.E{Key: k, Value: 1})
		}
		o := options.Index().SetName(name)
		if unique {
			o.SetUnique(true)
		}
		return mongo.IndexModel{Keys: d, Options: o}
	}
	specs := map[string][]mongo.IndexModel{
		collAPIKeys: {
			idx("hash_unique", true, "hash"),
			idx("tenant_created", false, "tenantId", "createdAt"),
		},
		collIdempotency: {
			idx("tenant_key_unique", true, "tenantId", "key"),
			idx("created", false, "createdAt"),
		},
		collSchedules: {
			idx("tenant_id", false, "tenantId", "_id"),
			// A list by one label ("key=value", or a "key=" prefix) in id
			// order; further labels are filtered.
			idx("tenant_labels_id", false, "tenantId", "labels", "_id"),
			idx("tenant_policy", false, "tenantId", "policyId"),
			// Calendar deletion's count of the schedules naming one.
			idx("tenant_calendars", false, "tenantId", "excludeCalendars"),
			// The quota's count of schedules that are not completed.
			idx("tenant_state", false, "tenantId", "state"),
			// ScheduleComplete and ScheduleDeleteCompleted.
			idx("ends_id", false, "endsAt", "_id"),
			idx("completed", false, "completedAt"),
			// ScheduleResumeDue.
			idx("resume_id", false, "resumeAt", "_id"),
			// ScheduleIntervalDue: the emitter's scan of interval schedules.
			idx("partition_interval_id", false, "partition", "intervalDue", "_id"),
			// ScheduleListAfter: the schedules that fire after another.
			idx("after_id", false, "after.scheduleId", "_id"),
		},
		collChildren: {
			// The emitter's scan: eligible keys of one partition and timezone.
			idx("partition_tz_expr_minute", false, "partition", "timezone", "launchExpression", "minute"),
			idx("schedule_version", false, "scheduleId", "scheduleVersion"),
			idx("timezone", false, "timezone"),
		},
		collFires: {
			idx("schedule_firetime", false, "scheduleId", "fireTime"),
			// The emitter's resume scan: fires still being emitted.
			idx("remaining", false, "remaining"),
			// The finisher's scan: watched fires not finished yet.
			idx("watching_id", false, "watching", "_id"),
			// The deadline check: open deadlines, earliest first.
			idx("deadline_open_id", false, "deadlineOpen", "_id"),
		},
		collEvents: {
			// The handler's takeover: scheduled events under another fence, which
			// are few, without reading through the owner's own backlog.
			idx("shard_status_fence", false, "shard", "status", "fence"),
			idx("fire_status", false, "fireId", "status"),
			idx("schedule", false, "scheduleId"),
			idx("tenant_id", false, "tenantId", "_id"),
			// The retention job: finished events by age.
			idx("status_finished", false, "status", "finishedAt"),
			// The claim's walk of the lanes and its finds in each lane,
			// equality on shard, status and lane, range on launchAt, sorted
			// by (launchAt, _id) (see claim.go); on MongoDB only the waiting
			// events are in the index.
			laneIndex(partial),
			// A policy's lanes: each schedule's waiting events (heads.go).
			turnsIndex(partial),
			// The claim in launch order of the previous version, which its
			// instances use during a rolling upgrade and this one while the
			// lane index is being built.
			claimIndex(partial),
			// The throttle: waiting events of a policy by launch time
			// (EventCountWaiting), token holders by expiry, sorted by
			// (tokenExpiresAt, _id) (EventFindTokenExpired).
			idx("policy_status_launch", false, "policyId", "status", "launchAt"),
			idx("policy_status_token_id", false, "policyId", "status", "tokenExpiresAt", "_id"),
			// A fire's latest finish (EventLastFinished).
			idx("fire_finished", false, "fireId", "finishedAt"),
		},
		collHeads: {
			headsIndex(),
		},
		collPolicies: {
			idx("tenant_name_unique", true, "tenantId", "name"),
		},
		collCalendars: {
			idx("tenant_id", false, "tenantId", "_id"),
		},
		collAudit: {
			idx("tenant_id", false, "tenantId", "_id"),
			idx("object_id", false, "objectId", "_id"),
			// The retention job (AuditDeleteBefore), oldest first.
			idx("at", false, "at"),
		},
	}
	if partial {
		// Events of one queue shard and status that are not waiting: the
		// partial claim index does not have them (see superseded).
		specs[collEvents] = append(specs[collEvents], idx("shard_status_launch", false, "shard", "status", "launchAt"))
	}
	return specs
}

// claimIndex is the claim's (shard, status, launchAt, _id) index, partial
// on the waiting statuses if partial.
func claimIndex(partial bool) mongo.IndexModel {
	keys := bson.D{{Key: "shard", Value: 1}, {Key: "status", Value: 1}, {Key: "launchAt", Value: 1}, {Key: "_id", Value: 1}}
	if !partial {
		return mongo.IndexModel{Keys: keys, Options: options.Index().SetName("shard_status_launch_id")}
	}
	return mongo.IndexModel{Keys: keys, Options: options.Index().SetName("shard_status_launch_id_waiting").
		SetPartialFilterExpression(bson.D{{Key: "status", Value: in(waitingStatuses)}})}
}

// indexName returns the name an index model sets, or "".
func indexName(m mongo.IndexModel) string {
	if m.Options == nil {
		return ""
	}
	var o options.IndexOptions
	for _, set := range m.Options.Opts {
		if err := set(&o); err != nil {
			return ""
		}
	}
	if o.Name == nil {
		return ""
	}
	return *o.Name
}

// isNamespaceNotFound reports whether err is MongoDB's NamespaceNotFound
// (code 26), which listIndexes answers for a collection not created yet.
func isNamespaceNotFound(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && ce.Code == 26
}

// Ping returns nil when the primary answers, else model.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx, readpref.Primary()); err != nil {
		return fmt.Errorf("mongo ping: %w", unavailable(err))
	}
	return nil
}

// Close releases the orphan clean-up's lease if this process holds it, so
// that another instance takes the clean-up over at its next pass rather
// than after the lease's ttl, and disconnects the client. Safe to call
// twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.idx.stop()
		var errs []error
		if err := s.releaseOrphanLease(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := s.client.Disconnect(ctx); err != nil {
			errs = append(errs, fmt.Errorf("mongo close: %w", interpretError(err)))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// ferretBulkMax bounds the statements of one update command sent to
// FerretDB v1, which holds a backend connection for each statement of a
// command until the whole command ends (and one more for each write). One
// claim of 250 events as a single command took every connection of its
// pool (100 on SQLite, 50 on PostgreSQL by default) and then waited for
// itself for good, and every other client with it; commands in flight at
// once share the pool the same way, so clients of a FerretDB also keep
// their own pool small (maxPoolSize in the URI).
const ferretBulkMax = 10

// bulkSize is how many statements of n go in one update command: all of
// them against MongoDB, ferretBulkMax against FerretDB.
func (s *Store) bulkSize(n int) int {
	if s.serialise {
		return max(min(n, ferretBulkMax), 1)
	}
	return max(n, 1)
}

// lockCAS serialises a conditional write against FerretDB with the others
// on the same documents of coll (ids; none: any document of coll, see
// locks) and is a no-op against MongoDB. The returned function unlocks.
func (s *Store) lockCAS(coll *mongo.Collection, ids ...string) func() {
	if !s.serialise {
		return func() {}
	}
	h := s.locks.Lock(coll.Name(), ids...)
	return func() { s.locks.Unlock(h) }
}

// interpretError translates driver errors to the model's sentinels at the
// edge, like river's interpretError: no document → ErrNotFound, duplicate key
// → ErrConflict, anything that says the server could not be reached, did not
// answer in time or could not confirm the write (see isUnavailable) →
// ErrUnavailable, with ErrNotApplied when the operation never reached a
// server. The original error stays in the chain for logs and errors.As.
func interpretError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return model.ErrNotFound
	case mongo.IsDuplicateKeyError(err) && !isUnavailable(err):
		return fmt.Errorf("%w: %w", model.ErrConflict, err)
	case errors.Is(err, errMayHaveApplied):
		return unavailable(err)
	case notSent(err):
		return fmt.Errorf("%w: %w: %w", model.ErrUnavailable, model.ErrNotApplied, err)
	case isUnavailable(err):
		return unavailable(err)
	}
	return err
}

func unavailable(err error) error {
	if errors.Is(err, model.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", model.ErrUnavailable, err)
}

// errMayHaveApplied marks the error of a transaction whose callback ran
// (withTxn): its commit may have applied, whatever the last error says.
var errMayHaveApplied = errors.New("the transaction may have committed")

// notSent reports errors of operations that never reached a server (no
// server could be selected, or the client was closed): they did not apply.
func notSent(err error) bool {
	var sse topology.ServerSelectionError
	return errors.As(err, &sse) || errors.Is(err, mongo.ErrClientDisconnected)
}

// unavailableCodes are the server error codes of a replica set in
// transition, an unreachable member or an operation cut short: the operation
// may be retried, and a write may or may not have applied.
var unavailableCodes = []int{
	6,     // HostUnreachable
	7,     // HostNotFound
	43,    // CursorNotFound (a failover or an idle timeout dropped the cursor)
	50,    // MaxTimeMSExpired
	64,    // WriteConcernFailed (applied on the primary, not confirmed)
	89,    // NetworkTimeout
	91,    // ShutdownInProgress
	133,   // FailedToSatisfyReadPreference (no member fits, during an election)
	134,   // ReadConcernMajorityNotAvailableYet (a member just started)
	175,   // QueryPlanKilled (a yield met a stepdown or a dropped index)
	189,   // PrimarySteppedDown
	237,   // CursorKilled (a stepdown kills the cursors)
	262,   // ExceededTimeLimit
	9001,  // SocketException
	10058, // LegacyNotPrimary
	10107, // NotWritablePrimary
	11600, // InterruptedAtShutdown
	11601, // Interrupted
	11602, // InterruptedDueToReplStateChange
	13435, // NotPrimaryNoSecondaryOk
	13436, // NotPrimaryOrSecondary
}

// unavailableLabels are the error labels of operations worth retrying:
// the retryable-writes and transactions labels, an ambiguous commit, and
// the overload labels MongoDB 8 gives when it sheds load (Atlas answers
// them too).
var unavailableLabels = []string{
	"RetryableWriteError", "TransientTransactionError", "UnknownTransactionCommitResult",
	"SystemOverloadedError", "RetryableError",
}

// isUnavailable reports whether err says the server could not be reached,
// did not answer in time, was changing primaries, or could not confirm a
// write: codes of unavailableCodes in a command error, in a write error or
// in a write-concern error, the labels of unavailableLabels, network errors
// and deadlines.
func isUnavailable(err error) bool {
	var sse topology.ServerSelectionError
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, mongo.ErrClientDisconnected) || errors.As(err, &sse) {
		return true
	}
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	for _, label := range unavailableLabels {
		if se.HasErrorLabel(label) {
			return true
		}
	}
	for _, code := range unavailableCodes {
		if se.HasErrorCode(code) {
			return true
		}
	}
	return false
}
