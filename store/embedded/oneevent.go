package embedded

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// A one-off stored with its fire and that fire's one event, which nothing
// has changed yet, is one record: the schedule's row
// holds the fire (impliesFire) and the event (impliesEvent), and the event
// has no group, head, row, ev_fire or ev_tcode entry. Its only entries
// besides the row are the schedule's in schedules_by_tcode, whose value
// says that the row holds an event (tenantImplied), and one in ev_due
// whose row key is impliedKey of the schedule id. Such an event is always
// pending: the first change to it (a claim, a transition, a cancel, an
// event joining its fire, a change to its schedule or fire) materialises
// it into a group of its own in the same transaction (materialise), and
// from then on it is an ordinary event.

// The key that stands for an implied event's row key in ev_due starts with
// a mark that a group sequence (the first 8 bytes of a row key) would
// start with only after 2^63 groups: impliedPacked and the 10 bytes of a
// schedule id of the API's form (model.ParseID),
// or impliedMark and the id as it is.
const (
	impliedMark   = 0xff
	impliedPacked = 0xfe
)

// appendImpliedKey appends the key that stands for the row key of the
// event that the row of schedule scheduleID holds.
func appendImpliedKey(b []byte, scheduleID string) []byte {
	if raw, ok := model.ParseID(model.PrefixSchedule, scheduleID); ok {
		return append(append(b, impliedPacked), raw[:]...)
	}
	return append(append(b, impliedMark), scheduleID...)
}

func impliedKey(scheduleID string) []byte { return appendImpliedKey(nil, scheduleID) }

// impliedScheduleID returns the schedule id of the impliedKey rk.
func impliedScheduleID(rk []byte) string {
	if rk[0] == impliedPacked && len(rk) == 11 {
		return model.FormatID(model.PrefixSchedule, [10]byte(rk[1:11]))
	}
	return string(rk[1:])
}

// isImpliedKey reports whether rk is an impliedKey, not a row key.
func isImpliedKey(rk []byte) bool {
	return len(rk) > 0 && (rk[0] == impliedMark || rk[0] == impliedPacked)
}

// tenantImplied is the value of a schedule's entry in schedules_by_tcode
// when its row holds an event (the others have none), so that the tenant's
// event counts and lists find those events without reading every row.
var tenantImplied = []byte{1}

func isTenantImplied(v []byte) bool { return len(v) == 1 && v[0] == tenantImplied[0] }

// impliesEvent reports whether the row of the one-off sc, holding its fire
// f (impliesFire), can hold events too: f has one event, e, canonical
// (index 0), of sc's tenant and f's fire time, whose target, payload and
// the rest are sc's (refSchedule), as created (pristine). A one-off with a
// policy keeps the ordinary form: its event needs an ev_policy entry,
// which this form does not give.
func impliesEvent(sc *model.Schedule, f *model.Fire, events []*model.Event) bool {
	if len(events) != 1 || sc.PolicyID != "" || events[0].ExpireAt != nil {
		return false
	}
	e := events[0]
	return e.FireID == f.ID && e.Index == 0 && isFirstEventID(e.ID, f.ID) && e.FireTime.Equal(f.FireTime) &&
		e.ScheduleID == sc.ID && refSchedule(e, sc) && pristine(e)
}

// isFirstEventID reports whether id is model.EventID(fireID, 0).
func isFirstEventID(id, fireID string) bool {
	return len(id) == len(fireID)+2 && id[:len(fireID)] == fireID && id[len(fireID):] == ".0"
}

// pristine reports whether e is as the emitter creates it (with any
// release token).
func pristine(e *model.Event) bool {
	return e.Status == model.EventPending && e.Fence == 0 && e.Attempts == 0 && e.LastError == "" &&
		e.TokenExpiresAt == nil && !e.TokenTimedOut && e.DeliveredAt == nil && e.FinishedAt == nil
}

// Flags of an event held in its schedule's row.
const (
	rowEvLaunchAbs    = 1 << iota // the launch time is stored in full, not from the fire time
	rowEvCreatedAbs               // the creation time is stored in full, not from the schedule's
	rowEvUpdated                  // the update time is not the creation time: stored
	rowEvDeadline                 // a deadline is stored
	rowEvToken                    // a release token is stored as a string
	rowEvTokenHex                 // a release token of lower-case hex is stored as its bytes
	rowEvTokenDerived             // the release token is the store's for the event id (tokenKey), not stored
	rowEvTraceParent              // the event's trace context is stored, last
)

