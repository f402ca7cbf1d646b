// Package embedded is the zero-setup store.Driver: one data directory, one
// process, no server.
//
// It is built on bbolt (go.etcd.io/bbolt), a pure-Go B+tree with serialisable
// read-write transactions that fsync on commit. Transactions make the
// contract's compare-and-set writes and the secondary indexes trivially
// atomic: a row and every index entry that points at it change in the same
// commit, so a kill -9 can never leave an index pointing at a missing or
// stale row, and anything a method acknowledged is on disk.
// docs/benchmarks.md (Stores) records the measurements behind choosing bbolt over
// pebble.
//
// Layout: one bucket per kind of row (schedules and fires in the binary
// codec of rowcodec.go, events as evtx.go describes, the others JSON) and
// one bucket per secondary index. Index keys are order-preserving byte strings (big-endian
// integers with the sign bit flipped, NUL-terminated strings) so that every
// scan of the contract is a prefix seek; see keys.go. A one-off saved with
// its fire and event is one row with two index entries until its event
// first changes (oneevent.go).
//
// The layout is versioned (layoutCurrent, recorded in the meta bucket) and
// frozen: a change that this version would misread raises the version and
// comes with a numbered migration from the one before, in a file of its
// own with its own test (migrate.go). Open refuses a directory whose
// layout no migration leads from.
package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Options tunes the embedded store. The zero value is ready to use.
//
// There is deliberately no option to skip fsync: the contract promises that
// an acknowledged write survives a crash.
type Options struct {
	// LockTimeout is how long Open waits for another process to release the
	// data directory. Zero waits one second; negative waits forever.
	LockTimeout time.Duration
	// BatchDelay is an extra wait before each group commit of the small
	// concurrent writes (claims, event transitions, tokens, leases), to
	// gather more of them into one commit. Zero (the default) waits for
	// nothing: writes that arrive while a commit is syncing share the next
	// commit anyway (group commit), and a lone write commits at once.
	BatchDelay time.Duration
	// InitialMmapSize pre-sizes the memory map (bytes) so that a growing
	// database does not block readers while it remaps. Zero lets bbolt grow
	// it on demand.
	InitialMmapSize int
	// ReserveBytes is the disk space the store file keeps allocated past
	// its data, so that deliveries and releases go on when the disk is
	// full (see reserve). Zero takes DefaultReserveBytes; negative keeps
	// none. Linux only.
	ReserveBytes int64
	// TokenKeySecrets seal the key release tokens are derived from
	// (token.go): it is kept sealed under the first, and a key sealed under
	// another one (a rotation) opens and is sealed again under the first.
	// None: kept in clear (a sealed key is then not used). The runtime
	// passes the signing secrets.
	TokenKeySecrets [][]byte

	// groupedOneOffs stores every event in a group, never in its
	// one-off's row (impliesEvent): tests compare the two forms.
	groupedOneOffs bool
	// indexedOneOffs gives every one-off's child a children entry, never
	// leaving it to the row (impliesChild): tests compare the two forms.
	indexedOneOffs bool
}

// fileName is the bbolt file inside the data directory.
const fileName = "schedulerd.db"

// Store is the embedded driver. It is safe for concurrent use.
type Store struct {
	db      *bolt.DB
	group   groupCommit
	closed  atomic.Bool
	names   [dictKinds]codeNames // committed dictionary codes (dict.go)
	grouped bool                 // Options.groupedOneOffs
	indexed bool                 // Options.indexedOneOffs
	tokens  *tokenKey            // derives release tokens (token.go)
	reserve *reserve             // disk space for writes on a full disk (reserve.go)
}

var _ store.Driver = (*Store)(nil)

