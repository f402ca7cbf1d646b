package embedded

import (
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// A one-off created with its fire in its row (impliesFire) needs no
// children entry for its sole child (layoutImpliedChild): the emitter reads
// children only to make fires, and the one fire that child gives is the
// one the row holds, written in the same transaction. The row is marked
// (schedChildImplied) and keeps the mark while it holds that child, when
// the fire or the event leaves it too: the fire lives on as a row of its
// own.

// impliesChild reports whether sole, the sole child (soleChild) of the
// one-off sc, can go without a children entry when the row of sc holds the
// fire f (impliesFire): f is the fire the emitter would make of it, at
// runAt's fire instant.
func impliesChild(sc *model.Schedule, sole *model.Child, f *model.Fire) bool {
	return sole != nil && sc.RunAt != nil && f.FireTime.Equal(model.FireInstant(*sc.RunAt))
}

// rowChildImplied reports whether the sole child that the schedule row raw
// holds has no children entry (schedChildImplied).
func rowChildImplied(raw []byte) bool { return rowFlags(raw)&schedChildImplied != 0 }

// markChildImplied marks doc, a new encoding of a schedule row that holds
// the same child as before, if implied (the old row's rowChildImplied),
// and returns it.
func markChildImplied(doc []byte, implied bool) []byte {
	if implied && rowFlags(doc)&schedSoleChild != 0 {
		doc[1] |= schedChildImplied // the low seven flags are in the first byte of the flags' uvarint
	}
	return doc
}

// dropImpliedChildren deletes the children entries of the one-offs of
// layoutOneRecord whose rows hold their fire and their sole child as
// impliesChild allows, with their timezone counts, and marks those rows,
// chunk rows per transaction. Marked rows are left alone, so a run
// interrupted by a crash is simply resumed.
func dropImpliedChildren(db *bolt.DB, chunk int) error {
	return walkChunks(db, bSchedules, chunk, dropImpliedChildrenOf)
}

// dropImpliedChildrenOf is dropImpliedChildren's work on rows of
// schedules, read in tx.
func dropImpliedChildrenOf(tx *bolt.Tx, rows []kv) error {
	const want = schedFire | schedSoleChild
	b, bc := tx.Bucket(bSchedules), tx.Bucket(bChildren)
	dropped := map[string]int64{} // children entries deleted per timezone
	for _, r := range rows {
		if flags := rowFlags(r.v); flags&want != want || flags&schedChildImplied != 0 {
			continue
		}
		sc, child, f, err := decodeScheduleFire([]byte(schedKeyID(r.k)), r.v, &rowDict{tx: tx})
		if err != nil {
			return err
		}
		if !impliesChild(sc, child, f) {
			continue
		}
		if k := childKey(child); bc.Get(k) != nil {
			dropped[child.Timezone]--
			if err := bc.Delete(k); err != nil {
				return err
			}
		}
		r.v[1] |= schedChildImplied // the low seven flags are in the first byte of the flags' uvarint
		if err := b.Put(r.k, r.v); err != nil {
			return err
		}
	}
	for _, tz := range slices.Sorted(maps.Keys(dropped)) {
		if err := addTZCount(tx.Bucket(bChildTZ), tz, dropped[tz]); err != nil {
			return err
		}
	}
	return nil
}
