package embedded

import (
	"bytes"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Index keys are concatenations of order-preserving parts:
//
//   - strings end in a NUL byte, so "H:3" sorts before "H:30" and a prefix
//     seek for "H:3\x00" never matches "H:30"; ids never contain NUL.
//   - integers are 8 (or 4) bytes big-endian with the sign bit flipped, so
//     negative values sort before positive ones.
//   - times are seconds (8 bytes, as integers) then nanoseconds (4 bytes),
//     which also covers the zero time.
//
// The byte order of a key is therefore the order of its parts, which is what
// the scans (earliest launch first, newest fire first, ids ascending) need.

func appendStr(b []byte, s string) []byte {
	b = append(b, s...)
	return append(b, 0)
}

func appendInt64(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(v)^(1<<63))
}

func appendInt32(b []byte, v int) []byte {
	return binary.BigEndian.AppendUint32(b, uint32(int32(v))^(1<<31))
}

func appendTime(b []byte, t time.Time) []byte {
	b = appendInt64(b, t.Unix())
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

const timeLen = 12

func readInt64(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

func readInt32(b []byte) int { return int(int32(binary.BigEndian.Uint32(b) ^ (1 << 31))) }

func readTime(b []byte) time.Time {
	return time.Unix(readInt64(b), int64(binary.BigEndian.Uint32(b[8:]))).UTC()
}

// readStr splits a NUL-terminated string off the front of b.
func readStr(b []byte) (string, []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	return string(b[:i]), b[i+1:]
}

func strKey(parts ...string) []byte {
	var b []byte
	for _, p := range parts {
		b = appendStr(b, p)
	}
	return b
}

// scanPrefix calls fn for every key of bucket b that starts with prefix, in
// order, until fn returns false.
func scanPrefix(tx *bolt.Tx, b, prefix []byte, fn func(k, v []byte) bool) {
	c := tx.Bucket(b).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if !fn(k, v) {
			return
		}
	}
}

// deleteKeys removes keys from bucket b. Keys are collected first because a
// bbolt cursor must not be used across deletes.
func deleteKeys(tx *bolt.Tx, b []byte, keys [][]byte) error {
	bk := tx.Bucket(b)
	for _, k := range keys {
		if err := bk.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
