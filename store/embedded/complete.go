package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// bSchedEnds indexes the schedules that will complete or have completed,
// under three kinds of keys (schedKey as in the schedules bucket):
//
//	'e', end, schedKey            an active schedule with an end: a
//	                              one-off's fire instant, a cron
//	                              schedule's endAt (ScheduleComplete)
//	'c', updatedAt, schedKey      a completed schedule (ScheduleDeleteCompleted)
//	't', tenant code, schedKey    a completed schedule (ScheduleCountByTenant)
//	'r', resumeAt, schedKey       a paused schedule that resumes by itself
//	                              (ScheduleResumeDue), resumeAt in seconds
//	'i', partition, next, schedKey
//	                              an active interval schedule and its
//	                              next fire in seconds (ScheduleIntervalDue)
//
// Times are counts of whole units since the Unix epoch in 4 bytes
// (appendUnit), which keeps the entry of each one-off small; the walks
// read the exact times from the rows. Ends are in hours: the one-offs
// created together (a batch), with runAts spread over the next hours,
// then append to the ends of a few runs of keys (schedKeys ascend with
// creation) instead of going to a page each, which would make every
// commit of a batch write a page per one-off. A walk reads the entries of
// the current hour whose ends are still ahead once per call.
//
// The entries change with the schedule's row (writeEndKeys); the keys of
// a schedule are made from its row alone (endKeys).
var bSchedEnds = []byte("schedule_ends")

const (
	endActive     = 'e'
	endDone       = 'c'
	endTenantDone = 't'
	endResume     = 'r'
	endInterval   = 'i'
)

// scheduleEnd is the end of an active schedule, false if it has none.
func scheduleEnd(sc *model.Schedule) (time.Time, bool) {
	switch {
	case sc.State != model.ScheduleActive && sc.State != "":
		return time.Time{}, false
	case sc.RunAt != nil:
		return model.FireInstant(*sc.RunAt), true
	case sc.EndAt != nil:
		return sc.EndAt.UTC(), true
	}
	return time.Time{}, false
}

// endKeys returns sc's keys in bSchedEnds (none for nil). codes gives the
// tenant's code (a new one only if create).
func endKeys(codes *tenantCodes, sc *model.Schedule) ([][]byte, error) {
	keys, err := lifeKeys(codes, sc)
	if k := intervalKey(sc); k != nil && err == nil {
		keys = append(keys, k)
	}
	return keys, err
}

// lifeKeys are sc's keys in bSchedEnds but its interval key.
func lifeKeys(codes *tenantCodes, sc *model.Schedule) ([][]byte, error) {
	if sc == nil {
		return nil, nil
	}
	if end, ok := scheduleEnd(sc); ok {
		return [][]byte{appendSchedKey(appendUnit([]byte{endActive}, end, endUnit), sc.ID)}, nil
	}
	if sc.State == model.SchedulePaused && sc.ResumeAt != nil {
		return [][]byte{appendSchedKey(appendUnit([]byte{endResume}, *sc.ResumeAt, time.Second), sc.ID)}, nil
	}
	if sc.State != model.ScheduleCompleted {
		return nil, nil
	}
	tk, err := codes.key(sc.TenantID, appendSchedKey(nil, sc.ID))
	if err != nil {
		return nil, err
	}
	return [][]byte{
		appendSchedKey(appendUnit([]byte{endDone}, sc.UpdatedAt, time.Second), sc.ID),
		append([]byte{endTenantDone}, tk...),
	}, nil
}

// endUnit is the unit of the ends in 'e' keys.
const endUnit = time.Hour

// appendUnit appends the number of whole units from the Unix epoch to t
// (rounded down), within 0 and 2^32-1, in 4 bytes big-endian.
func appendUnit(b []byte, t time.Time, unit time.Duration) []byte {
	n := t.Unix() / int64(unit/time.Second)
	return binary.BigEndian.AppendUint32(b, uint32(min(max(n, 0), math.MaxUint32)))
}

// unitNotAfter reports whether the unit that k (after its kind) starts
// with is not after t's: the entry's time may be at or before t.
func unitNotAfter(k []byte, t time.Time, unit time.Duration) bool {
	return bytes.Compare(k[1:1+unitLen], appendUnit(nil, t, unit)) <= 0
}

const unitLen = 4

