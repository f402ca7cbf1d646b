package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// intervalLen is the length of an 'i' key's kind and partition.
const intervalLen = 1 + 2

// intervalKey is the 'i' key of sc in bSchedEnds: an active interval
// schedule's partition and next fire (IntervalNextFire) in seconds; nil
// for any other schedule.
func intervalKey(sc *model.Schedule) []byte {
	if sc == nil || sc.Interval <= 0 || (sc.State != model.ScheduleActive && sc.State != "") {
		return nil
	}
	k := binary.BigEndian.AppendUint16([]byte{endInterval}, uint16(sc.Partition))
	return appendSchedKey(appendUnit(k, sc.IntervalNextFire(), time.Second), sc.ID)
}

// ScheduleIntervalDue walks the 'i' entries of p.Partition in bSchedEnds
// (next fires in whole seconds, then schedule keys) from p.After and
// returns the active interval schedules whose next fire is before
// p.Before (see store.ScheduleStore).
func (s *Store) ScheduleIntervalDue(ctx context.Context, p *store.ScheduleIntervalDueParams) ([]*model.Schedule, error) {
	var out []*model.Schedule
	err := s.view(ctx, "schedule interval due", func(tx *bolt.Tx) error {
		out = nil
		limit := clampLimit(p.Limit)
		prefix := binary.BigEndian.AppendUint16([]byte{endInterval}, uint16(p.Partition))
		from := prefix
		if !p.After.End.IsZero() || p.After.ID != "" {
			from = append(appendSchedKey(appendUnit(append([]byte(nil), prefix...), p.After.End, time.Second), p.After.ID), 0)
		}
		// The last whole second that may hold a next fire before p.Before.
		last := appendUnit(nil, p.Before.Add(-time.Nanosecond), time.Second)
		c := tx.Bucket(bSchedEnds).Cursor()
		for k, _ := c.Seek(from); k != nil && len(out) < limit && len(k) > intervalLen+unitLen &&
			string(k[:intervalLen]) == string(prefix) && string(k[intervalLen:intervalLen+unitLen]) <= string(last); k, _ = c.Next() {
			sc, err := getSchedule(s.dict(tx), []byte(schedKeyID(k[intervalLen+unitLen:])))
			if errors.Is(err, model.ErrNotFound) {
				continue // the entry and the row go in one transaction
			}
			if err != nil {
				return err
			}
			if intervalKey(sc) != nil && sc.IntervalNextFire().Before(p.Before) {
				out = append(out, sc)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleIntervalAdvance moves the schedule's next fire, and its 'i'
// entry, forward (see store.ScheduleStore).
func (s *Store) ScheduleIntervalAdvance(ctx context.Context, p *store.ScheduleIntervalAdvanceParams) error {
	return s.update(ctx, "schedule interval advance", func(tx *bolt.Tx) error {
		old, oldSole, err := getScheduleRow(s.dict(tx), []byte(p.ID))
		if errors.Is(err, model.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if old.Version != p.Version || intervalKey(old) == nil || !p.Next.After(old.IntervalNextFire()) {
			return nil
		}
		sc := *old
		next := p.Next.UTC()
		sc.IntervalNext = &next
		return updateScheduleRow(tx, newTenantCodes(tx), s.tokens, old, oldSole, &sc, nil)
	})
}