// Bucket names. Row buckets hold values keyed by id (schedules by a packed
// form of it; see the package doc);
// the others are secondary indexes whose keys are built in keys.go.
var (
	bTenants      = []byte("tenants")
	bAPIKeys      = []byte("apikeys")
	bAPIKeyHash   = []byte("apikeys_by_hash")    // hash -> key id
	bAPIKeyTenant = []byte("apikeys_by_tenant")  // tenant\0id
	bIdempotency  = []byte("idempotency")        // tenant\0key -> record
	bSchedules    = []byte("schedules")          // schedKey -> row (schedkey.go)
	bSchedTenant  = []byte("schedules_by_tcode") // tenant code, schedule id (tenantcode.go, schedkey.go)
	bChildren     = []byte("children")           // childKey -> NUL, tenant code (tenantcode.go)
	bChildSched   = []byte("children_by_schedule")
	bChildTZ      = []byte("child_timezones") // tz -> count of children
	bWatermarks   = []byte("watermarks")
	bFires        = []byte("fires")
	bFireSched    = []byte("fires_by_schedule") // schedule\0fireTime id
	bFireEmitting = []byte("fires_emitting")    // id of fires with Remaining > 0
	// bFireDeadlines holds deadline, id of the fires whose deadline is
	// open (FireDeadlineDue). Added after layout 12 as bCalendars was.
	bFireDeadlines = []byte("fires_by_deadline")
	bPolicies      = []byte("policies")
	bPolicyTenant  = []byte("policies_by_tenant") // tenant\0id
	bPolicyName    = []byte("policies_by_name")   // tenant\0name -> id
	bLeases        = []byte("leases")
	// bCalendars holds calendars by tenant\0id. A bucket added after
	// layout 12: Open creates it in a directory without it, and a
	// schedulerd that knows no calendars ignores it, so it needs no new
	// layout.
	bCalendars     = []byte("calendars")
	bMeta          = []byte("meta") // keyLayout -> layout version
	allBucketNames = append([][]byte{
		bTenants, bAPIKeys, bAPIKeyHash, bAPIKeyTenant, bIdempotency,
		bTenantCodes, bTenantIDs, bOriginCodes, bOriginNames, bSchedules, bSchedTenant, bChildren, bChildSched, bChildTZ, bWatermarks,
		bFires, bFireSched, bFireEmitting, bFireDeadlines, bSchedEnds,
		bPolicies, bPolicyTenant, bPolicyName, bLeases, bMeta, bCalendars,
		bAudit, bAuditTenant, bAuditObject,
		bFireWatching, bFireFinished, bSchedAfter,
	}, eventBuckets...)
)

// keyLayout is the meta bucket's record of the data layout a directory is
// written in, a big-endian uint32.
var keyLayout = []byte("layout")

// layoutCurrent is the data layout this schedulerd reads and writes: the
// buckets of allBucketNames, rows in the codecs of rowcodec.go,
// eventcodec.go and evrow.go, keys as keys.go, schedkey.go and
// tenantcode.go build them. A change that a schedulerd of this layout
// would misread raises it by one, with a migration from the layout before
// (migrate.go). Layout 12 added the schedule_ends index (complete.go), 13
// an event's trace context, 14 a fire's, 15 the lanes of the due index
// (duelane.go), 16 its turns, 17 the schedules of a policy's lanes and
// their heads.
const layoutCurrent = 17

// Open opens (creating if needed) the store in dir. Only one process may
// have a directory open at a time; a second Open waits Options.LockTimeout
// and then fails with ErrLocked and model.ErrUnavailable. A truncated or
// foreign store file fails with ErrDamaged before bbolt maps it. A
// directory of an earlier data layout is brought to layoutCurrent by the
// migrations before Open returns, or refused with model.ErrUnavailable
// when there is none from its layout; so is one of a later layout.
func Open(dir string, opts Options) (*Store, error) {
	return open(dir, opts, layoutCurrent, migrations)
}

