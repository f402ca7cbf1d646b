package embedded

import (
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// CheckOneRecords reports an event that both a one-off's row holds and a
// group does, a row's event without its ev_due entry or its tenant mark,
// or an ev_due entry of a row that holds no event.
func CheckOneRecords(s *Store) error {
	return s.db.View(func(tx *bolt.Tx) error {
		x := newEvtx(tx, s.tokens)
		rows := 0
		if err := tx.Bucket(bSchedules).ForEach(func(key, v []byte) error {
			if !rowHasEvent(v) {
				return nil
			}
			rows++
			k := schedKeyID(key)
			p, err := decodeRowParts(k, v, x.dict)
			if err != nil {
				return err
			}
			if g, err := x.groupOf(p.fire.ID); err != nil || g != nil {
				return fmt.Errorf("the event of fire %s is in its schedule's row and in group %v (%v)", p.fire.ID, g, err)
			}
			dk, err := x.dueKey(p.event, impliedKey(k))
			if err != nil {
				return err
			}
			if tx.Bucket(bEvDue).Get(dk) == nil {
				return fmt.Errorf("the event of fire %s has no due entry", p.fire.ID)
			}
			if !isTenantImplied(tx.Bucket(bSchedTenant).Get(appendTenantSched(tenantPrefix(tx, p.sc.TenantID), k))) {
				return fmt.Errorf("schedule %s holds an event, its tenant entry no mark", k)
			}
			return nil
		}); err != nil {
			return err
		}
		due := 0
		if err := tx.Bucket(bEvDue).ForEach(func(k, _ []byte) error {
			rk, err := dueRowKey(k)
			if err != nil {
				return err
			}
			// A row's event is pending.
			if k[4] == statusCodes[model.EventPending] && isImpliedKey(rk) {
				due++
				if !rowHasEvent(tx.Bucket(bSchedules).Get(schedKey(impliedScheduleID(rk)))) {
					return fmt.Errorf("due entry %q: its schedule's row holds no event", k)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		if due != rows {
			return fmt.Errorf("%d rows hold an event, %d due entries name a row", rows, due)
		}
		return nil
	})
}

// openTemp opens a store with opts in a new temporary directory, closed
// when the test ends.
func openTemp(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
