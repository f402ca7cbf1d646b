package embedded

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// dueLanes brings layout 14 to 15, which keys the due entries of pending
// and retrying events by lane (duelane.go): shard, status, launch time,
// row key become shard, status, lane, launch time, row key. The first
// pass records each waiting entry's value and lane.
var dueLanes = dueRewrite{
	scratch: []byte("migrate_due_lanes"), // old ev_due key -> len(value), value, lane
	to:      15,
	collect: func(x *evtx, k, v []byte) ([]byte, error) {
		if len(k) <= 5+timeLen {
			return nil, fmt.Errorf("due entry %x: short", k)
		}
		e, err := x.load(k[5+timeLen:])
		if err != nil {
			return nil, fmt.Errorf("due entry %x: %w", k, err)
		}
		code, err := x.codes.prefix(e.TenantID)
		if err != nil {
			return nil, err
		}
		return appendLane(append([]byte{byte(len(v))}, v...), code, e), nil
	},
	move: func(k, r []byte) ([]byte, []byte, error) {
		n := int(r[0])
		if len(r) < 1+n {
			return nil, nil, fmt.Errorf("collected due entry %x: short value", k)
		}
		value, lane := r[1:1+n], r[1+n:]
		return append(append(append(make([]byte, 0, len(k)+len(lane)), k[:5]...), lane...), k[5:]...), value, nil
	},
}

// dueRewrite is a migration that rewrites the keys of the waiting (pending
// and retrying) entries of ev_due.
//
// An entry of either layout does not say which it is, so the entries are
// rewritten in two passes. The first reads ev_due, untouched, and writes
// what collect makes of each waiting entry under its old key to a bucket
// of its own (scratch); a crash in it makes the next run start it again.
// A mark in the meta bucket then says that the second pass moves those
// entries to the keys that move makes, a chunk a transaction, each entry
// leaving scratch with its move; a crash in it makes the next run go on
// with what is left. The last transaction drops scratch and the mark and
// records layout to, so that no run reads rewritten entries as old ones.
type dueRewrite struct {
	scratch []byte // the bucket, and the mark's key in bMeta
	to      int
	// collect returns what move needs of an entry; nil leaves the entry
	// as it is.
	collect func(x *evtx, k, v []byte) ([]byte, error)
	move    func(k, r []byte) (nk, nv []byte, err error)
	// heads: the new keys are of the layout with ev_due_heads, which the
	// moves keep.
	heads bool
}

func (m dueRewrite) run(db *bolt.DB, keys *tokenKey) error {
	var moving bool
	if err := db.View(func(tx *bolt.Tx) error {
		moving = tx.Bucket(bMeta).Get(m.scratch) != nil
		return nil
	}); err != nil {
		return err
	}
	if !moving {
		if err := m.collectAll(db, keys, 10_000); err != nil {
			return fmt.Errorf("collect due entries: %w", err)
		}
	}
	for {
		more, err := m.moveChunk(db, 10_000)
		if err != nil {
			return fmt.Errorf("move due entries: %w", err)
		}
		if !more {
			return nil
		}
	}
}

// collectAll is the first pass.
func (m dueRewrite) collectAll(db *bolt.DB, keys *tokenKey, chunk int) error {
	if err := db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(m.scratch) != nil {
			if err := tx.DeleteBucket(m.scratch); err != nil {
				return err
			}
		}
		_, err := tx.CreateBucket(m.scratch)
		return err
	}); err != nil {
		return err
	}
	err := walkChunks(db, bEvDue, chunk, func(tx *bolt.Tx, rows []kv) error {
		x := newEvtx(tx, keys)
		out := tx.Bucket(m.scratch)
		for _, r := range rows {
			if len(r.k) < 5 || !bytes.Contains(waitingCodes[:], r.k[4:5]) {
				continue
			}
			v, err := m.collect(x, r.k, r.v)
			if err != nil {
				return err
			}
			if v == nil {
				continue
			}
			if err := out.Put(r.k, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put(m.scratch, []byte{}) })
}

// moveChunk moves up to chunk of the entries that collectAll found in one
// transaction, and reports whether any are left; when none are, it ends
// the migration.
func (m dueRewrite) moveChunk(db *bolt.DB, chunk int) (bool, error) {
	more := false
	err := db.Update(func(tx *bolt.Tx) error {
		src, due := tx.Bucket(m.scratch), tx.Bucket(bEvDue)
		if src == nil {
			return fmt.Errorf("bucket %s is missing", m.scratch)
		}
		var rows []kv
		c := src.Cursor()
		for k, v := c.First(); k != nil && len(rows) < chunk; k, v = c.Next() {
			rows = append(rows, kv{bytes.Clone(k), bytes.Clone(v)})
		}
		if len(rows) == 0 {
			if err := tx.DeleteBucket(m.scratch); err != nil {
				return err
			}
			if err := tx.Bucket(bMeta).Delete(m.scratch); err != nil {
				return err
			}
			return putLayout(tx, m.to)
		}
		more = true
		for _, r := range rows {
			nk, nv, err := m.move(r.k, r.v)
			if err != nil {
				return err
			}
			if err := due.Delete(r.k); err != nil {
				return err
			}
			put := due.Put
			if m.heads {
				ix := &dueIndex{due: due, heads: tx.Bucket(bEvDueHeads)}
				put = ix.put
			}
			if err := put(nk, nv); err != nil {
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
