package embedded

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// The due index (ev_due) keys a waiting (pending or retrying) event by its
// lane after the shard and status: the tenant's code (tenantcode.go), the
// policy id and a NUL, and the priority (appendPriority). EventClaimDue
// finds a shard's lanes by seeking past each one and shares a claim over
// them (store.ShareClaim), reading no lane further than it counts or
// takes. Each part is prefix-free, so a lane's entries are exactly those
// under its prefix, earliest launch time first. After the launch time
// comes the event's turn (appendTurn): its index in its fire first, so
// that the fires due at one instant take turns.
//
// In a lane of a policy the key has the event's schedule id and a NUL
// after the lane, before the launch time, so that each schedule's waiting
// events of the lane are together in the lane's order, and ev_due_heads
// holds each such schedule's head: shard, status, lane, the launch time
// of its first entry, schedule id (dueIndex keeps it). A claim of the
// lane reads the heads due, earliest first, and takes the schedules'
// entries in turns (store.ShareTurns), however long one's backlog is.

// appendPriority appends p so that higher priorities sort first: ^p in an
// order-preserving encoding, one byte for priorities -120 to 119 and
// otherwise a byte that gives the length, then the big-endian bytes.
func appendPriority(b []byte, p int) []byte {
	w := ^int64(p)
	if w >= -120 && w <= 119 {
		return append(b, byte(w+128))
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(w))
	n := 1
	if w > 0 {
		for n < 8 && uint64(w)>>(8*n) != 0 {
			n++
		}
		b = append(b, byte(0xf7+n))
	} else {
		for n < 8 && w < -(1<<(8*n)) {
			n++
		}
		b = append(b, byte(0x08-n))
	}
	return append(b, buf[8-n:]...)
}

// readPriority decodes appendPriority's encoding at the front of b and
// returns its length; 0 if b is too short.
func readPriority(b []byte) (int, int) {
	if len(b) == 0 {
		return 0, 0
	}
	t := b[0]
	if t >= 0x08 && t <= 0xf7 {
		return int(^(int64(t) - 128)), 1
	}
	n := int(t) - 0xf7
	if t < 0x08 {
		n = 0x08 - int(t)
	}
	if len(b) < 1+n {
		return 0, 0
	}
	var v uint64
	for _, c := range b[1 : 1+n] {
		v = v<<8 | uint64(c)
	}
	if t < 0x08 {
		v |= ^uint64(0) << (8 * n) // the sign; a shift by 64 is 0
	}
	return int(^int64(v)), 1 + n
}

// appendLane appends the lane of e, whose tenant has code.
func appendLane(b, code []byte, e *model.Event) []byte {
	b = append(append(append(b, code...), e.PolicyID...), 0)
	return appendPriority(b, e.Priority)
}

// dueLane is the lane at the front of b (a due key after its status):
// the tenant code, the policy id and the length of the whole lane.
func dueLane(b []byte) (code []byte, policy []byte, prio, n int, err error) {
	_, c := binary.Uvarint(b)
	if c <= 0 {
		return nil, nil, 0, 0, fmt.Errorf("due entry %x: bad tenant code", b)
	}
	i := bytes.IndexByte(b[c:], 0)
	if i < 0 {
		return nil, nil, 0, 0, fmt.Errorf("due entry %x: no policy", b)
	}
	prio, pn := readPriority(b[c+i+1:])
	if pn == 0 {
		return nil, nil, 0, 0, fmt.Errorf("due entry %x: no priority", b)
	}
	return b[:c], b[c : c+i], prio, c + i + 1 + pn, nil
}

// appendTurn appends what follows the launch time in the due key of a
// waiting event: its index in its fire as a byte that gives the number of
// bytes (0-4) then the index in those, big-endian, so that a smaller index
// sorts first; then its row key. A canonical event's row key ends with
// its index (its slot), which is left out there.
func appendTurn(b []byte, index int, rk []byte) []byte {
	if len(rk) == rowKeyLen && !isImpliedKey(rk) && slotOf(rk) < looseSlot {
		index, rk = int(slotOf(rk)), rk[:8]
	}
	i := uint32(min(max(index, 0), math.MaxUint32))
	n := (bits.Len32(i) + 7) / 8
	b = append(b, byte(n))
	for k := n - 1; k >= 0; k-- {
		b = append(b, byte(i>>(8*k)))
	}
	return append(b, rk...)
}

