package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"

	"github.com/schedulerd/schedulerd/model"
)

// ErrDamaged is returned by Open when the store file is truncated or is not
// a store file at all.
var ErrDamaged = errors.New("store file is damaged")

// ErrLocked is returned by Open when another process has the data directory
// open.
var ErrLocked = errors.New("data directory is locked by another process")

// File returns the path of the store file inside dir.
func File(dir string) string { return filepath.Join(dir, fileName) }

// bbolt's on-disk meta page, which bbolt does not export: a 16-byte page
// header, then magic, version, page size, flags, root bucket (16 bytes),
// freelist page, high-water page id, txid and an FNV-64a checksum of the
// 56 bytes before it. Integers are in the machine's byte order.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSize       = 64
)

type boltMeta struct {
	pageSize uint32
	pgid     uint64 // pages in use: the file must hold at least this many
	txid     uint64
}

func readMeta(b []byte) (boltMeta, bool) {
	if len(b) < pageHeaderSize+metaSize {
		return boltMeta{}, false
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	e := binary.NativeEndian
	h := fnv.New64a()
	h.Write(m[:56])
	if e.Uint32(m[0:]) != boltMagic || e.Uint32(m[4:]) != boltVersion || e.Uint64(m[56:]) != h.Sum64() {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: e.Uint32(m[8:]), pgid: e.Uint64(m[40:]), txid: e.Uint64(m[48:])}, true
}

// checkFile rejects a store file that bbolt would fault on: bbolt maps the
// file into memory and reads pages up to the high-water mark recorded in
// its meta page, so a file cut short of it ends the process with SIGBUS
// instead of an error. A missing or empty file is fine: bbolt initialises
// it.
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("embedded: open %s: %w: %w", path, model.ErrUnavailable, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("embedded: stat %s: %w: %w", path, model.ErrUnavailable, err)
	}
	size := info.Size()
	if size == 0 {
		return nil
	}
	read := func(off int64) (boltMeta, bool) {
		buf := make([]byte, pageHeaderSize+metaSize)
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return boltMeta{}, false
		}
		return readMeta(buf)
	}
	// The first meta page is at 0, the second one page later; like bbolt,
	// try every page size it supports when the first is unreadable.
	var best boltMeta
	found := false
	consider := func(m boltMeta, ok bool) {
		if ok && (!found || m.txid > best.txid) {
			best, found = m, true
		}
	}
	m0, ok0 := read(0)
	consider(m0, ok0)
	if ok0 {
		consider(read(int64(m0.pageSize)))
	} else {
		for i := range 15 {
			m, ok := read(1024 << i)
			if ok && int64(m.pageSize) == 1024<<i {
				consider(m, ok)
				break
			}
		}
	}
	damaged := func(why string) error {
		return fmt.Errorf("embedded: %s: %w (%s); restore it from a backup, or move it away to start with an empty store", path, ErrDamaged, why)
	}
	if !found {
		return damaged("no valid bbolt meta page")
	}
	if need := int64(best.pgid) * int64(best.pageSize); size < need || size < 2*int64(best.pageSize) {
		return damaged(fmt.Sprintf("%d bytes, but its pages need %d: the file was truncated", size, max(need, 2*int64(best.pageSize))))
	}
	return nil
}
