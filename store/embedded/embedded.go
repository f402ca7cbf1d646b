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
package embedded

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	// TokenKeySecrets seal the key release tokens are derived from
	// (token.go): it is kept sealed under the first, and a key sealed under
	// another one (a rotation) opens and is sealed again under the first.
	// None: kept in clear (a sealed key is then not used). The runtime
	// passes the signing secrets.
	TokenKeySecrets [][]byte

	// migrateChunk is how many event rows a migration transaction reads
	// (zero: 20,000), which bounds the memory a migration of a large store
	// needs, and its time: bbolt splits the nodes a transaction fills only
	// when it commits, so every key put into the middle of a node moves the
	// ones after it, and a transaction of n scattered puts costs about n². Tests set it small.
	migrateChunk int
	// groupedOneOffs stores every event in a group, never in its
	// one-off's row (impliesEvent): tests compare the two forms.
	groupedOneOffs bool
	// indexedOneOffs gives every one-off's child a children entry, never
	// leaving it to the row (impliesChild), and Open keeps those of an
	// older layout: tests compare the two forms.
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
}

var _ store.Driver = (*Store)(nil)

// Bucket names. Row buckets hold values keyed by id (schedules by a packed
// form of it; see the package doc);
// the others are secondary indexes whose keys are built in keys.go.
var (
	bTenants       = []byte("tenants")
	bAPIKeys       = []byte("apikeys")
	bAPIKeyHash    = []byte("apikeys_by_hash")    // hash -> key id
	bAPIKeyTenant  = []byte("apikeys_by_tenant")  // tenant\0id
	bIdempotency   = []byte("idempotency")        // tenant\0key -> record
	bSchedules     = []byte("schedules")          // schedKey -> row (schedkey.go)
	bSchedTenant   = []byte("schedules_by_tcode") // tenant code, schedule id (tenantcode.go, schedkey.go)
	bChildren      = []byte("children")           // childKey -> NUL, tenant code (tenantcode.go)
	bChildSched    = []byte("children_by_schedule")
	bChildTZ       = []byte("child_timezones") // tz -> count of children
	bWatermarks    = []byte("watermarks")
	bFires         = []byte("fires")
	bFireSched     = []byte("fires_by_schedule") // schedule\0fireTime id
	bFireEmitting  = []byte("fires_emitting")    // id of fires with Remaining > 0
	bPolicies      = []byte("policies")
	bPolicyTenant  = []byte("policies_by_tenant") // tenant\0id
	bPolicyName    = []byte("policies_by_name")   // tenant\0name -> id
	bLeases        = []byte("leases")
	bMeta          = []byte("meta") // keyLayout -> layout version
	allBucketNames = append([][]byte{
		bTenants, bAPIKeys, bAPIKeyHash, bAPIKeyTenant, bIdempotency,
		bTenantCodes, bTenantIDs, bOriginCodes, bOriginNames, bSchedules, bSchedTenant, bChildren, bChildSched, bChildTZ, bWatermarks,
		bFires, bFireSched, bFireEmitting,
		bPolicies, bPolicyTenant, bPolicyName, bLeases, bMeta,
	}, eventBuckets...)
)

var keyLayout = []byte("layout")

// Tenant indexes of layouts 1-5, keyed by the tenant id (tenant\0...);
// the migration to layoutTenantCodes moves their keys to schedules_by_tcode
// and ev_tcode.
var (
	bSchedTenantLayout5 = []byte("schedules_by_tenant")
	bEvTenantLayout5    = []byte("ev_tenant")
)

// Buckets of layouts 1 and 2, which keyed events by id and repeated the
// fire's fields in every row; Open migrates them to the ev_ buckets.
var (
	bEventsLayout2   = []byte("events")
	bEvPolicyLayout1 = []byte("events_by_policy_status_launch")
	legacyBuckets    = [][]byte{
		bEventsLayout2, []byte("events_by_shard_status_launch"), []byte("events_by_fire_status"),
		[]byte("events_by_schedule"), []byte("events_by_tenant"), []byte("events_by_policy_class_launch"),
		[]byte("events_finished_by_time"), bEvPolicyLayout1,
	}
)

