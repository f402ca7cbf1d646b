package embedded

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The data layout is frozen at layoutCurrent. A change to it that a
// schedulerd of this layout would misread (a bucket, a key or a row
// codec) raises layoutCurrent by one and adds a migration from the layout
// before it to migrations: a function in a file of its own
// (migrate_<from>.go), with a test of its own that writes a directory of
// the layout before and opens it. Open runs the migrations from the
// directory's recorded layout up to layoutCurrent, in order, and records
// the layout each one reaches once it returns; a directory of a layout
// that no migration starts from is refused, as is one of a later layout.

// A migration brings the data of layout from to layout from+1. It may
// commit in several transactions; a crash before Open records from+1 makes
// the next Open run it again on what it left, which it must read as well
// as the data of layout from.
type migration struct {
	from int
	run  func(db *bolt.DB, keys *tokenKey) error
}

// migrations are the steps to layoutCurrent, in order of from. Layout 11
// is the first that Open reads.
var migrations = []migration{
	{from: 11, run: indexScheduleEnds}, // migrate_11.go
	{from: 12, run: traceContextRows},  // migrate_12.go
	{from: 13, run: fireTraceRows},     // migrate_13.go
	{from: 14, run: dueLanes.run},      // migrate_14.go
	{from: 15, run: dueTurns.run},      // migrate_15.go
	{from: 16, run: dueHeads.run},      // migrate_16.go
}

type kv struct{ k, v []byte }

// walkChunks hands fn the keys and values of bucket name in key order,
// chunk at a time, each chunk in a read-write transaction of its own that
// starts after the last key of the one before, so that a migration of a
// large store needs memory for a chunk only.
func walkChunks(db *bolt.DB, name []byte, chunk int, fn func(tx *bolt.Tx, rows []kv) error) error {
	var after []byte
	for {
		n := 0
		if err := db.Update(func(tx *bolt.Tx) error {
			c := tx.Bucket(name).Cursor()
			k, v := c.First()
			if after != nil {
				if k, v = c.Seek(after); bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			var rows []kv
			for ; k != nil && len(rows) < chunk; k, v = c.Next() {
				rows = append(rows, kv{bytes.Clone(k), bytes.Clone(v)})
			}
			if n = len(rows); n > 0 {
				after = rows[n-1].k
			}
			return fn(tx, rows)
		}); err != nil {
			return err
		}
		if n < chunk {
			return nil
		}
	}
}

// storedLayout returns the layout that tx's store records, 0 for a new
// store: nothing recorded and no bucket but meta holding anything. Data
// without a record is of the first layouts, which recorded none: 1.
func storedLayout(tx *bolt.Tx) (int, error) {
	if b := tx.Bucket(bMeta); b != nil {
		switch raw := b.Get(keyLayout); len(raw) {
		case 4:
			return int(binary.BigEndian.Uint32(raw)), nil
		case 0:
		default:
			return 0, fmt.Errorf("data layout record %x: not 4 bytes", raw)
		}
	}
	layout := 0
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		if k, _ := b.Cursor().First(); k != nil && !bytes.Equal(name, bMeta) {
			layout = 1
		}
		return nil
	})
	return layout, err
}

func putLayout(tx *bolt.Tx, layout int) error {
	return tx.Bucket(bMeta).Put(keyLayout, binary.BigEndian.AppendUint32(nil, uint32(layout)))
}

// migrationsFrom returns the steps, in the order they run, that bring a
// directory of layout (0: a new one) to current; an error that says what
// to do when steps have no way there.
func migrationsFrom(layout, current int, steps []migration) ([]migration, error) {
	if layout > current {
		return nil, fmt.Errorf("data layout %d was written by a newer schedulerd (this one knows up to %d)", layout, current)
	}
	var out []migration
	for at := layout; at != 0 && at < current; at++ {
		i := 0
		for i < len(steps) && steps[i].from != at {
			i++
		}
		if i == len(steps) {
			return nil, fmt.Errorf("data layout %d was written by an older schedulerd, and this one reads only layout %d and has no migration from %d: "+
				"keep the directory with the schedulerd that wrote it, or start this one with an empty -data-dir and create the schedules again", layout, current, at)
		}
		out = append(out, steps[i])
	}
	return out, nil
}

// migrate runs steps, recording the layout each one reaches.
func migrate(db *bolt.DB, steps []migration, keys *tokenKey) error {
	for _, m := range steps {
		if err := m.run(db, keys); err != nil {
			return fmt.Errorf("migrate data layout %d to %d: %w", m.from, m.from+1, err)
		}
		if err := db.Update(func(tx *bolt.Tx) error { return putLayout(tx, m.from+1) }); err != nil {
			return fmt.Errorf("record data layout %d: %w", m.from+1, err)
		}
	}
	return nil
}