// encodeRowEvent encodes the event e that the row of sc holds with its
// fire f (impliesEvent): what the row does not give, which is its count,
// shard, launch time (from the fire time), deadline, creation time (from
// the schedule's) and release token (the emitter's, 32 hex digits, as 16
// bytes, or nothing when k derives it).
func encodeRowEvent(sc *model.Schedule, f *model.Fire, e *model.Event, k *tokenKey) []byte {
	var flags uint64
	if _, ok := timeDelta(f.FireTime, e.LaunchAt); !ok {
		flags |= rowEvLaunchAbs
	}
	if _, ok := timeDelta(sc.CreatedAt, e.CreatedAt); !ok {
		flags |= rowEvCreatedAbs
	}
	if !sameTime(e.UpdatedAt, e.CreatedAt) {
		flags |= rowEvUpdated
	}
	if e.Deadline != nil {
		flags |= rowEvDeadline
	}
	token, tokenHex := tokenBytes(e.ReleaseToken)
	switch {
	case tokenHex && k.derives(e.ID, token):
		flags |= rowEvTokenDerived
	case tokenHex:
		flags |= rowEvTokenHex
	case e.ReleaseToken != "":
		flags |= rowEvToken
	}
	if e.TraceParent != "" {
		flags |= rowEvTraceParent
	}
	b := binary.AppendUvarint(make([]byte, 0, 32), flags)
	b = binary.AppendVarint(b, int64(e.Count))
	b = binary.AppendVarint(b, int64(e.Shard))
	b = putTimeFrom(b, f.FireTime, e.LaunchAt)
	b = putTimeFrom(b, sc.CreatedAt, e.CreatedAt)
	if flags&rowEvUpdated != 0 {
		b = putTime(b, e.UpdatedAt)
	}
	if e.Deadline != nil {
		b = putTime(b, *e.Deadline)
	}
	switch {
	case flags&rowEvTokenHex != 0:
		b = putBytes(b, token)
	case flags&rowEvToken != 0:
		b = putStr(b, e.ReleaseToken)
	}
	if flags&rowEvTraceParent != 0 {
		b = putStr(b, e.TraceParent)
	}
	return b
}

