package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Event buckets. Keys, with rk = rowKey (group
// sequence, slot: 12 bytes):
//
//	ev_rows:     rk -> row (evrow.go)
//	ev_heads:    sequence -> head (encodeEventRef of the group's first event)
//	ev_groups:   fireID\0 -> sequence, canonical events (uvarint)
//	ev_ids:      id -> rk, loose events only
//	ev_due:      shard, status, fence or lane, launchAt, rk -> fence
//	             (empty: 0); waiting statuses only, scheduled ones by
//	             fence, pending and retrying ones by lane (duelane.go); rk
//	             is an impliedKey for an event that its one-off's row
//	             holds (oneevent.go), which has no other entry here; in a
//	             lane of a policy the schedule id and a NUL follow the lane
//	ev_due_heads: shard, status, lane, launchAt, scheduleID: each
//	             schedule's first entry in each lane of a policy
//	ev_fire:     sequence, status, slot            (counts per fire, status)
//	ev_tcode:    tenant code, fireID ".\x00" (the group's canonical events,
//	             no value), or tenant code, id -> rk (a loose event); the
//	             code stands for the tenant id (tenantcode.go)
//	ev_sched:    scheduleID\0, then as ev_tcode; a group whose fire id starts
//	             with its schedule's id and "." has no entry there (see
//	             impliedGroup): ev_groups under that prefix lists it
//	ev_policy:   policyID\0, class\0, launchAt, rk (unfinished events)
//	ev_finished: finishedAt, rk                    (retention)
//
// A group's entry in ev_tcode sorts before all its events' ids (fireID "."
// digits) and after every id smaller than them, which is what lets
// EventList page a tenant's events by id from one entry per fire; see
// listByEntries.
var (
	bEvRows      = []byte("ev_rows")
	bEvHeads     = []byte("ev_heads")
	bEvGroups    = []byte("ev_groups")
	bEvIDs       = []byte("ev_ids")
	bEvDue       = []byte("ev_due")
	bEvDueHeads  = []byte("ev_due_heads")
	bEvFire      = []byte("ev_fire")
	bEvTenant    = []byte("ev_tcode")
	bEvSched     = []byte("ev_sched")
	bEvPolicy    = []byte("ev_policy")
	bEvFinished  = []byte("ev_finished")
	eventBuckets = [][]byte{bEvRows, bEvHeads, bEvGroups, bEvIDs, bEvDue, bEvDueHeads, bEvFire, bEvTenant, bEvSched, bEvPolicy, bEvFinished}
)

// group is an event group as one transaction sees it.
type group struct {
	seq    uint64
	head   *model.Event
	count  uint64 // canonical events
	dirty  bool   // count changed: written by flush
	fresh  bool   // opened by this transaction
	sibKey []byte // ev_groups key
}

// evtx reads and writes events in one bbolt transaction, caching the groups
// it has met. It is made afresh for each run of a transaction function.
type evtx struct {
	rows, heads, groups, ids, fire, tenant, sched, policy, finished *bolt.Bucket
	schedules, schedTenant                                          *bolt.Bucket
	due                                                             dueIndex
	bySeq                                                           map[uint64]*group
	byFire                                                          map[string]*group
	absent                                                          map[string]bool            // fire ids found without a group in ev_groups
	noImplied                                                       map[string]bool            // fire ids found without an event in a row (impliedOf)
	scheds                                                          map[string]*model.Schedule // read for heads
	written                                                         map[string]*model.Schedule // see newEvtxWith; not changed
	prepared                                                        map[*model.Event]preparedHead
	tenantRun                                                       appender // group entries put into ev_tcode
	codes                                                           *tenantCodes
	dict                                                            *rowDict // shares codes
}

// preparedHead is the head an event would get if it opened its fire's
// group, encoded against schedule sc and decoded back before the
// transaction (prepareHeads); newGroup uses it when sc is the schedule it
// reads.
type preparedHead struct {
	sc   *model.Schedule
	raw  []byte
	head *model.Event
}

// prepareHeads adds to dst the heads of the first event of each fire of fs
// whose schedule is sc, as newGroup would make them with sc as the stored
// schedule (see newEvtxWith): the encoding and decoding then run before
// the transaction, which holds the one writer. A head that fails to encode
// is left to newGroup, which reports it.
func prepareHeads(dst map[*model.Event]preparedHead, sc *model.Schedule, fs []store.FireNew) {
	for _, fn := range fs {
		if len(fn.Events) == 0 || fn.Events[0].ScheduleID != sc.ID {
			continue
		}
		e := fn.Events[0]
		t := headTemplate(e)
		raw, err := encodeEventRef(&t, sc)
		if err != nil {
			continue
		}
		h, err := decodeEventWith(raw, func(id string) (*model.Schedule, error) {
			if id != sc.ID {
				return nil, model.ErrNotFound
			}
			return sc, nil
		})
		if err != nil {
			continue
		}
		dst[e] = preparedHead{sc: sc, raw: raw, head: h}
	}
}

// headTemplate is e as a group head: its id and index are never read (a
// canonical event's come from its row key), so they are left out.
func headTemplate(e *model.Event) model.Event {
	t := *e
	t.ID, t.Index = "", 0
	return t
}

// newEvtxWith is newEvtx whose heads read the schedules in written (by id,
// decoded from the rows this transaction wrote for them) instead of those
// rows: the decoding can then be done before the transaction, which holds
// the one writer. written must hold exactly what the rows do.
func newEvtxWith(tx *bolt.Tx, keys *tokenKey, written map[string]*model.Schedule) *evtx {
	x := newEvtx(tx, keys)
	x.written = written
	return x
}

// newEvtx works in the write transaction tx of a store whose release-token
// key is keys.
func newEvtx(tx *bolt.Tx, keys *tokenKey) *evtx {
	// Heads are keyed by a sequence: every new one goes at the end, so
	// their pages can be filled (see packedFill).
	pack(tx, bEvHeads)
	x := &evtx{
		rows: tx.Bucket(bEvRows), heads: tx.Bucket(bEvHeads), groups: tx.Bucket(bEvGroups), ids: tx.Bucket(bEvIDs),
		due: dueIndex{due: tx.Bucket(bEvDue), heads: tx.Bucket(bEvDueHeads)}, fire: tx.Bucket(bEvFire), tenant: tx.Bucket(bEvTenant), sched: tx.Bucket(bEvSched),
		policy: tx.Bucket(bEvPolicy), finished: tx.Bucket(bEvFinished), schedules: tx.Bucket(bSchedules), schedTenant: tx.Bucket(bSchedTenant),
		bySeq: map[uint64]*group{}, byFire: map[string]*group{}, codes: newTenantCodes(tx),
	}
	x.dict = txDict(tx, x.codes, keys)
	return x
}

// schedule returns the stored schedule id for a head that refers to it;
// model.ErrNotFound if there is none.
func (x *evtx) schedule(id string) (*model.Schedule, error) {
	if sc, ok := x.written[id]; ok {
		return sc, nil
	}
	if sc, ok := x.scheds[id]; ok {
		return sc, nil
	}
	raw := x.schedules.Get(schedKey(id))
	if raw == nil {
		return nil, model.ErrNotFound
	}
	sc, err := decodeSchedule([]byte(id), raw, x.dict)
	if err != nil {
		return nil, err
	}
	if x.scheds == nil {
		x.scheds = map[string]*model.Schedule{}
	}
	x.scheds[id] = sc
	return sc, nil
}

func (x *evtx) decodeHead(raw []byte) (*model.Event, error) { return decodeEventWith(raw, x.schedule) }

// groupEntry is a group's key suffix in ev_tcode and ev_sched.
func groupEntry(fireID string) []byte { return append([]byte(fireID), '.', 0) }

// impliedGroup reports whether the group of fireID, whose events are of
// schedule scheduleID, goes without an entry in ev_sched: its fire id starts with the schedule's id and ".",
// as every fire id the emitter and the master make does, so the schedule's
// groups are the keys of ev_groups under that prefix (schedGroups). Such a
// prefix also holds the groups of schedules whose own ids start with it
// ("s.x" under "s."): readers check the schedule of what they find.
func impliedGroup(scheduleID, fireID string) bool {
	return len(fireID) > len(scheduleID) && fireID[len(scheduleID)] == '.' && fireID[:len(scheduleID)] == scheduleID
}

// schedGroups calls fn with the fire id of each group in ev_groups whose
// fire id starts with scheduleID "." (impliedGroup), in key order, until fn
// returns false.
func schedGroups(groups *bolt.Bucket, scheduleID string, fn func(fireID string) bool) {
	prefix := []byte(scheduleID + ".")
	c := groups.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if !fn(string(k[:len(k)-1])) {
			return
		}
	}
}