// open is Open for a schedulerd of data layout current, whose migrations
// are steps: tests give it others.
func open(dir string, opts Options, current int, steps []migration) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: create data directory: %w: %w", model.ErrUnavailable, err)
	}
	lock := opts.LockTimeout
	switch {
	case lock == 0:
		lock = time.Second
	case lock < 0:
		lock = 0 // bbolt: wait forever
	}
	path := filepath.Join(dir, fileName)
	if err := checkFile(path); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: lock,
		// The freelist is rebuilt on open instead of written on every
		// commit; this halves the pages synced per small commit and does
		// not weaken durability of the data.
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: opts.InitialMmapSize,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("embedded: %s: %w (waited %s for its lock; stop the other schedulerd or use another data directory): %w", dir, ErrLocked, lock, model.ErrUnavailable)
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: open %s: %w: %w", path, model.ErrUnavailable, err)
	}
	// The file grows by this much past what a commit needs (bbolt's
	// default, 16 MiB, is about 16 bytes a one-off held in a store of a
	// million); each growth costs a truncate and an fsync.
	db.AllocSize = growBy
	var layout int
	if err := db.View(func(tx *bolt.Tx) error {
		layout, err = storedLayout(tx)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("embedded: open %s: %w: %w", dir, model.ErrUnavailable, err)
	}
	pending, err := migrationsFrom(layout, current, steps)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("embedded: open %s: %w: %w", dir, model.ErrUnavailable, err)
	}
	var tokens *tokenKey
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBucketNames {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if layout == 0 {
			if err := putLayout(tx, current); err != nil {
				return err
			}
		}
		tokens, err = setupTokenKey(tx, opts.TokenKeySecrets)
		return err
	}); errors.Is(err, ErrTokenKeySealed) {
		_ = db.Close()
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	} else if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("embedded: create buckets: %w: %w", model.ErrUnavailable, err)
	}
	if err := migrate(db, pending, tokens); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("embedded: open %s: %w: %w", dir, model.ErrUnavailable, err)
	}
	size := opts.ReserveBytes
	if size == 0 {
		size = DefaultReserveBytes
	}
	res, err := openReserve(path, size)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("embedded: %w: %w", model.ErrUnavailable, err)
	}
	return &Store{db: db, group: groupCommit{delay: max(opts.BatchDelay, 0), reserve: res}, grouped: opts.groupedOneOffs, indexed: opts.indexedOneOffs, tokens: tokens, reserve: res}, nil
}

// growBy is the store file's growth step (bolt.DB.AllocSize).
const growBy = 4 << 20

// Ping reports model.ErrUnavailable once the store is closed.
func (s *Store) Ping(ctx context.Context) error {
	return s.view(ctx, "ping", func(*bolt.Tx) error { return nil })
}

// Close closes the database file. Later calls return model.ErrUnavailable.
// Safe to call twice.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	err := s.db.Close()
	if rerr := s.reserve.close(); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("embedded: close: %w", err)
	}
	return nil
}

// view runs fn in a read-only transaction and translates errors.
func (s *Store) view(ctx context.Context, op string, fn func(tx *bolt.Tx) error) error {
	if err := s.usable(ctx); err != nil {
		return wrap(op, err)
	}
	return wrap(op, s.db.View(fn))
}

// update runs fn in its own read-write transaction, committed and fsynced
// before update returns.
func (s *Store) update(ctx context.Context, op string, fn func(tx *bolt.Tx) error) error {
	if err := s.usable(ctx); err != nil {
		return wrap(op, err)
	}
	return wrap(op, s.group.alone(s.db, fn))
}

// batch is update for small writes that many goroutines issue at once: the
// calls that arrive while a commit is in progress are run together in the
// next transaction and share its commit (one fsync); see groupCommit. fn may
// run more than once, so it must set its results from scratch on every run.
// An error from fn is still returned correctly, but it makes the rest of the
// group run again, so frequent outcomes (a lost event compare-and-set) are
// better reported as results than as errors.
func (s *Store) batch(ctx context.Context, op string, fn func(tx *bolt.Tx) error) error {
	if err := s.usable(ctx); err != nil {
		return wrap(op, err)
	}
	return wrap(op, s.group.do(s.db, fn))
}

// CommitStats counts the store's write transactions since it was opened.
type CommitStats struct {
	Commits int64 // write transactions committed
	Writes  int64 // the store writes they carried: a group commit carries several
}

// Commits reports the write transactions since the store was opened.
func (s *Store) Commits() CommitStats {
	return CommitStats{Commits: s.group.commits.Load(), Writes: s.group.writes.Load()}
}

// groupCommit is group commit for bbolt. bbolt's own db.Batch collects calls
// for a fixed delay and then queues the group behind the writer lock, so
// under load every delay window becomes its own commit and calls wait for
// the delay even when the disk is idle. Here one committer goroutine runs
// while calls are pending: it takes everything that queued up while the
// previous commit was syncing and runs it as one transaction. An idle store
// commits a lone call at once; a busy one makes groups as large as the
// commit time allows. delay (Options.BatchDelay) optionally waits before
// each group to gather more calls.
type groupCommit struct {
	delay   time.Duration
	reserve *reserve
	mu      sync.Mutex
	pending []groupCall
	running bool
	// commits counts the write transactions committed, writes the store
	// writes they carried (CommitStats).
	commits, writes atomic.Int64
}

type groupCall struct {
	fn  func(*bolt.Tx) error
	err chan error
}

// errRunAlone tells a caller whose fn failed inside a group to run it in a
// transaction of its own, which gives its true error.
var errRunAlone = errors.New("embedded: run alone")