// appendRowKeyOfTurn appends the row key of the turn t (appendTurn's) to
// dst, which may end where t starts.
func appendRowKeyOfTurn(dst, t []byte) ([]byte, error) {
	if len(t) > 0 && t[0] <= 4 && len(t) > 1+int(t[0]) {
		n := int(t[0])
		var i uint32
		for _, c := range t[1 : 1+n] {
			i = i<<8 | uint32(c)
		}
		switch rest := t[1+n:]; {
		case isImpliedKey(rest) || len(rest) == rowKeyLen:
			return append(dst, rest...), nil
		case len(rest) == 8:
			return binary.BigEndian.AppendUint32(append(dst, rest...), i), nil
		}
	}
	return nil, fmt.Errorf("due entry turn %x: bad", t)
}

// dueKey is e's key in ev_due, rk its row key.
func (x *evtx) dueKey(e *model.Event, rk []byte) ([]byte, error) {
	code, err := statusCode(e.Status)
	if err != nil {
		return nil, err
	}
	if e.Status == model.EventScheduled {
		// Scheduled events are ordered by fence first, so that a claim finds
		// those left by older owners without walking the ones it holds.
		b := append(appendInt32(make([]byte, 0, 4+1+8+timeLen+len(rk)), e.Shard), code)
		b = binary.BigEndian.AppendUint64(b, uint64(e.Fence))
		return append(appendTime(b, e.LaunchAt), rk...), nil
	}
	tc, err := x.codes.prefix(e.TenantID)
	if err != nil {
		return nil, err
	}
	b := append(appendInt32(make([]byte, 0, 4+1+len(tc)+len(e.PolicyID)+1+9+len(e.ScheduleID)+1+timeLen+5+len(rk)), e.Shard), code)
	b = appendLane(b, tc, e)
	if e.PolicyID != "" {
		b = append(append(b, e.ScheduleID...), 0)
	}
	return appendTurn(appendTime(b, e.LaunchAt), e.Index, rk), nil
}

// dueSplit splits k, the ev_due key of a waiting event, at the end of its
// lane and at the end of its schedule's prefix (the same in a lane without
// a policy), after which come the launch time and the turn.
func dueSplit(k []byte) (lane, sched int, err error) {
	if len(k) < 5 {
		return 0, 0, fmt.Errorf("due entry %x: short", k)
	}
	_, policy, _, n, err := dueLane(k[5:])
	if err != nil {
		return 0, 0, err
	}
	lane, sched = 5+n, 5+n
	if len(policy) > 0 {
		i := bytes.IndexByte(k[lane:], 0)
		if i < 0 {
			return 0, 0, fmt.Errorf("due entry %x: no schedule", k)
		}
		sched = lane + i + 1
	}
	if len(k) < sched+timeLen {
		return 0, 0, fmt.Errorf("due entry %x: short", k)
	}
	return lane, sched, nil
}

// headKey is the ev_due_heads key of the schedule whose prefix in ev_due
// is sp (the lane ending at lane) with its first entry launched at at.
func headKey(sp []byte, lane int, at []byte) []byte {
	b := append(make([]byte, 0, len(sp)+timeLen), sp[:lane]...)
	return append(append(b, at...), sp[lane:len(sp)-1]...)
}

// dueIndex is ev_due with ev_due_heads, which its writes keep: a write
// of a waiting entry of a policy lane that changes the launch time of its
// schedule's first entry moves the schedule's head. After hold, the heads
// move only at flush, once for each schedule written: a claim or an
// insert of many of one schedule's events then pays two seeks for it, not
// one for each event.
type dueIndex struct {
	due, heads *bolt.Bucket
	held       map[string]heldHead // by schedule's prefix; nil: not holding
	// appends: this transaction creates rows, whose waiting entries may
	// be appends to their lanes (a policy's one-offs of ids in creation
	// order), packed by packAppends.
	appends bool
}