func (x *evtx) cache(g *group) *group {
	x.bySeq[g.seq] = g
	x.byFire[g.head.FireID] = g
	return g
}

func decodeGroupValue(v []byte) (uint64, uint64, error) {
	if len(v) < 8 {
		return 0, 0, errors.New("decode event group: short value")
	}
	n, k := binary.Uvarint(v[8:])
	if k <= 0 {
		return 0, 0, errors.New("decode event group: bad count")
	}
	return binary.BigEndian.Uint64(v), n, nil
}

// groupOf returns the group of fireID, or nil if it has none.
//
// A fire found without a group is remembered: inserting an event looks its
// fire up twice (for its id, then for its group), and ev_groups gains a key
// only through a group this evtx caches, which byFire finds first.
func (x *evtx) groupOf(fireID string) (*group, error) {
	if g, ok := x.byFire[fireID]; ok {
		return g, nil
	}
	if x.absent[fireID] {
		return nil, nil
	}
	key := strKey(fireID)
	v := x.groups.Get(key)
	if v == nil {
		if x.absent == nil {
			x.absent = map[string]bool{}
		}
		x.absent[fireID] = true
		return nil, nil
	}
	seq, n, err := decodeGroupValue(v)
	if err != nil {
		return nil, err
	}
	raw := x.heads.Get(seqKey(seq))
	if raw == nil {
		return nil, fmt.Errorf("event group %d of fire %q has no head", seq, fireID)
	}
	h, err := x.decodeHead(raw)
	if err != nil {
		return nil, fmt.Errorf("event group %d: %w", seq, err)
	}
	return x.cache(&group{seq: seq, head: h, count: n, sibKey: key}), nil
}

