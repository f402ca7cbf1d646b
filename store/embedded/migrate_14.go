package embedded

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// dueLanes brings layout 14 to 15, which keys the due entries of pending
// and retrying events by lane (duelane.go): shard, status, launch time,
// row key become shard, status, lane, launch time, row key.
//
// An entry of either layout does not say which it is, so the entries are
// rewritten in two passes. The first reads ev_due, untouched, and writes
// each waiting entry's old key with its lane (and its value) to a bucket
// of its own; a crash in it makes the next run start it again. A mark in
// the meta bucket then says that the second pass moves those entries, a
// chunk a transaction, each entry leaving the bucket with its move; a
// crash in it makes the next run go on with what is left. The last
// transaction drops the bucket and the mark and records layout 15, so
// that no run reads rewritten entries as old ones.
func dueLanes(db *bolt.DB, keys *tokenKey) error {
	var moving bool
	if err := db.View(func(tx *bolt.Tx) error {
		moving = tx.Bucket(bMeta).Get(keyDueLanes) != nil
		return nil
	}); err != nil {
		return err
	}
	if !moving {
		if err := collectDueLanes(db, keys, 10_000); err != nil {
			return fmt.Errorf("collect due entries: %w", err)
		}
	}
	for {
		more, err := moveDueLanes(db, 10_000)
		if err != nil {
			return fmt.Errorf("move due entries: %w", err)
		}
		if !more {
			return nil
		}
	}
}

var (
	bDueLanes   = []byte("migrate_due_lanes") // old ev_due key -> len(value), value, lane
	keyDueLanes = []byte("migrate_due_lanes") // in bMeta: the second pass runs
)

// collectDueLanes is the first pass of dueLanes.
func collectDueLanes(db *bolt.DB, keys *tokenKey, chunk int) error {
	if err := db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bDueLanes) != nil {
			if err := tx.DeleteBucket(bDueLanes); err != nil {
				return err
			}
		}
		_, err := tx.CreateBucket(bDueLanes)
		return err
	}); err != nil {
		return err
	}
	err := walkChunks(db, bEvDue, chunk, func(tx *bolt.Tx, rows []kv) error {
		x := newEvtx(tx, keys)
		out := tx.Bucket(bDueLanes)
		for _, r := range rows {
			k := r.k
			if len(k) < 5 || !bytes.Contains(waitingCodes[:], k[4:5]) {
				continue
			}
			if len(k) <= 5+timeLen {
				return fmt.Errorf("due entry %x: short", k)
			}
			e, err := x.load(k[5+timeLen:])
			if err != nil {
				return fmt.Errorf("due entry %x: %w", k, err)
			}
			code, err := x.codes.prefix(e.TenantID)
			if err != nil {
				return err
			}
			v := appendLane(append([]byte{byte(len(r.v))}, r.v...), code, e)
			if err := out.Put(k, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put(keyDueLanes, []byte{}) })
}

// moveDueLanes moves up to chunk of the entries that collectDueLanes
// found to their lanes in one transaction, and reports whether any are
// left; when none are, it ends the migration.
func moveDueLanes(db *bolt.DB, chunk int) (bool, error) {
	more := false
	err := db.Update(func(tx *bolt.Tx) error {
		src, due := tx.Bucket(bDueLanes), tx.Bucket(bEvDue)
		if src == nil {
			return fmt.Errorf("bucket %s is missing", bDueLanes)
		}
		var rows []kv
		c := src.Cursor()
		for k, v := c.First(); k != nil && len(rows) < chunk; k, v = c.Next() {
			rows = append(rows, kv{bytes.Clone(k), bytes.Clone(v)})
		}
		if len(rows) == 0 {
			if err := tx.DeleteBucket(bDueLanes); err != nil {
				return err
			}
			if err := tx.Bucket(bMeta).Delete(keyDueLanes); err != nil {
				return err
			}
			return putLayout(tx, 15)
		}
		more = true
		for _, r := range rows {
			n := int(r.v[0])
			if len(r.v) < 1+n {
				return fmt.Errorf("collected due entry %x: short value", r.k)
			}
			value, lane := r.v[1:1+n], r.v[1+n:]
			nk := append(append(append(make([]byte, 0, len(r.k)+len(lane)), r.k[:5]...), lane...), r.k[5:]...)
			if err := due.Delete(r.k); err != nil {
				return err
			}
			if err := due.Put(nk, value); err != nil {
				return err
			}
			if err := src.Delete(r.k); err != nil {
				return err
			}
		}
		return nil
	})
	return more, err
}
