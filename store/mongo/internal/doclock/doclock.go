// Package doclock makes conditional writes atomic on a MongoDB-protocol
// server that is not: FerretDB v1 runs an update, delete or findAndModify as
// a find and then a write by _id, so two compare-and-sets on one document
// can both succeed. Conflicts are per document, so writes lock the
// documents they name by _id (and share their collection); a write that
// names none (a filter without _id, or an operator on it) locks its whole
// collection. Writes to different documents, and everything in different
// collections, go on in parallel.
//
// The store driver locks within one process; the FerretDB test proxy
// (mongotest) locks across the processes it serves.
package doclock

import (
	"hash/fnv"
	"slices"
	"sync"
)

// stripes is how many locks the documents share, by hash of collection and
// _id: enough that unrelated documents seldom wait for each other.
const stripes = 512

// Set is a set of document locks. The zero value is ready to use.
type Set struct {
	mu    sync.Mutex
	colls map[string]*sync.RWMutex
	docs  [stripes]sync.Mutex
}

// Held is what one write holds until Unlock.
type Held struct {
	coll    *sync.RWMutex
	whole   bool
	stripes []int
}

func (s *Set) coll(name string) *sync.RWMutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.colls == nil {
		s.colls = map[string]*sync.RWMutex{}
	}
	l := s.colls[name]
	if l == nil {
		l = &sync.RWMutex{}
		s.colls[name] = l
	}
	return l
}

// Lock takes the locks of a write on coll touching the documents ids (none:
// unknown, the whole collection). Stripes are taken in order, so two writes
// cannot wait for each other.
func (s *Set) Lock(coll string, ids ...string) *Held {
	h := &Held{coll: s.coll(coll), whole: len(ids) == 0}
	if h.whole {
		h.coll.Lock()
		return h
	}
	h.coll.RLock()
	for _, id := range ids {
		h.stripes = append(h.stripes, stripe(coll, id))
	}
	slices.Sort(h.stripes)
	h.stripes = slices.Compact(h.stripes)
	for _, i := range h.stripes {
		s.docs[i].Lock()
	}
	return h
}

func stripe(coll, id string) int {
	f := fnv.New32a()
	_, _ = f.Write([]byte(coll + "\x00" + id))
	return int(f.Sum32() % stripes)
}

// Unlock gives back what Lock took.
func (s *Set) Unlock(h *Held) {
	if h.whole {
		h.coll.Unlock()
		return
	}
	for _, i := range slices.Backward(h.stripes) {
		s.docs[i].Unlock()
	}
	h.coll.RUnlock()
}