// groupCount returns the sequence and canonical count of fireID's group
// without decoding its head; ok is false if it has none.
func (x *evtx) groupCount(fireID string) (seq, count uint64, ok bool, err error) {
	if g, found := x.byFire[fireID]; found {
		return g.seq, g.count, true, nil
	}
	v := x.groups.Get(strKey(fireID))
	if v == nil {
		return 0, 0, false, nil
	}
	seq, count, err = decodeGroupValue(v)
	return seq, count, err == nil, err
}

// groupBySeq returns the group seq.
func (x *evtx) groupBySeq(seq uint64) (*group, error) {
	if g, ok := x.bySeq[seq]; ok {
		return g, nil
	}
	raw := x.heads.Get(seqKey(seq))
	if raw == nil {
		return nil, fmt.Errorf("event group %d has no head", seq)
	}
	h, err := x.decodeHead(raw)
	if err != nil {
		return nil, fmt.Errorf("event group %d: %w", seq, err)
	}
	g, err := x.groupOf(h.FireID)
	if err != nil {
		return nil, err
	}
	if g == nil || g.seq != seq {
		return nil, fmt.Errorf("event group %d of fire %q is not in %s", seq, h.FireID, bEvGroups)
	}
	return g, nil
}

// newGroup opens the group of e's fire with e as its head.
func (x *evtx) newGroup(e *model.Event) (*group, error) {
	seq, err := x.heads.NextSequence()
	if err != nil {
		return nil, err
	}
	// A one-off's head leaves what its schedule's row holds to that row.
	sc, err := x.schedule(e.ScheduleID)
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return nil, err
	}
	var raw []byte
	var h *model.Event
	if p, ok := x.prepared[e]; ok && sc != nil && p.sc == sc {
		raw, h = p.raw, p.head
	} else {
		t := headTemplate(e)
		if raw, err = encodeEventRef(&t, sc); err != nil {
			return nil, err
		}
		// The head is decoded back so that it holds what a reader sees.
		if h, err = x.decodeHead(raw); err != nil {
			return nil, err
		}
	}
	if err := x.heads.Put(seqKey(seq), raw); err != nil {
		return nil, err
	}
	g := &group{seq: seq, head: h, dirty: true, sibKey: strKey(e.FireID)}
	// A group's entries hold no value: a reader finds the group by the fire
	// id in the key (ev_groups), and tells them from loose events' by that.
	code, err := x.codes.prefix(e.TenantID)
	if err != nil {
		return nil, err
	}
	tk := append(append(append(make([]byte, 0, len(code)+len(e.FireID)+2), code...), e.FireID...), '.', 0) // code, groupEntry
	x.tenantRun.pack(x.tenant, tk, len(code))
	if err := x.tenant.Put(tk, []byte{}); err != nil {
		return nil, err
	}
	if !impliedGroup(e.ScheduleID, e.FireID) {
		sk := append(strKey(e.ScheduleID), groupEntry(e.FireID)...)
		packAppends(x.sched, sk, 0)
		if err := x.sched.Put(sk, []byte{}); err != nil {
			return nil, err
		}
	}
	g.fresh = true
	return x.cache(g), nil
}