// Versions of the data layout; Open migrates a directory to the current one.
// A directory without a version was written with layout 1.
const (
	// layoutNarrowIndexes: the due index holds only waiting events, and the
	// policy index only unfinished ones, keyed by class (see dueIndexed).
	// In layout 1 both had a key for every event in every status.
	layoutNarrowIndexes = 2
	// layoutCompactEvents: events stored by fire, as a group head and rows
	// of what differs from it, under short row keys (evtx.go). Layouts 1
	// and 2 stored every event in full under its id, with index keys that
	// repeated the id.
	layoutCompactEvents = 3
	// layoutCompactRows: schedules and fires in row codec version 2 (a
	// schedule's sole child inline, without a children_by_schedule entry),
	// event heads in event codec version 3 (rowcodec.go, eventcodec.go).
	// Layout 3 rows are still read; the migration rewrites them, and the
	// version keeps an older schedulerd, which cannot read the new rows,
	// from opening the store.
	layoutCompactRows = 4
	// layoutLeanOneOffs: an event group whose fire id starts with its
	// schedule's id and "." (every fire the emitter and the master make)
	// has no entry in ev_sched; ev_groups under that prefix lists it
	// (impliedGroup). A one-off stored with its fire holds that fire in its
	// row (impliesFire): no fire row, no fires_by_schedule entry. The
	// migration deletes the ev_sched entries; an older schedulerd would
	// miss those groups and fires.
	layoutLeanOneOffs = 5
	// layoutTenantCodes: the tenant indexes key a tenant by a short code
	// (tenantcode.go) instead of its id, in buckets of new names; the
	// migration moves the entries of the old ones. An older schedulerd
	// would find no tenant's schedules or events.
	layoutTenantCodes = 6
	// layoutChildTenantCodes: a child's value in the children bucket is
	// its tenant's code (childValue), which tenant_ids maps back, instead
	// of the tenant id. The migration fills tenant_ids from tenant_codes
	// and rewrites the values; an older schedulerd would read the code as
	// the tenant id.
	layoutChildTenantCodes = 7
	// layoutOneRecord: a one-off's row that holds its fire can hold that
	// fire's one event too, while nothing has changed it (oneevent.go):
	// no event group, only an ev_due entry of an impliedKey and a mark on
	// the schedule's schedules_by_tcode entry. The migration moves the
	// events of layout 7 that qualify into their rows, in chunks; an older
	// schedulerd would find none of those events.
	layoutOneRecord = 8
	// layoutImpliedChild: a one-off created with its fire in its row has
	// no children entry and no timezone count for its sole child, which
	// the row holds marked (impliesChild): the emitter would only find
	// that fire made. The migration deletes the entries and counts of the
	// one-offs of layout 8 that qualify and marks their rows, in chunks;
	// an older schedulerd would take those children off the counts again.
	layoutImpliedChild = 9
	// layoutRowCodes: schedules are written in row codec version 3, which
	// holds the tenant by its code, the target URL's origin by a code of
	// the origin dictionary (origin_codes, origin_names) and runAt from the
	// creation time (rowcodec.go); event rows keep an emitter's release
	// token as its 16 bytes (fReleaseTokenBytes); the due entry of an event
	// held in its one-off's row names an id of the master's form by its 10
	// bytes (appendImpliedKey). Rows and entries of earlier versions are
	// read and not rewritten; the version keeps an older schedulerd, which
	// cannot read the new ones, from opening the store.
	layoutRowCodes = 10
	// layoutPackedIDs: the schedules bucket and the tenant index name a
	// schedule id of the master's form by the 10 bytes its text stands for
	// (schedkey.go); the migration moves the entries under the new keys.
	// Rows keep as flags what the store can make again: a one-off's sole
	// child when it is the one the one-off's runAt gives
	// (schedule.OneOffChild, schedChildOfRunAt), and an event's release
	// token when it is the store's for the event id (token.go), under a key
	// the meta bucket holds; rows of layout 10 are read as they are. An
	// older schedulerd would find no schedule.
	layoutPackedIDs = 11
	layoutCurrent   = layoutPackedIDs
)