// heldHead is what flush needs of a schedule: where its lane ends in its
// prefix, and the launch time of its first entry before the writes (nil:
// it had none).
type heldHead struct {
	lane int
	at   []byte
}

func (d *dueIndex) hold() {
	if d.held == nil {
		d.held = map[string]heldHead{}
	}
}

// first returns a copy of the launch time of the first entry under the
// schedule's prefix sp; nil if it has none.
func (d *dueIndex) first(sp []byte) []byte {
	k, _ := d.due.Cursor().Seek(sp)
	if k == nil || !hasPrefix(k, sp) {
		return nil
	}
	return bytes.Clone(k[len(sp) : len(sp)+timeLen])
}

// flush moves the heads of the schedules written since hold.
func (d *dueIndex) flush() error {
	for sp, h := range d.held {
		at := d.first([]byte(sp))
		if bytes.Equal(at, h.at) {
			continue
		}
		if h.at != nil {
			if err := d.heads.Delete(headKey([]byte(sp), h.lane, h.at)); err != nil {
				return err
			}
		}
		if at != nil {
			if err := d.heads.Put(headKey([]byte(sp), h.lane, at), []byte{}); err != nil {
				return err
			}
		}
	}
	clear(d.held)
	return nil
}

// holding records the schedule of k, a policy lane's entry, before its
// first write since hold; it reports whether d holds.
func (d *dueIndex) holding(k []byte, lane, sched int) bool {
	if d.held == nil {
		return false
	}
	if _, ok := d.held[string(k[:sched])]; !ok {
		d.held[string(k[:sched])] = heldHead{lane: lane, at: d.first(k[:sched])}
	}
	return true
}

// inTurns splits k at the end of its lane and of its schedule's prefix
// (dueSplit) if it is the entry of a waiting event in a lane of a policy;
// ok is false for other entries.
func inTurns(k []byte) (lane, sched int, ok bool, err error) {
	if len(k) < 5 || k[4] == statusCodes[model.EventScheduled] {
		return 0, 0, false, nil
	}
	lane, sched, err = dueSplit(k)
	return lane, sched, err == nil && lane != sched, err
}

func (d *dueIndex) put(k, v []byte) error {
	lane, sched, ok, err := inTurns(k)
	if err != nil {
		return err
	}
	if d.appends && lane > 0 {
		packAppends(d.due, k, lane)
	}
	if ok && !d.holding(k, lane, sched) {
		sp, at := k[:sched], k[sched:sched+timeLen]
		if old := d.first(sp); old == nil || bytes.Compare(at, old) < 0 {
			if old != nil {
				if err := d.heads.Delete(headKey(sp, lane, old)); err != nil {
					return err
				}
			}
			if err := d.heads.Put(headKey(sp, lane, at), []byte{}); err != nil {
				return err
			}
		}
	}
	return d.due.Put(k, v)
}

func (d *dueIndex) delete(k []byte) error {
	lane, sched, ok, err := inTurns(k)
	if err != nil {
		return err
	}
	if !ok || d.holding(k, lane, sched) {
		return d.due.Delete(k)
	}
	sp := k[:sched]
	c := d.due.Cursor()
	if first, _ := c.Seek(sp); !bytes.Equal(first, k) {
		return d.due.Delete(k) // not the schedule's first entry
	}
	var next []byte
	if n, _ := c.Next(); n != nil && hasPrefix(n, sp) {
		next = headKey(sp, lane, n[sched:sched+timeLen])
	}
	if err := d.due.Delete(k); err != nil {
		return err
	}
	head := headKey(sp, lane, k[sched:sched+timeLen])
	if bytes.Equal(next, head) {
		return nil
	}
	if err := d.heads.Delete(head); err != nil {
		return err
	}
	if next != nil {
		return d.heads.Put(next, []byte{})
	}
	return nil
}