// tokenBytes returns the bytes of the release token s when s is a
// non-empty even number of lower-case hex digits (the emitter's tokens),
// which hex.EncodeToString gives back from them; false otherwise.
func tokenBytes(s string) ([]byte, bool) {
	if s == "" || len(s)%2 != 0 {
		return nil, false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return nil, false
		}
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// decodeRowEvent returns the event that the row of sc holds with its fire
// f, from its encoding raw (encodeRowEvent) with the store's token key k.
func decodeRowEvent(sc *model.Schedule, f *model.Fire, raw []byte, k *tokenKey) (*model.Event, error) {
	d := decoder{b: raw}
	flags := d.uvarint()
	e := &model.Event{
		ID: model.EventID(f.ID, 0), TenantID: sc.TenantID, ScheduleID: sc.ID, FireID: f.ID, FireTime: f.FireTime,
		Priority: sc.Priority, Target: sc.Target, Payload: sc.Payload, MaxAttempts: sc.MaxAttempts,
		Status: model.EventPending,
	}
	e.Count = int(d.varint())
	e.Shard = int(d.varint())
	e.LaunchAt = d.timeFrom(flags&rowEvLaunchAbs != 0, f.FireTime)
	e.CreatedAt = d.timeFrom(flags&rowEvCreatedAbs != 0, sc.CreatedAt)
	e.UpdatedAt = e.CreatedAt
	if flags&rowEvUpdated != 0 {
		e.UpdatedAt = d.time()
	}
	if flags&rowEvDeadline != 0 {
		t := d.time()
		e.Deadline = &t
	}
	switch {
	case flags&rowEvTokenDerived != 0:
		var err error
		if e.ReleaseToken, err = k.token(e.ID); err != nil && d.err == nil {
			d.err = err
		}
	case flags&rowEvTokenHex != 0:
		e.ReleaseToken = hex.EncodeToString(d.bytes())
	case flags&rowEvToken != 0:
		e.ReleaseToken = d.str()
	}
	if flags&rowEvTraceParent != 0 {
		e.TraceParent = d.str()
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("event in the row of schedule %q: %w", sc.ID, d.err)
	}
	return e, nil
}

// encodeScheduleEvent is encodeScheduleFire with the event e
// (impliesEvent) held in the row after the fire (encodeRowEvent).
func encodeScheduleEvent(sc *model.Schedule, child *model.Child, f *model.Fire, e *model.Event, c rowCodes) ([]byte, error) {
	b, err := encodeScheduleFire(sc, child, f, c)
	if err != nil {
		return nil, err
	}
	b[1] |= schedEvent
	return putBytes(b, encodeRowEvent(sc, f, e, c.tokenKey())), nil
}

// rowHasEvent reports, without decoding it, whether the schedule row raw
// holds an event.
func rowHasEvent(raw []byte) bool { return rowFlags(raw)&schedEvent != 0 }

// rowParts is a schedule row that holds an event, decoded.
type rowParts struct {
	sc    *model.Schedule
	child *model.Child
	fire  *model.Fire
	event *model.Event
}

// decodeRowParts decodes the row raw of schedule id, which holds an event.
func decodeRowParts(id string, raw []byte, c rowCodes) (*rowParts, error) {
	sc, child, fire, event, err := decodeScheduleParts([]byte(id), raw, c)
	if err != nil {
		return nil, err
	}
	if fire == nil || event == nil {
		return nil, fmt.Errorf("schedule %q: the row holds no event", id)
	}
	f, err := decodeRowFire(sc, fire)
	if err != nil {
		return nil, fmt.Errorf("decode schedule %q: %w", id, err)
	}
	e, err := decodeRowEvent(sc, f, event, c.tokenKey())
	if err != nil {
		return nil, err
	}
	return &rowParts{sc: sc, child: child, fire: f, event: e}, nil
}

// impliedIn returns the event that the row of schedule scheduleID holds;
// nil if none.
func (x *evtx) impliedIn(scheduleID string) (*model.Event, error) {
	raw := x.schedules.Get(schedKey(scheduleID))
	if !rowHasEvent(raw) {
		return nil, nil
	}
	p, err := decodeRowParts(scheduleID, raw, x.dict)
	if err != nil {
		return nil, err
	}
	return p.event, nil
}

// impliedOf returns the event of fire fireID that its schedule's row
// holds; nil if none. The schedule is one of those fireScheduleIDs
// names. A fire found without one is
// remembered: rows gain events only in creates, which write them before
// they make their evtx.
func (x *evtx) impliedOf(fireID string) (*model.Event, error) {
	if x.noImplied[fireID] {
		return nil, nil
	}
	for _, id := range fireScheduleIDs(fireID) {
		e, err := x.impliedIn(id)
		if err != nil {
			return nil, err
		}
		if e != nil && e.FireID == fireID {
			return e, nil
		}
	}
	x.markNoImplied(fireID)
	return nil, nil
}

// markNoImplied remembers that no row holds an event of fire fireID.
func (x *evtx) markNoImplied(fireID string) {
	if x.noImplied == nil {
		x.noImplied = map[string]bool{}
	}
	x.noImplied[fireID] = true
}

// fireScheduleIDs returns the ids that the schedule of fire id can have if
// id is a model.FireID: the schedule's id, ".", the second, maybe "." and
// milliseconds, ".v" and the version, so one of two prefixes.
func fireScheduleIDs(id string) []string {
	i := strings.LastIndex(id, ".v")
	if i < 0 || !digits(id[i+2:]) {
		return nil
	}
	rest := id[:i]
	j := strings.LastIndexByte(rest, '.')
	if j <= 0 {
		return nil
	}
	out := make([]string, 0, 2)
	if digits(strings.TrimPrefix(rest[j+1:], "-")) {
		out = append(out, rest[:j])
	}
	if len(rest)-j-1 == 3 && digits(rest[j+1:]) {
		if k := strings.LastIndexByte(rest[:j], '.'); k > 0 && digits(strings.TrimPrefix(rest[k+1:j], "-")) {
			out = append(out, rest[:k])
		}
	}
	return out
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// putImpliedDue writes the ev_due entry of e, the pending event that the
// row of its schedule holds.
func (x *evtx) putImpliedDue(e *model.Event) error {
	var rk [64]byte // impliedKey(e.ScheduleID), on the stack
	k, err := x.dueKey(e, appendImpliedKey(rk[:0], e.ScheduleID))
	if err != nil {
		return err
	}
	return x.due.put(k, fenceValue(e))
}

// materialise turns old, the event that its schedule's row holds, into an
// ordinary event of a group of its own, stored as e (old itself, or old
// changed by a claim or a transition), and takes it out of the row and
// its entries. It returns e's row key.
func (x *evtx) materialise(old, e *model.Event) ([]byte, error) {
	id := old.ScheduleID
	raw := x.schedules.Get(schedKey(id))
	if !rowHasEvent(raw) {
		return nil, fmt.Errorf("schedule %q: the row holds no event to materialise", id)
	}
	p, err := decodeRowParts(id, raw, x.dict)
	if err != nil {
		return nil, err
	}
	implied := rowChildImplied(raw) // read before the writes, which may remap raw
	ik := impliedKey(id)
	dk, err := x.dueKey(p.event, ik)
	if err != nil {
		return nil, err
	}
	if err := x.due.delete(dk); err != nil {
		return nil, err
	}
	doc, err := encodeScheduleFire(p.sc, p.child, p.fire, x.dict)
	if err != nil {
		return nil, err
	}
	if err := x.schedules.Put(schedKey(id), markChildImplied(doc, implied)); err != nil {
		return nil, err
	}
	tk, err := x.codes.key(p.sc.TenantID, appendTenantSched(nil, id))
	if err != nil {
		return nil, err
	}
	if err := x.schedTenant.Put(tk, nil); err != nil {
		return nil, err
	}
	x.markNoImplied(old.FireID)
	delete(x.absent, old.FireID)
	g, err := x.newGroup(old)
	if err != nil {
		return nil, err
	}
	rk := rowKey(g.seq, 0)
	g.count++
	if err := x.groups.Put(g.sibKey, binary.AppendUvarint(seqKey(g.seq), g.count)); err != nil {
		return nil, err
	}
	g.dirty, g.fresh = false, false
	return rk, x.put(rk, nil, e)
}

// materialiseIn materialises the event that the row of schedule
// scheduleID holds, if any, unchanged: before an event joins its fire, or
// the row changes or goes.
func (x *evtx) materialiseIn(scheduleID string) error {
	e, err := x.impliedIn(scheduleID)
	if err != nil || e == nil {
		return err
	}
	_, err = x.materialise(e, e)
	return err
}

// impliedTenantCount returns the number of events that the rows of the
// tenant's schedules (schedules_by_tcode under prefix) hold, at most max
// when max > 0.
func impliedTenantCount(tx *bolt.Tx, prefix []byte, max int) int {
	n := 0
	c := tx.Bucket(bSchedTenant).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if isTenantImplied(v) {
			if n++; max > 0 && n >= max {
				break
			}
		}
	}
	return n
}

// listRowEvents adds to a list (listByEntries) the events of rows after
// the id after that match. full reports whether the list holds its limit,
// last then gives its last id.
//
// The event a schedule's row holds has the id of the schedule, ".", and
// more, so it sorts after the schedule's id and before the id of every
// schedule whose id sorts after that event's; the tenant's schedules are
// walked in id order from after, and the walk stops at the first schedule
// whose id is beyond the last id of a full list. A schedule whose id sorts
// before after holds an event after it only if its id starts after and
// the byte of after that follows sorts before "." or is one: those are
// looked up first.
func (x *evtx) listRowEvents(rows rowEvents, after string, full func() bool, add func(*model.Event), match func(*model.Event) bool, last func() string) error {
	visit := func(id string) error {
		e, err := x.impliedIn(id)
		if err != nil || e == nil {
			return err
		}
		if e.ID > after && match(e) {
			add(e)
		}
		return nil
	}
	if rows.schedule != "" {
		return visit(rows.schedule)
	}
	prefix := rows.tenant
	if prefix == nil {
		return nil
	}
	for i := 1; i < len(after); i++ {
		if after[i] > '.' {
			continue
		}
		if v := x.schedTenant.Get(appendTenantSched(bytes.Clone(prefix), after[:i])); isTenantImplied(v) {
			if err := visit(after[:i]); err != nil {
				return err
			}
		}
	}
	for id, v := range tenantSchedules(x.schedTenant, prefix, after) {
		if full() && id >= last() {
			break
		}
		if !isTenantImplied(v) {
			continue
		}
		if err := visit(id); err != nil {
			return err
		}
	}
	return nil
}
