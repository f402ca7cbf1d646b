package embedded

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// DefaultReserveBytes is the disk space the store file keeps allocated
// past its data unless Options.ReserveBytes says otherwise.
const DefaultReserveBytes = 16 << 20

// reserve keeps disk space allocated to the store file past its data, so
// that writes go on when the disk is full.
//
// bbolt writes copy-on-write: a commit writes its pages to pages freed by
// earlier commits, and past the high-water mark only when there are too
// few. Deliveries and releases change or delete records, so most of their
// pages come from the freed ones, but not all. bbolt grows the file with
// ftruncate, which on Linux file systems allocates no blocks: the first
// write to a page past the high-water mark then needs a new block and
// fails with ENOSPC on a full disk. No bbolt option allocates them
// (AllocSize, InitialMmapSize and NoGrowSync only size the file or the
// map), so the reserve does: before each commit, inside the write
// transaction (no other commit runs meanwhile), it allocates with
// fallocate the blocks of the pages from the high-water mark to size bytes
// past it, when fewer than half of them are left. On a full disk that
// fails and the commits live on what is left; the first commit after
// space returns tops it up again. On a copy-on-write file system (btrfs,
// ZFS) even a freed page needs a new block when it is written again: the
// reserve cannot help there.
type reserve struct {
	size     int64
	f        *os.File                             // the store file, opened again; nil: no reserve
	allocate func(f *os.File, off, n int64) error // fallocate; tests replace it

	mu   sync.Mutex
	end  int64 // the file's blocks are allocated up to here (from the high-water mark on)
	hwm  int64 // the high-water mark (bytes) as the last commit began
	full bool  // a commit failed for lack of space, and no top-up has worked since
	err  error // what failed: the commit's error, or the top-up's after it
}

// openReserve opens the store file at path again for a reserve of size
// bytes (none if size is 0 or the platform cannot allocate blocks ahead).
func openReserve(path string, size int64) (*reserve, error) {
	r := &reserve{size: size, allocate: allocateFile}
	if size <= 0 || !canAllocate {
		return r, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s for its reserve: %w", path, err)
	}
	r.f = f
	return r, nil
}

func (r *reserve) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	return r.f.Close()
}

// update is db.Update with the reserve topped up before the commit.
func (r *reserve) update(db *bolt.DB, fn func(*bolt.Tx) error) error {
	err := db.Update(func(tx *bolt.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		r.top(tx.Size())
		return nil
	})
	r.committed(err)
	return err
}

// top allocates the reserve past hwm, the high-water mark of a write
// transaction that is about to commit, when less than half of it is left
// or the last commit failed for lack of space.
func (r *reserve) top(hwm int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		// Without a reserve, a commit that grew the file (a failed one
		// leaves the high-water mark where it was) shows there is space.
		if r.full && hwm > r.hwm {
			r.full, r.err = false, nil
		}
		r.hwm = hwm
		return
	}
	r.hwm = hwm
	if !r.full && r.end-hwm >= r.size/2 {
		return
	}
	if err := r.allocate(r.f, hwm, r.size); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			// A file system without fallocate: no reserve.
			_ = r.f.Close()
			r.f = nil
			return
		}
		if r.full {
			r.err = fmt.Errorf("reserve: %w", err)
		}
		return
	}
	r.end = max(r.end, hwm+r.size)
	r.full, r.err = false, nil
}

// committed notes the outcome of a commit: one that failed for lack of
// space marks the store full until a top-up works (or, without a reserve,
// until a commit grows the file). Commits that reuse freed pages may go
// through meanwhile.
func (r *reserve) committed(err error) {
	if err == nil || !isNoSpace(err) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.full, r.err = true, err
}

// SpaceStatus is the store's own view of its disk space (Store.Space).
type SpaceStatus struct {
	// Reserved is the disk space allocated to the store file past its
	// data: what writes can still take when the disk is full (an
	// estimate, as of the last commit). Zero without a reserve.
	Reserved int64
	// Full is set when a commit failed for lack of disk space and the
	// reserve could not be allocated again since (without a reserve: no
	// commit grew the file since): writes that need new pages fail until
	// space is freed.
	Full bool
	// Err is the error that made Full.
	Err error
}

// Space reports whether the store's writes fail for lack of disk space,
// and how much of its reserve is left.
func (s *Store) Space() SpaceStatus {
	r := s.reserve
	r.mu.Lock()
	defer r.mu.Unlock()
	st := SpaceStatus{Full: r.full, Err: r.err}
	if r.f != nil {
		st.Reserved = max(r.end-r.hwm, 0)
	}
	return st
}

// isNoSpace tells an error of a full disk or an exhausted quota. bbolt
// keeps the error of a write or a sync, but only the text of a failed
// ftruncate.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		strings.Contains(err.Error(), syscall.ENOSPC.Error())
}