// unrefHeads writes in full the heads of the schedule's event groups that
// leave fields to its row (refSchedule), before that row changes or goes.
func unrefHeads(tx *bolt.Tx, keys *tokenKey, scheduleID string) error {
	x := newEvtx(tx, keys)
	prefix := strKey(scheduleID)
	var fires []string
	scanPrefix(tx, bEvSched, prefix, func(k, v []byte) bool {
		// A group's entry: fire id, '.', NUL and no value (loose events
		// have their row key as the value).
		if len(v) == 0 && bytes.HasSuffix(k, []byte{'.', 0}) {
			fires = append(fires, string(k[len(prefix):len(k)-2]))
		}
		return true
	})
	schedGroups(x.groups, scheduleID, func(fireID string) bool {
		fires = append(fires, fireID)
		return true
	})
	for _, fireID := range fires {
		g, err := x.groupOf(fireID)
		if err != nil {
			return err
		}
		if g == nil || g.head.ScheduleID != scheduleID || !refersToSchedule(x.heads.Get(seqKey(g.seq))) {
			continue
		}
		raw, err := encodeEvent(g.head)
		if err != nil {
			return err
		}
		if err := x.heads.Put(seqKey(g.seq), raw); err != nil {
			return err
		}
	}
	return nil
}

// flush writes the counts of the groups this transaction changed, in key
// order, so that new groups of fires whose ids sort in creation order are
// appends (packAppends), and the heads that x.due holds.
func (x *evtx) flush() error {
	if err := x.due.flush(); err != nil {
		return err
	}
	var dirty []*group
	for _, g := range x.bySeq {
		if g.dirty {
			dirty = append(dirty, g)
		}
	}
	slices.SortFunc(dirty, func(a, b *group) int { return bytes.Compare(a.sibKey, b.sibKey) })
	var run appender
	for _, g := range dirty {
		if g.fresh {
			run.pack(x.groups, g.sibKey, 0)
		}
		v := binary.AppendUvarint(seqKey(g.seq), g.count)
		if err := x.groups.Put(g.sibKey, v); err != nil {
			return err
		}
		g.dirty, g.fresh = false, false
	}
	return nil
}

// load returns the event stored at rk, or held in its schedule's row when
// rk is an impliedKey; model.ErrNotFound if none.
func (x *evtx) load(rk []byte) (*model.Event, error) {
	if isImpliedKey(rk) {
		e, err := x.impliedIn(impliedScheduleID(rk))
		if err == nil && e == nil {
			err = model.ErrNotFound
		}
		return e, err
	}
	raw := x.rows.Get(rk)
	if raw == nil {
		return nil, model.ErrNotFound
	}
	var h *model.Event
	if raw[0] == eventRowV2 {
		g, err := x.groupBySeq(seqOf(rk))
		if err != nil {
			return nil, err
		}
		h = g.head
	}
	return decodeRow(raw, h, slotOf(rk), x.dict.tokenKey())
}

