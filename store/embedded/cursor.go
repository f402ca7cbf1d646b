package embedded

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// reverse moves a cursor backward safely within a write transaction.
// bbolt's backward moves mishandle leaf pages that the same transaction has
// emptied (a bucket is rebalanced only at commit): Cursor.Last never
// returns when every leaf of the bucket is empty, and Cursor.Prev answers
// nil on an empty leaf as if it were the start of the bucket. reverse moves
// backward only when a key is known to lie there, and steps over the empty
// leaves on the way; the forward moves (First, Seek, Next) skip them
// already.
type reverse struct {
	c     *bolt.Cursor
	first []byte // the bucket's first key; nil: the bucket is empty
}

func reverseCursor(b *bolt.Bucket) *reverse {
	c := b.Cursor()
	first, _ := c.First()
	return &reverse{c: c, first: bytes.Clone(first)}
}

// below positions the cursor at the greatest key under upper (the last key
// when upper is nil) and returns it; nil when there is none.
func (r *reverse) below(upper []byte) []byte {
	if r.first == nil || upper != nil && bytes.Compare(r.first, upper) >= 0 {
		return nil
	}
	var k []byte
	if upper != nil {
		k, _ = r.c.Seek(upper)
	}
	if k == nil {
		k, _ = r.c.Last() // returns: some leaf holds a key
	} else {
		k, _ = r.c.Prev()
	}
	return r.overEmpty(k)
}

// prev moves from k, where the cursor stands, to the key before it; nil at
// the first key.
func (r *reverse) prev(k []byte) []byte {
	if bytes.Equal(k, r.first) {
		return nil
	}
	k, _ = r.c.Prev()
	return r.overEmpty(k)
}

// overEmpty steps back over empty leaves: a nil while a key lies before the
// cursor is one.
func (r *reverse) overEmpty(k []byte) []byte {
	for k == nil {
		k, _ = r.c.Prev()
	}
	return k
}

// lastKey returns the last key of b, nil when b is empty.
func lastKey(b *bolt.Bucket) []byte { return reverseCursor(b).below(nil) }
