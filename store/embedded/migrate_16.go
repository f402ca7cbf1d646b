package embedded

import "fmt"

// dueHeads brings layout 16 to 17, which keys the due entries of pending
// and retrying events in a lane of a policy by schedule after the lane and
// keeps each such schedule's head in ev_due_heads (duelane.go). The first
// pass records each such entry's value and new key; the moves write the
// heads. Only a row key that is not a one-off's implied key needs its row
// read for the schedule id.
var dueHeads = dueRewrite{
	scratch: []byte("migrate_due_heads"), // old ev_due key -> len(value), value, new key
	to:      17,
	heads:   true,
	collect: func(x *evtx, k, v []byte) ([]byte, error) {
		_, policy, _, n, err := dueLane(k[5:])
		if err != nil {
			return nil, err
		}
		if len(policy) == 0 {
			return nil, nil
		}
		at := 5 + n
		if len(k) <= at+timeLen {
			return nil, fmt.Errorf("due entry %x: short", k)
		}
		rk, err := appendRowKeyOfTurn(nil, k[at+timeLen:])
		if err != nil {
			return nil, err
		}
		var sched string
		if isImpliedKey(rk) {
			sched = impliedScheduleID(rk)
		} else {
			e, err := x.load(rk)
			if err != nil {
				return nil, fmt.Errorf("due entry %x: %w", k, err)
			}
			sched = e.ScheduleID
		}
		r := append(append(make([]byte, 0, 1+len(v)+len(k)+len(sched)+1), byte(len(v))), v...)
		r = append(append(append(r, k[:at]...), sched...), 0)
		return append(r, k[at:]...), nil
	},
	move: dueTurns.move,
}