// writeEndKeys moves the schedule's entries in bSchedEnds from those of
// old (nil: a new schedule) to those of sc (nil: deleted).
func writeEndKeys(tx *bolt.Tx, codes *tenantCodes, old, sc *model.Schedule) error {
	if err := writeAfterKey(tx, old, sc); err != nil {
		return err
	}
	if codes == nil {
		codes = newTenantCodes(tx)
	}
	oldKeys, err := endKeys(codes, old)
	if err != nil {
		return err
	}
	newKeys, err := endKeys(codes, sc)
	if err != nil {
		return err
	}
	b := tx.Bucket(bSchedEnds)
	for _, k := range oldKeys {
		if !containsKey(newKeys, k) {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	for _, k := range newKeys {
		if !containsKey(oldKeys, k) {
			if k[0] == endActive {
				// Appends to the run of its hour when ids ascend.
				packAppends(b, k, 1+unitLen)
			}
			if err := b.Put(k, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, o := range keys {
		if bytes.Equal(o, k) {
			return true
		}
	}
	return false
}

// completedCount counts the tenant's completed schedules under its code.
func completedCount(tx *bolt.Tx, code []byte) int {
	n := 0
	scanPrefix(tx, bSchedEnds, append([]byte{endTenantDone}, code...), func(_, _ []byte) bool {
		n++
		return true
	})
	return n
}

// clampLimit is limit within 1..1000.
func clampLimit(limit int) int { return min(max(limit, 1), 1000) }

// ScheduleComplete completes the active schedules with an end not after
// p.Now whose events are finished, in one transaction (see
// store.ScheduleStore).
func (s *Store) ScheduleComplete(ctx context.Context, p *store.ScheduleCompleteParams) (store.ScheduleCompleteResult, error) {
	var res store.ScheduleCompleteResult
	err := s.update(ctx, "schedule complete", func(tx *bolt.Tx) error {
		res = store.ScheduleCompleteResult{Last: p.After}
		limit := clampLimit(p.Limit)
		from := []byte{endActive}
		if !p.After.End.IsZero() || p.After.ID != "" {
			from = append(appendSchedKey(appendUnit([]byte{endActive}, p.After.End, endUnit), p.After.ID), 0)
		}
		var ids []string
		c := tx.Bucket(bSchedEnds).Cursor()
		for k, _ := c.Seek(from); k != nil && k[0] == endActive && len(ids) < limit && unitNotAfter(k, p.Now, endUnit); k, _ = c.Next() {
			ids = append(ids, schedKeyID(k[1+unitLen:]))
		}
		codes := newTenantCodes(tx)
		for _, id := range ids {
			end, done, err := s.completeOne(tx, codes, id, p)
			if err != nil {
				return err
			}
			res.Examined++
			res.Last = store.ScheduleEnd{End: end, ID: id}
			if done {
				res.Completed++
			}
		}
		return nil
	})
	if err != nil {
		return store.ScheduleCompleteResult{}, err
	}
	return res, nil
}

// completeOne completes schedule id if it may, and returns its end.
func (s *Store) completeOne(tx *bolt.Tx, codes *tenantCodes, id string, p *store.ScheduleCompleteParams) (time.Time, bool, error) {
	old, oldSole, err := getScheduleRow(s.dict(tx), []byte(id))
	if errors.Is(err, model.ErrNotFound) {
		return time.Time{}, false, nil // the entry and the row go in one transaction
	}
	if err != nil {
		return time.Time{}, false, err
	}
	end, ok := scheduleEnd(old)
	if !ok || end.After(p.Now) {
		return end, false, nil
	}
	if rowHasEvent(tx.Bucket(bSchedules).Get(schedKey(id))) {
		// An event the row holds has not changed: it waits.
		return end, false, nil
	}
	if k, _ := tx.Bucket(bFireEmitting).Cursor().Seek([]byte(id + ".")); k != nil && bytes.HasPrefix(k, []byte(id+".")) {
		return end, false, nil
	}
	busy, err := scheduleUnfinished(tx, s.tokens, id)
	if err != nil || busy {
		return end, false, err
	}
	if !end.Before(p.MissedBefore) {
		if old.RunAt == nil {
			return end, false, nil
		}
		fired, err := firedAt(s.dict(tx), id, end)
		if err != nil || !fired {
			return end, false, err
		}
	}
	sc := *old
	sc.State, sc.Version, sc.UpdatedAt = model.ScheduleCompleted, old.Version+1, p.At.UTC()
	if err := updateScheduleRow(tx, codes, s.tokens, old, oldSole, &sc, nil); err != nil {
		return end, false, err
	}
	return end, true, nil
}

// firedAt reports whether schedule id has a fire at t, of any version.
func firedAt(r *rowDict, id string, t time.Time) (bool, error) {
	f, err := rowFireOf(r, id)
	if err != nil {
		return false, err
	}
	if f != nil && f.FireTime.Equal(t) {
		return true, nil
	}
	prefix := appendTime(strKey(id), t)
	k, _ := r.tx.Bucket(bFireSched).Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix), nil
}

// scheduleUnfinished reports whether schedule id has an event that is not
// finished: in its row (not asked here: the caller has read the row), a
// group of its fires (ev_sched entries and the groups under its id, see
// impliedGroup) or a loose event.
func scheduleUnfinished(tx *bolt.Tx, keys *tokenKey, id string) (bool, error) {
	x := newEvtx(tx, keys)
	busy := false
	var err error
	check := func(fireID string) bool {
		err = fireRows(x, tx, fireID, "", func(code byte, _ []byte) bool {
			busy = !statusByCode[code].Finished()
			return !busy
		})
		return err == nil && !busy
	}
	schedGroups(x.groups, id, check)
	if err != nil || busy {
		return busy, err
	}
	prefix := strKey(id)
	type ent struct{ suffix, v []byte }
	var ents []ent
	scanPrefix(tx, bEvSched, prefix, func(k, v []byte) bool {
		ents = append(ents, ent{bytes.Clone(k[len(prefix):]), bytes.Clone(v)})
		return true
	})
	for _, en := range ents {
		if len(en.v) == rowKeyLen {
			e, err := x.load(en.v)
			if err != nil {
				return false, err
			}
			if !e.Status.Finished() {
				return true, nil
			}
			continue
		}
		if !check(string(en.suffix[:len(en.suffix)-2])) {
			return busy, err
		}
	}
	return false, nil
}

// ScheduleDeleteCompleted deletes the completed schedules whose UpdatedAt
// is before p.Before, oldest first, with their children and fires.
func (s *Store) ScheduleDeleteCompleted(ctx context.Context, p *store.ScheduleDeleteCompletedParams) (int, error) {
	var n int
	err := s.update(ctx, "schedule delete completed", func(tx *bolt.Tx) error {
		n = 0
		limit := clampLimit(p.Limit)
		var ids []string
		scanPrefix(tx, bSchedEnds, []byte{endDone}, func(k, _ []byte) bool {
			if len(ids) >= limit || !unitNotAfter(k, p.Before, time.Second) {
				return false
			}
			ids = append(ids, schedKeyID(k[1+unitLen:]))
			return true
		})
		for _, id := range ids {
			sc, err := getSchedule(s.dict(tx), []byte(id))
			if err != nil {
				return err
			}
			if !sc.UpdatedAt.Before(p.Before) {
				continue
			}
			if err := s.deleteSchedule(tx, sc.TenantID, id); err != nil {
				return err
			}
			if err := deleteFires(tx, id); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// deleteFires removes the fire rows of schedule id and their index
// entries; the fire its row held went with the row.
func deleteFires(tx *bolt.Tx, id string) error {
	var keys, ids [][]byte
	prefix := strKey(id)
	scanPrefix(tx, bFireSched, prefix, func(k, _ []byte) bool {
		keys = append(keys, bytes.Clone(k))
		ids = append(ids, bytes.Clone(k[len(prefix)+timeLen:]))
		return true
	})
	if err := deleteKeys(tx, bFireSched, keys); err != nil {
		return err
	}
	var open [][]byte // open deadlines of the fires
	for _, fid := range ids {
		if raw := tx.Bucket(bFires).Get(fid); raw != nil {
			if f, err := decodeFire(fid, raw); err == nil && f.Deadline != nil && f.DeadlineMissed == nil {
				open = append(open, fireDeadlineKey(f))
			}
		}
	}
	if err := deleteKeys(tx, bFireDeadlines, open); err != nil {
		return err
	}
	if err := deleteKeys(tx, bFires, ids); err != nil {
		return err
	}
	if err := deleteWatch(tx, ids); err != nil {
		return err
	}
	return deleteKeys(tx, bFireEmitting, ids)
}