// dueRowKey returns the row key at the end of the ev_due key k.
func dueRowKey(k []byte) ([]byte, error) {
	if len(k) < 5 {
		return nil, fmt.Errorf("due entry %x: short", k)
	}
	if k[4] == statusCodes[model.EventScheduled] {
		if len(k) < 5+8+timeLen {
			return nil, fmt.Errorf("due entry %x: short", k)
		}
		return k[5+8+timeLen:], nil
	}
	_, sched, err := dueSplit(k)
	if err != nil {
		return nil, err
	}
	return appendRowKeyOfTurn(nil, k[sched+timeLen:])
}

func duePrefix(shard int, code byte) []byte { return append(appendInt32(nil, shard), code) }

// waitingCodes are the status codes of the events that the due index keys
// by lane.
var waitingCodes = [...]byte{statusCodes[model.EventPending], statusCodes[model.EventRetrying]}

// claimLane is a lane of p's shard as a claim found it: its prefix in
// ev_due under each waiting status (nil where it has no entries).
type claimLane struct {
	store.ClaimLane
	prefix [len(waitingCodes)][]byte
}

// claimer plans a claim of p's shard in a transaction: the entries of
// ev_due (launch time, row key) that EventClaimDue takes.
type claimer struct {
	c     *bolt.Cursor
	h     *bolt.Cursor // on ev_due_heads
	p     *store.EventClaimParams
	skip  map[string]bool
	turns map[string][]*head // by lane prefix: what heads read
	reads int                // keys the cursors have read, for the tests
}

func newClaimer(tx *bolt.Tx, p *store.EventClaimParams) *claimer {
	cl := &claimer{c: tx.Bucket(bEvDue).Cursor(), h: tx.Bucket(bEvDueHeads).Cursor(), p: p}
	if len(p.SkipPolicies) > 0 {
		cl.skip = make(map[string]bool, len(p.SkipPolicies))
		for _, id := range p.SkipPolicies {
			cl.skip[id] = true
		}
	}
	return cl
}

func (cl *claimer) seek(k []byte) ([]byte, []byte) {
	cl.reads++
	return cl.c.Seek(k)
}

func (cl *claimer) next() ([]byte, []byte) {
	cl.reads++
	return cl.c.Next()
}

// seekPast moves to the first key after every key under prefix.
func (cl *claimer) seekPast(prefix []byte) []byte {
	end := prefixEnd(prefix)
	if end == nil {
		return nil
	}
	k, _ := cl.seek(end)
	return k
}

// older returns up to limit of the entries scheduled under an older fence
// than p's, earliest launch time first: up to limit of each fence, which
// is one previous owner's holding.
func (cl *claimer) older(limit int) ([][]byte, error) {
	prefix := duePrefix(cl.p.Shard, statusCodes[model.EventScheduled])
	var out [][]byte
	for k, _ := cl.seek(prefix); k != nil && hasPrefix(k, prefix); {
		if len(k) < len(prefix)+8+timeLen {
			return nil, fmt.Errorf("due entry %x: short", k)
		}
		if int64(binary.BigEndian.Uint64(k[len(prefix):])) >= cl.p.Fence {
			break
		}
		fp := bytes.Clone(k[:len(prefix)+8])
		n := 0
		for ; k != nil && hasPrefix(k, fp) && n < limit; k, _ = cl.next() {
			out = append(out, bytes.Clone(k[len(fp):]))
			n++
		}
		if n == limit {
			k = cl.seekPast(fp)
		}
	}
	slices.SortFunc(out, bytes.Compare)
	return out[:min(len(out), limit)], nil
}