// Open opens (creating if needed) the store in dir. Only one process may
// have a directory open at a time; a second Open waits Options.LockTimeout
// and then fails with ErrLocked and model.ErrUnavailable. A truncated or
// foreign store file fails with ErrDamaged before bbolt maps it. A directory written by an older
// schedulerd is migrated to the current data layout before Open returns.
func Open(dir string, opts Options) (*Store, error) {
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
	var tokens *tokenKey
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBucketNames {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
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
	if tokens != nil {
		openKeys.Store(db, tokens)
	}
	if err := migrate(db, cmp.Or(opts.migrateChunk, 20_000), opts.indexedOneOffs); err != nil {
		openKeys.Delete(db)
		_ = db.Close()
		return nil, fmt.Errorf("embedded: open %s: %w: %w", dir, model.ErrUnavailable, err)
	}
	return &Store{db: db, group: groupCommit{delay: max(opts.BatchDelay, 0)}, grouped: opts.groupedOneOffs, indexed: opts.indexedOneOffs, tokens: tokens}, nil
}

// growBy is the store file's growth step (bolt.DB.AllocSize).
const growBy = 4 << 20

// migrate brings the data to layoutCurrent before Open returns. The
// version is written last, in the transaction that drops the old buckets: a
// crash during a migration leaves the old version and the old data, and the
// next Open migrates again from the start. indexed is
// Options.indexedOneOffs.
func migrate(db *bolt.DB, chunk int, indexed bool) error {
	layout, recorded, legacy := 1, false, false
	if err := db.View(func(tx *bolt.Tx) error {
		for _, name := range legacyBuckets {
			legacy = legacy || tx.Bucket(name) != nil
		}
		if raw := tx.Bucket(bMeta).Get(keyLayout); len(raw) == 4 {
			layout, recorded = int(binary.BigEndian.Uint32(raw)), true
		} else if !legacy {
			layout = layoutCurrent // a new store
		}
		return nil
	}); err != nil {
		return err
	}
	if layout > layoutCurrent {
		return fmt.Errorf("data layout %d was written by a newer schedulerd (this one knows up to %d)", layout, layoutCurrent)
	}
	if layout < layoutPackedIDs {
		if err := packScheduleKeys(db, chunk); err != nil {
			return fmt.Errorf("migrate to data layout %d: %w", layoutPackedIDs, err)
		}
	}
	if layout < layoutCompactEvents {
		if err := compactEvents(db, chunk); err != nil {
			return fmt.Errorf("migrate to data layout %d: %w", layoutCompactEvents, err)
		}
	}
	if layout < layoutCompactRows {
		for _, name := range [][]byte{bSchedules, bFires, bEvHeads} {
			if err := rewriteRows(db, name, chunk); err != nil {
				return fmt.Errorf("migrate to data layout %d: %s: %w", layoutCompactRows, name, err)
			}
		}
	}
	if layout < layoutLeanOneOffs {
		if err := dropImpliedEntries(db, chunk); err != nil {
			return fmt.Errorf("migrate to data layout %d: %w", layoutLeanOneOffs, err)
		}
	}
	if layout < layoutTenantCodes {
		for _, m := range [][2][]byte{{bSchedTenantLayout5, bSchedTenant}, {bEvTenantLayout5, bEvTenant}} {
			if err := codeTenantEntries(db, m[0], m[1], chunk); err != nil {
				return fmt.Errorf("migrate to data layout %d: %s: %w", layoutTenantCodes, m[0], err)
			}
		}
	}
	if layout < layoutPackedIDs {
		if err := packTenantKeys(db, chunk); err != nil {
			return fmt.Errorf("migrate to data layout %d: %s: %w", layoutPackedIDs, bSchedTenant, err)
		}
	}
	if layout < layoutChildTenantCodes {
		if err := codeChildTenants(db, chunk); err != nil {
			return fmt.Errorf("migrate to data layout %d: %w", layoutChildTenantCodes, err)
		}
	}
	if layout < layoutOneRecord {
		if err := moveEventsToRows(db, chunk); err != nil {
			return fmt.Errorf("migrate to data layout %d: %w", layoutOneRecord, err)
		}
	}
	if layout < layoutImpliedChild && !indexed {
		if err := dropImpliedChildren(db, chunk); err != nil {
			return fmt.Errorf("migrate to data layout %d: %w", layoutImpliedChild, err)
		}
	}
	if recorded && layout == layoutCurrent && !legacy {
		return nil
	}
	return db.Update(func(tx *bolt.Tx) error {
		for _, name := range append(legacyBuckets, bSchedTenantLayout5, bEvTenantLayout5) {
			if tx.Bucket(name) == nil {
				continue
			}
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(keyLayout, binary.BigEndian.AppendUint32(nil, layoutCurrent))
	})
}

// compactEvents rewrites the events of layouts 1 and 2 (rows by id in
// bEventsLayout2; their indexes are not read) into the ev_ buckets, chunk
// rows per transaction. The ev_ buckets are emptied first: a crash in an
// earlier run may have left part of the work there.
func compactEvents(db *bolt.DB, chunk int) error {
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range eventBuckets {
			if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
				return err
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return walkChunks(db, bEventsLayout2, chunk, func(tx *bolt.Tx, rows []kv) error {
		events := make([]*model.Event, 0, len(rows))
		for _, r := range rows {
			e, err := decodeEvent(r.v)
			if err != nil {
				return fmt.Errorf("event %q: %w", r.k, err)
			}
			events = append(events, e)
		}
		// Ids sort a fire's events as strings ("f.1", "f.10", "f.2");
		// by index their row and fire index keys go in in order.
		slices.SortStableFunc(events, func(a, b *model.Event) int {
			return cmp.Or(strings.Compare(a.FireID, b.FireID), cmp.Compare(a.Index, b.Index))
		})
		x := newEvtx(tx)
		for _, e := range events {
			if _, err := x.insert(e); err != nil {
				return fmt.Errorf("event %q: %w", e.ID, err)
			}
		}
		return x.flush()
	})
}

// rewriteRows rewrites the rows of bucket name (schedules, fires or event
// heads) that are not in its current codec (JSON rows of layouts 1 and 2,
// binary rows of layout 3), chunk rows per transaction. Rows already
// current are left alone, so a run interrupted by a crash is simply
// resumed.
func rewriteRows(db *bolt.DB, name []byte, chunk int) error {
	current := map[string]byte{string(bSchedules): scheduleCodecV3, string(bFires): fireCodecV2, string(bEvHeads): eventCodecV3}[string(name)]
	return walkChunks(db, name, chunk, func(tx *bolt.Tx, rows []kv) error {
		b, dict := tx.Bucket(name), &rowDict{tx: tx}
		for _, r := range rows {
			k, v := r.k, r.v
			if len(v) > 0 && v[0] == current {
				continue
			}
			var raw []byte
			switch {
			case bytes.Equal(name, bSchedules):
				sc, err := decodeSchedule([]byte(schedKeyID(k)), v, dict)
				if err != nil {
					return err
				}
				if raw, err = encodeSchedule(sc, dict); err != nil {
					return err
				}
			case bytes.Equal(name, bFires):
				f, err := decodeFire(k, v)
				if err != nil {
					return err
				}
				raw = encodeFire(f)
			default:
				e, err := decodeEvent(v)
				if err != nil {
					return fmt.Errorf("event group %x: %w", k, err)
				}
				if raw, err = encodeEvent(e); err != nil {
					return err
				}
			}
			if err := b.Put(k, raw); err != nil {
				return err
			}
		}
		return nil
	})
}

// dropImpliedEntries deletes the ev_sched entries of the groups that
// layoutLeanOneOffs lists by fire id, chunk keys per transaction. A run
// interrupted by a crash is redone: what it deleted stays deleted.
func dropImpliedEntries(db *bolt.DB, chunk int) error {
	return walkChunks(db, bEvSched, chunk, func(tx *bolt.Tx, rows []kv) error {
		var drop [][]byte
		for _, r := range rows {
			// A group's entry: schedule id NUL, fire id ".", NUL, no value.
			if len(r.v) != 0 || !bytes.HasSuffix(r.k, []byte{'.', 0}) {
				continue
			}
			scheduleID, rest := readStr(r.k)
			if len(rest) >= 2 && impliedGroup(scheduleID, string(rest[:len(rest)-2])) {
				drop = append(drop, r.k)
			}
		}
		return deleteKeys(tx, bEvSched, drop)
	})
}

// codeTenantEntries moves the keys of the tenant index from (tenant id,
// NUL, rest) to to (tenant code, rest), chunk keys per transaction. Each
// transaction deletes the keys it moved, so a run interrupted by a crash
// resumes where the last commit left it; the emptied bucket is dropped with
// the version.
func codeTenantEntries(db *bolt.DB, from, to []byte, chunk int) error {
	return walkChunks(db, from, chunk, func(tx *bolt.Tx, rows []kv) error {
		codes, dst := newTenantCodes(tx), tx.Bucket(to)
		drop := make([][]byte, 0, len(rows))
		for _, r := range rows {
			tenantID, rest := readStr(r.k)
			nk, err := codes.key(tenantID, rest)
			if err != nil {
				return err
			}
			if err := dst.Put(nk, r.v); err != nil {
				return err
			}
			drop = append(drop, r.k)
		}
		return deleteKeys(tx, from, drop)
	})
}

// codeChildTenants gives tenant_ids the codes of tenant_codes that it
// lacks (codes given out by layout 6), then rewrites the children values
// that hold a tenant id as childValue, chunk keys per transaction. Values
// already rewritten start with NUL and are left alone, so a run
// interrupted by a crash is simply resumed.
func codeChildTenants(db *bolt.DB, chunk int) error {
	if err := db.Update(func(tx *bolt.Tx) error {
		ids := tx.Bucket(bTenantIDs)
		return tx.Bucket(bTenantCodes).ForEach(func(k, code []byte) error {
			if ids.Get(code) != nil {
				return nil
			}
			id, _ := readStr(k)
			return ids.Put(bytes.Clone(code), []byte(id))
		})
	}); err != nil {
		return err
	}
	return walkChunks(db, bChildren, chunk, func(tx *bolt.Tx, rows []kv) error {
		b, codes := tx.Bucket(bChildren), newTenantCodes(tx)
		for _, r := range rows {
			if len(r.v) > 0 && r.v[0] == 0 {
				continue
			}
			nv, err := codes.childValue(string(r.v))
			if err != nil {
				return err
			}
			if err := b.Put(r.k, nv); err != nil {
				return err
			}
		}
		return nil
	})
}

// moveEventsToRows moves into its schedule's row the event of each
// one-off whose row holds its fire, when that fire has one event, as
// created (impliesEvent): its group goes, and the row, an ev_due entry
// and the mark of the schedule's tenant entry stand for it. chunk rows per
// transaction; rows that hold an event already are left alone, so a run
// interrupted by a crash is simply resumed.
func moveEventsToRows(db *bolt.DB, chunk int) error {
	return walkChunks(db, bSchedules, chunk, func(tx *bolt.Tx, rows []kv) error {
		x := newEvtx(tx)
		for _, r := range rows {
			if !rowHasFire(r.v) || rowHasEvent(r.v) {
				continue
			}
			sc, child, f, err := decodeScheduleFire([]byte(schedKeyID(r.k)), r.v, x.dict)
			if err != nil {
				return err
			}
			if err := x.moveToRow(sc, child, f); err != nil {
				return fmt.Errorf("schedule %q: %w", sc.ID, err)
			}
		}
		return x.flush()
	})
}

// kv is a key and its value, copied out of a transaction.
type kv struct{ k, v []byte }

// walkChunks hands fn the keys and values of bucket name in key order,
// chunk at a time, each chunk in a read-write transaction of its own that
// starts after the last key of the one before. fn writes once the chunk's
// walk is over (a cursor must not see its bucket change). A missing bucket
// is an empty one.
func walkChunks(db *bolt.DB, name []byte, chunk int, fn func(tx *bolt.Tx, rows []kv) error) error {
	var after []byte
	for {
		n := 0
		if err := db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(name)
			if b == nil {
				return nil
			}
			var rows []kv
			c := b.Cursor()
			k, v := c.First()
			if after != nil {
				if k, v = c.Seek(after); bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(rows) < chunk; k, v = c.Next() {
				rows = append(rows, kv{bytes.Clone(k), bytes.Clone(v)})
			}
			if n = len(rows); n > 0 {
				after = rows[n-1].k
			}
			return fn(tx, rows)
		}); err != nil {
			return err
		}
		if n < chunk {
			return nil
		}
	}
}

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
	openKeys.Delete(s.db)
	if err := s.db.Close(); err != nil {
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
	return wrap(op, s.db.Update(fn))
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
	mu      sync.Mutex
	pending []groupCall
	running bool
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
		err = db.Update(fn)
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
		err := db.Update(func(tx *bolt.Tx) error {
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
		for _, c := range calls {
			c.err <- err
		}
		return
	}
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
	var after bool
	if n == 0 {
		// After every key: after the last, found with no comparisons.
		k, _ := b.Cursor().Last()
		after = k == nil || bytes.Compare(k, key) < 0
	} else {
		k, _ := b.Cursor().Seek(key)
		after = k == nil || !bytes.HasPrefix(k, key[:n])
	}
	if after {
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
	b    *bolt.Bucket
	last []byte // the bucket's last key; nil: empty, or not read yet
	read bool
}

func (a *above) absent(k []byte) bool {
	if !a.read {
		l, _ := a.b.Cursor().Last()
		a.last, a.read = bytes.Clone(l), true
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