func (g *groupCommit) do(db *bolt.DB, fn func(*bolt.Tx) error) error {
	c := groupCall{fn: fn, err: make(chan error, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, c)
	if !g.running {
		g.running = true
		go g.commitLoop(db)
	}
	g.mu.Unlock()
	err := <-c.err
	if err == errRunAlone {
		return g.alone(db, fn)
	}
	if err == nil {
		g.writes.Add(1)
	}
	return err
}

func (g *groupCommit) commitLoop(db *bolt.DB) {
	for {
		if g.delay > 0 {
			time.Sleep(g.delay)
		}
		g.mu.Lock()
		calls := g.pending
		g.pending = nil
		if len(calls) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.run(db, calls)
	}
}

// run commits calls in one transaction. If one fails, the transaction is
// rolled back, that call is told to run alone and the others run again.
func (g *groupCommit) run(db *bolt.DB, calls []groupCall) {
	for len(calls) > 0 {
		failed := -1
		err := g.reserve.update(db, func(tx *bolt.Tx) error {
			for i, c := range calls {
				if err := safeCall(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			calls[failed].err <- errRunAlone
			calls = append(calls[:failed:failed], calls[failed+1:]...)
			continue
		}
		if err == nil {
			g.commits.Add(1)
		}
		for _, c := range calls {
			c.err <- err
		}
		return
	}
}

// alone runs fn in a transaction of its own.
func (g *groupCommit) alone(db *bolt.DB, fn func(*bolt.Tx) error) error {
	err := g.reserve.update(db, fn)
	if err == nil {
		g.commits.Add(1)
		g.writes.Add(1)
	}
	return err
}

// safeCall runs fn, turning a panic into an error so that one bad call
// cannot take the committer down with the others' results.
func safeCall(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in store write: %v", p)
		}
	}()
	return fn(tx)
}

func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("%w: %w: store closed", model.ErrUnavailable, model.ErrNotApplied)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w: %w", model.ErrUnavailable, model.ErrNotApplied, err)
	}
	return nil
}

// wrap adds the operation to err and maps everything that is not already a
// model sentinel to model.ErrUnavailable: bbolt's errors are I/O failures or
// a closed database, both of which a caller can only retry. They are
// model.ErrNotApplied too: a transaction that failed did not commit.
func wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, model.ErrNotFound), errors.Is(err, model.ErrConflict),
		errors.Is(err, model.ErrInvalid), errors.Is(err, model.ErrUnavailable):
		return fmt.Errorf("embedded: %s: %w", op, err)
	default:
		// bolterrors.ErrDatabaseNotOpen, I/O errors and the like.
		return fmt.Errorf("embedded: %s: %w: %w: %w", op, model.ErrUnavailable, model.ErrNotApplied, err)
	}
}

// getJSON decodes the row at key of bucket b into v; model.ErrNotFound if
// there is none.
func getJSON(tx *bolt.Tx, b, key []byte, v any) error {
	raw := tx.Bucket(b).Get(key)
	if raw == nil {
		return model.ErrNotFound
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode %s %q: %w", b, key, err)
	}
	return nil
}

// packedFill is how full bbolt fills pages when it splits a node in a
// transaction that writes keys in long ascending runs (a fan-out batch of
// one fire). bbolt's default, half, suits random keys; for ascending runs it
// leaves every page half empty for good. Packing random inserts instead would be worse than the
// default: each full page would split into a full one and a nearly empty
// one. FillPercent is not stored in the file, so it is set per transaction.
const packedFill = 0.9

// pack makes the buckets named fill their pages to packedFill when this
// transaction commits. tx.Bucket returns the same handle for the rest of a
// write transaction, so the setting holds for every write through it.
func pack(tx *bolt.Tx, names ...[]byte) {
	for _, name := range names {
		if b := tx.Bucket(name); b != nil {
			b.FillPercent = packedFill
		}
	}
}

// mixedFill marks a bucket that this transaction also writes into the
// middle of: packAppends leaves it at (about) bbolt's default for the rest
// of the transaction. A value of its own, so that it is told from a bucket
// not yet looked at.
const mixedFill = bolt.DefaultFillPercent + 0.001