// lanes calls fn with each lane of the shard under the waiting status
// code st that is not of a skipped policy and has due entries, its
// prefix and how many, counted up to limit, until fn returns false.
func (cl *claimer) lanes(st byte, limit int, fn func(prefix []byte, l store.ClaimLane) bool) error {
	prefix := duePrefix(cl.p.Shard, st)
	for k, _ := cl.seek(prefix); k != nil && hasPrefix(k, prefix); {
		code, policy, prio, n, err := dueLane(k[len(prefix):])
		if err != nil {
			return err
		}
		if cl.skip[string(policy)] {
			k = cl.seekPast(k[:len(prefix)+len(code)+len(policy)+1])
			continue
		}
		lp := bytes.Clone(k[:len(prefix)+n])
		l := store.ClaimLane{TenantID: string(code), PolicyID: string(policy), Priority: prio}
		if len(policy) > 0 {
			heads, err := cl.heads(lp, limit)
			if err != nil {
				return err
			}
			if cl.turns == nil {
				cl.turns = map[string][]*head{}
			}
			cl.turns[string(lp)] = heads
			for _, h := range heads {
				l.Due += len(h.got)
			}
			k = cl.seekPast(lp)
		} else {
			for ; k != nil && hasPrefix(k, lp) && l.Due < limit; k, _ = cl.next() {
				if len(k) < len(lp)+timeLen {
					return fmt.Errorf("due entry %x: short", k)
				}
				if !readTime(k[len(lp):]).Before(cl.p.DueBefore) {
					break
				}
				l.Due++
			}
			if k != nil && hasPrefix(k, lp) {
				k = cl.seekPast(lp)
			}
		}
		if l.Due > 0 && !fn(lp, l) {
			return nil
		}
	}
	return nil
}

// head is a schedule of a lane of a policy with due entries, as a claim
// reads them in turns.
type head struct {
	at  []byte   // the launch time of its first entry
	sp  []byte   // its prefix in ev_due
	got [][]byte // its due entries read: launch time and turn
	end bool     // all its due entries are read
}

// heads returns the schedules of the policy lane lp (under one status)
// whose first entry is due, in the order of their heads (launch time,
// schedule id), with the first of their due entries read: up to limit
// entries in all, in rounds of an equal share each (store.ShareTurns
// then gives what a round robin takes of them).
func (cl *claimer) heads(lp []byte, limit int) ([]*head, error) {
	var hs []*head
	for k, _ := cl.h.Seek(lp); k != nil && hasPrefix(k, lp) && len(hs) < limit; k, _ = cl.h.Next() {
		cl.reads++
		if len(k) < len(lp)+timeLen {
			return nil, fmt.Errorf("due head %x: short", k)
		}
		if !readTime(k[len(lp):]).Before(cl.p.DueBefore) {
			break
		}
		sp := append(append(append(make([]byte, 0, len(k)+1), lp...), k[len(lp)+timeLen:]...), 0)
		hs = append(hs, &head{at: bytes.Clone(k[len(lp) : len(lp)+timeLen]), sp: sp})
	}
	return hs, cl.readTurns(hs, limit)
}

// readTurns reads the heads' due entries in rounds (store.TurnRound)
// until limit entries are read or every head's are.
func (cl *claimer) readTurns(hs []*head, limit int) error {
	read, ended := make([]int, len(hs)), make([]bool, len(hs))
	for {
		for i, h := range hs {
			read[i], ended[i] = len(h.got), h.end
		}
		share := store.TurnRound(read, ended, limit)
		if share == 0 {
			return nil
		}
		for _, h := range hs {
			if h.end {
				continue
			}
			from := h.sp
			if len(h.got) > 0 {
				from = append(append(bytes.Clone(h.sp), h.got[len(h.got)-1]...), 0)
			}
			n := 0
			k, _ := cl.seek(from)
			for ; k != nil && hasPrefix(k, h.sp) && n < share; k, _ = cl.next() {
				if len(k) < len(h.sp)+timeLen {
					return fmt.Errorf("due entry %x: short", k)
				}
				if !readTime(k[len(h.sp):]).Before(cl.p.DueBefore) {
					break
				}
				h.got = append(h.got, entryOf(k, len(h.sp)))
				n++
			}
			h.end = n < share
		}
	}
}