// locate returns the row key of event id (an impliedKey for an event that
// its schedule's row holds), or nil if there is none.
func (x *evtx) locate(id string) ([]byte, error) {
	if rk := x.ids.Get([]byte(id)); rk != nil {
		return bytes.Clone(rk), nil
	}
	i := strings.LastIndexByte(id, '.')
	if i < 0 {
		return nil, nil
	}
	idx, err := strconv.Atoi(id[i+1:])
	if err != nil || idx < 0 || idx >= looseSlot || strconv.Itoa(idx) != id[i+1:] {
		return nil, nil
	}
	g, err := x.groupOf(id[:i])
	if err != nil {
		return nil, err
	}
	if g == nil {
		if idx != 0 {
			return nil, nil
		}
		e, err := x.impliedOf(id[:i])
		if err != nil || e == nil {
			return nil, err
		}
		return impliedKey(e.ScheduleID), nil
	}
	rk := rowKey(g.seq, uint32(idx))
	if x.rows.Get(rk) == nil {
		return nil, nil
	}
	return rk, nil
}

// get returns event id and its row key; model.ErrNotFound if none.
func (x *evtx) get(id string) ([]byte, *model.Event, error) {
	rk, err := x.locate(id)
	if err != nil {
		return nil, nil, err
	}
	if rk == nil {
		return nil, nil, model.ErrNotFound
	}
	e, err := x.load(rk)
	if err != nil {
		return nil, nil, err
	}
	return rk, e, nil
}

// insert stores e unless an event with its id exists.
func (x *evtx) insert(e *model.Event) (bool, error) {
	if rk, err := x.locate(e.ID); err != nil || rk != nil {
		return false, err
	}
	g, err := x.groupOf(e.FireID)
	if err != nil {
		return false, err
	}
	if g == nil {
		// An event joining a fire whose event a row holds: that one gets
		// the group first.
		ie, err := x.impliedOf(e.FireID)
		if err != nil {
			return false, err
		}
		if ie != nil {
			if _, err := x.materialise(ie, ie); err != nil {
				return false, err
			}
			g = x.byFire[e.FireID]
		}
	}
	opened := g == nil
	if opened {
		if g, err = x.newGroup(e); err != nil {
			return false, err
		}
	}
	if canonical(e, g.head) {
		rk := rowKey(g.seq, uint32(e.Index))
		// A group opened just now has a new sequence, and so no rows.
		if !opened && x.rows.Get(rk) != nil {
			return false, nil
		}
		g.count++
		g.dirty = true
		return true, x.put(rk, nil, e)
	}
	// A loose event takes the slot after the group's last one.
	slot := uint32(looseSlot)
	k := reverseCursor(x.rows).below(rowKey(g.seq+1, 0))
	if k != nil && seqOf(k) == g.seq && slotOf(k) >= looseSlot {
		if slotOf(k) == 1<<32-1 {
			return false, fmt.Errorf("fire %q: too many events: %w", e.FireID, model.ErrInvalid)
		}
		slot = slotOf(k) + 1
	}
	rk := rowKey(g.seq, slot)
	if err := x.ids.Put([]byte(e.ID), rk); err != nil {
		return false, err
	}
	x.tenantRun.reset()
	tk, err := x.codes.key(e.TenantID, []byte(e.ID))
	if err != nil {
		return false, err
	}
	if err := x.tenant.Put(tk, rk); err != nil {
		return false, err
	}
	if err := x.sched.Put(append(strKey(e.ScheduleID), e.ID...), rk); err != nil {
		return false, err
	}
	return true, x.put(rk, nil, e)
}

// Index keys derived from an event and its row key.

// fenceValue is the due index's value for e: empty for fence 0.
func fenceValue(e *model.Event) []byte {
	if e.Fence == 0 {
		return []byte{}
	}
	return binary.BigEndian.AppendUint64(nil, uint64(e.Fence))
}

func fireIndexKey(e *model.Event, rk []byte) ([]byte, error) {
	code, err := statusCode(e.Status)
	if err != nil {
		return nil, err
	}
	b := append(rk[:8:8], code)
	return append(b, rk[8:]...), nil
}

func policyKey(e *model.Event, rk []byte) []byte {
	return append(appendTime(policyPrefix(e.PolicyID, policyClass(e.Status)), e.LaunchAt), rk...)
}

func policyPrefix(policyID, class string) []byte { return strKey(policyID, class) }

func finishedKey(e *model.Event, rk []byte) []byte {
	return append(appendTime(nil, *e.FinishedAt), rk...)
}

