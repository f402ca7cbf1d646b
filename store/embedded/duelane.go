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
	b := append(appendInt32(make([]byte, 0, 4+1+len(tc)+len(e.PolicyID)+1+9+timeLen+5+len(rk)), e.Shard), code)
	return appendTurn(appendTime(appendLane(b, tc, e), e.LaunchAt), e.Index, rk), nil
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
	_, _, _, n, err := dueLane(k[5:])
	if err != nil {
		return nil, err
	}
	if len(k) < 5+n+timeLen {
		return nil, fmt.Errorf("due entry %x: short", k)
	}
	return appendRowKeyOfTurn(nil, k[5+n+timeLen:])
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
	p     *store.EventClaimParams
	skip  map[string]bool
	reads int // keys the cursor has read, for the tests
}

func newClaimer(tx *bolt.Tx, p *store.EventClaimParams) *claimer {
	cl := &claimer{c: tx.Bucket(bEvDue).Cursor(), p: p}
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
		due := 0
		for ; k != nil && hasPrefix(k, lp) && due < limit; k, _ = cl.next() {
			if len(k) < len(lp)+timeLen {
				return fmt.Errorf("due entry %x: short", k)
			}
			if !readTime(k[len(lp):]).Before(cl.p.DueBefore) {
				break
			}
			due++
		}
		if due > 0 && !fn(lp, store.ClaimLane{TenantID: string(code), PolicyID: string(policy), Priority: prio, Due: due}) {
			return nil
		}
		if k != nil && hasPrefix(k, lp) {
			k = cl.seekPast(lp)
		}
	}
	return nil
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
		for _, lp := range lanes[i].prefix {
			if lp == nil {
				continue
			}
			n := 0
			for k, _ := cl.seek(lp); k != nil && hasPrefix(k, lp) && n < take; k, _ = cl.next() {
				if !readTime(k[len(lp):]).Before(cl.p.DueBefore) {
					break
				}
				got = append(got, append(make([]byte, 0, len(k)-len(lp)+3), k[len(lp):]...))
				n++
			}
		}
		if len(got) > take { // pending and retrying entries of one lane
			slices.SortFunc(got, bytes.Compare)
			got = got[:take]
		}
		for _, g := range got { // in place: a row key is at most 3 bytes longer than its turn
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