// any reports whether the claim would take anything.
func (cl *claimer) any() (bool, error) {
	if old, err := cl.older(1); err != nil || len(old) > 0 {
		return len(old) > 0, err
	}
	found := false
	for _, st := range waitingCodes {
		if err := cl.lanes(st, 1, func([]byte, store.ClaimLane) bool { found = true; return false }); err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// plan returns the entries the claim takes, at most limit: the older
// fences' first, then the lanes' shares, each in its lane's order (launch
// time, then turns).
func (cl *claimer) plan(limit int) ([][]byte, error) {
	out, err := cl.older(limit)
	if err != nil {
		return nil, err
	}
	left := limit - len(out)
	if left <= 0 {
		return out, nil
	}
	var lanes []claimLane
	at := map[string]int{} // lane (after the status) -> index in lanes
	for si, st := range waitingCodes {
		err := cl.lanes(st, left, func(prefix []byte, l store.ClaimLane) bool {
			key := string(prefix[5:])
			i, ok := at[key]
			if !ok {
				i = len(lanes)
				at[key] = i
				lanes = append(lanes, claimLane{ClaimLane: l})
				lanes[i].Due = 0
			}
			lanes[i].prefix[si] = prefix
			lanes[i].Due = min(left, lanes[i].Due+l.Due)
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	shares := make([]store.ClaimLane, len(lanes))
	for i := range lanes {
		shares[i] = lanes[i].ClaimLane
	}
	var taken [][]byte
	for i, take := range store.ShareClaim(shares, left) {
		if take == 0 {
			continue
		}
		var got [][]byte
		if lanes[i].PolicyID != "" {
			got = cl.takeTurns(lanes[i].prefix, take)
		} else {
			got = cl.inOrder(lanes[i].prefix, take)
		}
		for _, g := range got { // in place (entryOf)
			e, err := appendRowKeyOfTurn(g[:timeLen], g[timeLen:])
			if err != nil {
				return nil, err
			}
			taken = append(taken, e)
		}
	}
	slices.SortFunc(taken, bytes.Compare)
	return append(out, taken...), nil
}

// inOrder returns the first take due entries (launch time and turn) of a
// lane without a policy (its prefix under each waiting status), in the
// lane's order.
func (cl *claimer) inOrder(prefixes [len(waitingCodes)][]byte, take int) [][]byte {
	var got [][]byte
	for _, lp := range prefixes {
		if lp == nil {
			continue
		}
		n := 0
		for k, _ := cl.seek(lp); k != nil && hasPrefix(k, lp) && n < take; k, _ = cl.next() {
			if !readTime(k[len(lp):]).Before(cl.p.DueBefore) {
				break
			}
			got = append(got, entryOf(k, len(lp)))
			n++
		}
	}
	if len(got) > take { // pending and retrying entries of one lane
		slices.SortFunc(got, bytes.Compare)
		got = got[:take]
	}
	return got
}

// entryOf is a copy of what follows the prefix of length n in the ev_due
// key k (launch time and turn), with room for appendRowKeyOfTurn to write
// the row key in place: a row key is at most 3 bytes longer than its turn.
func entryOf(k []byte, n int) []byte {
	return append(make([]byte, 0, len(k)-n+3), k[n:]...)
}

// takeTurns returns take of the due entries that heads read of a policy
// lane (its prefix under each waiting status): its schedules' heads of
// both statuses in order (launch time, schedule id), shared by
// store.ShareTurns.
func (cl *claimer) takeTurns(prefixes [len(waitingCodes)][]byte, take int) [][]byte {
	var hs []*head
	lp := 0
	for _, p := range prefixes {
		if p != nil {
			hs, lp = append(hs, cl.turns[string(p)]...), len(p)
		}
	}
	slices.SortStableFunc(hs, func(a, b *head) int {
		if c := bytes.Compare(a.at, b.at); c != 0 {
			return c
		}
		return bytes.Compare(a.sp[lp:], b.sp[lp:])
	})
	due := make([]int, len(hs))
	for i, h := range hs {
		due[i] = len(h.got)
	}
	var got [][]byte
	for i, n := range store.ShareTurns(due, take) {
		got = append(got, hs[i].got[:n]...)
	}
	return got
}