// put writes e at rk with its index keys; old (nil for a new event) is the
// stored version. Index keys that differ between old and e are moved; keys
// that did not change are left alone, so a transition dirties as few index
// pages as it can.
func (x *evtx) put(rk []byte, old, e *model.Event) error {
	var raw []byte
	if slotOf(rk) < looseSlot {
		g, err := x.groupBySeq(seqOf(rk))
		if err != nil {
			return err
		}
		raw = encodeRow(e, g.head, x.dict.tokenKey())
	} else {
		var err error
		if raw, err = encodeEvent(e); err != nil {
			return err
		}
	}
	if err := x.rows.Put(rk, raw); err != nil {
		return err
	}
	var oldDue, newDue []byte
	var err error
	if old != nil && dueIndexed(old.Status) {
		if oldDue, err = x.dueKey(old, rk); err != nil {
			return err
		}
	}
	if dueIndexed(e.Status) {
		if newDue, err = x.dueKey(e, rk); err != nil {
			return err
		}
	}
	if old == nil || old.Fence != e.Fence || !bytes.Equal(oldDue, newDue) {
		if oldDue != nil {
			if err := x.due.delete(oldDue); err != nil {
				return err
			}
		}
		if newDue != nil {
			if err := x.due.put(newDue, fenceValue(e)); err != nil {
				return err
			}
		}
	}
	var oldFire, oldPolicy, oldFinished []byte
	if old != nil {
		if oldFire, err = fireIndexKey(old, rk); err != nil {
			return err
		}
		if policyIndexed(old) {
			oldPolicy = policyKey(old, rk)
		}
		if retained(old) {
			oldFinished = finishedKey(old, rk)
		}
	}
	newFire, err := fireIndexKey(e, rk)
	if err != nil {
		return err
	}
	var newPolicy, newFinished []byte
	if policyIndexed(e) {
		newPolicy = policyKey(e, rk)
	}
	if retained(e) {
		newFinished = finishedKey(e, rk)
	}
	if err := move(x.fire, oldFire, newFire); err != nil {
		return err
	}
	if err := move(x.policy, oldPolicy, newPolicy); err != nil {
		return err
	}
	return move(x.finished, oldFinished, newFinished)
}

// remove deletes the event e stored at rk with all its keys. A group left
// without events goes too.
func (x *evtx) remove(rk []byte, e *model.Event) error {
	type key struct {
		b *bolt.Bucket
		k []byte
	}
	fk, err := fireIndexKey(e, rk)
	if err != nil {
		return err
	}
	dels := []key{{x.fire, fk}, {x.rows, rk}}
	if dueIndexed(e.Status) {
		dk, err := x.dueKey(e, rk)
		if err != nil {
			return err
		}
		if err := x.due.delete(dk); err != nil {
			return err
		}
	}
	if policyIndexed(e) {
		dels = append(dels, key{x.policy, policyKey(e, rk)})
	}
	if retained(e) {
		dels = append(dels, key{x.finished, finishedKey(e, rk)})
	}
	g, err := x.groupBySeq(seqOf(rk))
	if err != nil {
		return err
	}
	if slotOf(rk) >= looseSlot {
		dels = append(dels, key{x.ids, []byte(e.ID)},
			key{x.sched, append(strKey(e.ScheduleID), e.ID...)})
		if p := x.codes.existing(e.TenantID); p != nil {
			dels = append(dels, key{x.tenant, append(bytes.Clone(p), e.ID...)})
		}
	} else {
		g.count--
		g.dirty = true
	}
	for _, d := range dels {
		if err := d.b.Delete(d.k); err != nil {
			return err
		}
	}
	if k, _ := x.rows.Cursor().Seek(seqKey(g.seq)); k != nil && seqOf(k) == g.seq {
		return nil
	}
	// The last event of the group is gone: so is the group.
	h := g.head
	dels = []key{{x.heads, seqKey(g.seq)}, {x.groups, g.sibKey}}
	if p := x.codes.existing(h.TenantID); p != nil {
		dels = append(dels, key{x.tenant, append(bytes.Clone(p), groupEntry(h.FireID)...)})
	}
	if !impliedGroup(h.ScheduleID, h.FireID) {
		dels = append(dels, key{x.sched, append(strKey(h.ScheduleID), groupEntry(h.FireID)...)})
	}
	for _, d := range dels {
		if err := d.b.Delete(d.k); err != nil {
			return err
		}
	}
	delete(x.bySeq, g.seq)
	delete(x.byFire, h.FireID)
	return nil
}
