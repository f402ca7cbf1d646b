package embedded

import "fmt"

// dueTurns brings layout 15 to 16, which keys the due entries of pending
// and retrying events by turn after their launch time (appendTurn): the
// event's index in its fire before its row key, so that the fires due at
// one instant in a lane take turns. The first pass records each waiting
// entry's value and new key. Only a loose event's index needs its row: a
// canonical row key ends with it, and a schedule's row holds only an
// event of index 0.
var dueTurns = dueRewrite{
	scratch: []byte("migrate_due_turns"), // old ev_due key -> len(value), value, new key
	to:      16,
	collect: func(x *evtx, k, v []byte) ([]byte, error) {
		_, _, _, n, err := dueLane(k[5:])
		if err != nil {
			return nil, err
		}
		at := 5 + n + timeLen
		if len(k) <= at {
			return nil, fmt.Errorf("due entry %x: short", k)
		}
		rk, index := k[at:], 0
		if len(rk) == rowKeyLen && !isImpliedKey(rk) && slotOf(rk) >= looseSlot {
			e, err := x.load(rk)
			if err != nil {
				return nil, fmt.Errorf("due entry %x: %w", k, err)
			}
			index = e.Index
		}
		r := append(append(make([]byte, 0, 1+len(v)+len(k)+4), byte(len(v))), v...)
		return appendTurn(append(r, k[:at]...), index, rk), nil
	},
	move: func(k, r []byte) ([]byte, []byte, error) {
		if n := int(r[0]); len(r) > 1+n {
			return r[1+n:], r[1 : 1+n], nil
		}
		return nil, nil, fmt.Errorf("collected due entry %x: short value", k)
	},
}