// packAppends packs bucket b's pages (see pack) while this transaction's
// puts into it are appends: key sorts after every key of b that shares its
// first n bytes (n is 0 for a bucket keyed by id, the length of the tenant
// prefix for a by-tenant index). Ids issued in creation order make every
// new schedule, fire and index entry such an append, and the pages would
// otherwise be left half empty; random ids write into the middle, for which
// bbolt's default suits best. One put into the middle turns packing off for
// the rest of the transaction. It costs a seek, so it is called only on
// the paths that create rows.
func packAppends(b *bolt.Bucket, key []byte, n int) {
	if b.FillPercent == mixedFill {
		return
	}
	if k, _ := b.Cursor().Seek(key); k == nil || !bytes.HasPrefix(k, key[:n]) {
		b.FillPercent = packedFill
		return
	}
	b.FillPercent = mixedFill
}

// above tells whether keys are absent from a bucket, mostly without a
// search: a key after the bucket's last key is absent, and keys met in
// ascending order (creation-ordered ids) are. put keeps the last key known
// for the puts of its caller; nothing else may write to the bucket
// meanwhile.
type above struct {
	b     *bolt.Bucket
	last  []byte // the bucket's last key; nil: empty, or not read yet
	read  bool
	asked bool // absent was called: the next call reads the last key
}

func (a *above) absent(k []byte) bool {
	if !a.read && !a.asked {
		// One key (a single create) costs a lookup, less than the
		// reverse seek that finds the last key.
		a.asked = true
		return a.b.Get(k) == nil
	}
	if !a.read {
		a.last, a.read = bytes.Clone(lastKey(a.b)), true
	}
	if a.last == nil || bytes.Compare(a.last, k) < 0 {
		return true
	}
	return a.b.Get(k) == nil
}

// put notes that k was put into the bucket.
func (a *above) put(k []byte) {
	if a.read && (a.last == nil || bytes.Compare(a.last, k) < 0) {
		a.last = k
	}
}

// appender is packAppends for a run of puts into one bucket that nothing
// else writes to meanwhile: a key that sorts after the run's previous one,
// which was an append, with the same first n bytes, is an append too, and
// needs no seek.
//
// With gaps set it also packs puts into the middle of the bucket that come
// in long ascending runs, each into one gap between existing keys (a batch
// of ids in creation order committed after a later batch): those fill new
// pages one after another as appends do. Short runs, such as random ids,
// leave the bucket at bbolt's default. finish judges the runs.
type appender struct {
	last []byte // the run's previous key; nil: no run
	next []byte // the key after the run's gap; nil: the run appends

	gaps             bool
	gapPuts, gapRuns int
}

// minGapRun is the fewest puts a gap's run must have, on average, for
// finish to pack the bucket: about a page of schedule rows.
const minGapRun = 16

func (a *appender) pack(b *bolt.Bucket, key []byte, n int) {
	if a.last != nil && len(a.last) >= n && bytes.Equal(a.last[:n], key[:n]) && bytes.Compare(a.last, key) < 0 &&
		(a.next == nil || bytes.Compare(key, a.next) < 0) {
		a.last = key
		if a.next != nil {
			a.gapPuts++
		}
		return
	}
	a.last, a.next = nil, nil
	if !a.gaps {
		packAppends(b, key, n)
		if b.FillPercent == packedFill {
			a.last = key
		}
		return
	}
	if b.FillPercent == mixedFill {
		return
	}
	k, _ := b.Cursor().Seek(key)
	a.last = key
	if k == nil || !bytes.HasPrefix(k, key[:n]) {
		b.FillPercent = packedFill
		return
	}
	a.next = bytes.Clone(k)
	a.gapRuns++
	a.gapPuts++
}

// finish sets the fill of bucket b for the runs into its gaps (gaps):
// packed when they were long enough, else bbolt's default.
func (a *appender) finish(b *bolt.Bucket) {
	switch {
	case a.gapRuns == 0 || b.FillPercent == mixedFill:
	case a.gapPuts < minGapRun*a.gapRuns:
		b.FillPercent = mixedFill
	default:
		b.FillPercent = packedFill
	}
}

// reset forgets the run: the caller wrote into the bucket without pack.
func (a *appender) reset() { a.last, a.next = nil, nil }

func putJSON(tx *bolt.Tx, b, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s %q: %w", b, key, err)
	}
	return tx.Bucket(b).Put(key, raw)
}

// limitOr returns limit, or def when limit is not positive, capped at max.
func limitOr(limit, def, max int) int {
	if limit <= 0 {
		return def
	}
	if limit > max {
		return max
	}
	return limit
}

func jsonUnmarshal(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}
