package embedded

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// Dictionaries give short codes to strings that many rows repeat: tenant
// ids (tenantcode.go) and the origins of target URLs
// (splitOrigin). Each has two buckets, the name and a NUL to the code, a
// uvarint given out in order from the first bucket's sequence, and the code
// back to the name. Codes are never taken back, so a code never changes
// meaning.
type dictKind int

const (
	dictTenant dictKind = iota
	dictOrigin
	dictKinds
)

var (
	bOriginCodes = []byte("origin_codes") // origin, NUL -> uvarint code
	bOriginNames = []byte("origin_names") // uvarint code -> origin
)

var dicts = [dictKinds]struct {
	what         string
	codes, names []byte
}{
	dictTenant: {"tenant", bTenantCodes, bTenantIDs},
	dictOrigin: {"origin", bOriginCodes, bOriginNames},
}

// errNoCode is what a rowDict without a write transaction returns for a
// name that has no committed code yet.
var errNoCode = errors.New("no code yet")

// codeNames caches a dictionary's codes as committed, both ways. A
// committed code is never given to another name, so an entry never goes
// stale; entries are added only from read-only transactions, so a code that
// a write transaction gave out and then rolled back is never here. The
// maps are replaced, not changed, when an entry is added (once a name), so
// that readers take no lock.
type codeNames struct {
	mu sync.Mutex // serialises additions
	m  atomic.Pointer[codeMaps]
}

type codeMaps struct {
	names map[string]string // code -> name
	codes map[string][]byte // name -> code; shared, not written to
}

func (n *codeNames) name(code []byte) (string, bool) {
	if m := n.m.Load(); m != nil {
		s, ok := m.names[string(code)]
		return s, ok
	}
	return "", false
}

func (n *codeNames) code(name string) ([]byte, bool) {
	if m := n.m.Load(); m != nil {
		c, ok := m.codes[name]
		return c, ok
	}
	return nil, false
}

// maxCachedCodes bounds a cache, which is copied on every addition: the
// codes of a dictionary past it (per-job origins) are read in their
// transactions instead.
const maxCachedCodes = 1024

// add records a committed code; code is copied.
func (n *codeNames) add(code []byte, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.m.Load()
	if m != nil && len(m.names) >= maxCachedCodes {
		return
	}
	next := &codeMaps{names: map[string]string{string(code): name}, codes: map[string][]byte{name: []byte(string(code))}}
	if m != nil {
		maps.Copy(next.names, m.names)
		maps.Copy(next.codes, m.codes)
	}
	n.m.Store(next)
}

// read returns the name of code in dictionary d, from the cache or from
// tx, caching it if tx is read-only.
func (n *codeNames) read(tx *bolt.Tx, d dictKind, code []byte) (string, error) {
	if s, ok := n.name(code); ok {
		return s, nil
	}
	s, err := readName(tx, d, code)
	if err == nil && !tx.Writable() {
		n.add(code, s)
	}
	return s, err
}

func readName(tx *bolt.Tx, d dictKind, code []byte) (string, error) {
	raw := tx.Bucket(dicts[d].names).Get(code)
	if raw == nil {
		return "", fmt.Errorf("%s code %x: no such code in %s", dicts[d].what, code, dicts[d].names)
	}
	return string(raw), nil
}

// rowCodes maps what a schedule row stores by a code (its tenant and its
// target's origin) to the code and back.
type rowCodes interface {
	code(d dictKind, name string) ([]byte, error)
	name(d dictKind, code []byte) (string, error)
	// tokenKey returns the store's token key (token.go); nil: none.
	tokenKey() *tokenKey
}

// rowDict is the rowCodes of a transaction, tx: it reads codes in the
// Store's caches (names, if not nil) and in tx's buckets, and in a write
// transaction gives out new ones. Without tx it knows only what names
// holds, and code returns errNoCode for the rest: rows encoded before a
// write transaction, which holds the one writer.
type rowDict struct {
	tx     *bolt.Tx
	names  *[dictKinds]codeNames
	give   [dictKinds]*codes            // tx's, made when first needed
	seen   [dictKinds]map[string]string // code -> name read in a write tx, which names must not hold
	tokens *tokenKey                    // nil: read in tx when needed
}

func (r *rowDict) code(d dictKind, name string) ([]byte, error) {
	if r.names != nil {
		if c, ok := r.names[d].code(name); ok {
			return c, nil
		}
	}
	switch {
	case r.tx == nil:
		return nil, errNoCode
	case r.tx.Writable():
		if r.give[d] == nil {
			r.give[d] = newCodes(r.tx, d)
		}
		return r.give[d].prefix(name)
	}
	c := r.tx.Bucket(dicts[d].codes).Get(strKey(name))
	if c == nil {
		return nil, errNoCode
	}
	if r.names != nil {
		r.names[d].add(c, name)
	}
	return c, nil
}

func (r *rowDict) name(d dictKind, code []byte) (string, error) {
	if r.names != nil {
		if r.tx != nil && !r.tx.Writable() {
			return r.names[d].read(r.tx, d, code)
		}
		if s, ok := r.names[d].name(code); ok {
			return s, nil
		}
	}
	if s, ok := r.seen[d][string(code)]; ok {
		return s, nil
	}
	if r.tx == nil {
		return "", fmt.Errorf("%s code %x: %w", dicts[d].what, code, errNoCode)
	}
	s, err := readName(r.tx, d, code)
	if err != nil {
		return "", err
	}
	if r.seen[d] == nil {
		r.seen[d] = map[string]string{}
	}
	r.seen[d][string(code)] = s
	return s, nil
}

// dict returns the rowDict of tx with the Store's caches.
func (s *Store) dict(tx *bolt.Tx) *rowDict {
	return &rowDict{tx: tx, names: &s.names, tokens: s.tokens}
}

// tokenKey returns the release-token key of r's store.
func (r *rowDict) tokenKey() *tokenKey { return r.tokens }

// txDict returns the rowDict of the write transaction tx, which gives out
// tenant codes through codes.
func txDict(tx *bolt.Tx, codes *tenantCodes, keys *tokenKey) *rowDict {
	r := &rowDict{tx: tx, tokens: keys}
	r.give[dictTenant] = &codes.codes
	return r
}

// committedDict returns a rowDict without a transaction for encoding the
// rows of scs before a write transaction: it holds the committed codes of
// their tenants and origins, which it reads in a read-only transaction if
// the Store's caches lack them. Encoding a schedule whose tenant or origin
// has no code yet fails with errNoCode; the write transaction encodes it.
func (s *Store) committedDict(scs ...*model.Schedule) *rowDict {
	known := func(sc *model.Schedule) bool {
		if _, ok := s.names[dictTenant].code(sc.TenantID); !ok {
			return false
		}
		o, _, ok := splitOrigin(sc.Target.URL)
		if ok {
			_, ok = s.names[dictOrigin].code(o)
			return ok
		}
		return true
	}
	if !slices.ContainsFunc(scs, func(sc *model.Schedule) bool { return !known(sc) }) {
		return &rowDict{names: &s.names, tokens: s.tokens}
	}
	// A failure leaves the caches as they were: the write transaction
	// encodes what they lack.
	_ = s.db.View(func(tx *bolt.Tx) error {
		r := s.dict(tx)
		for _, sc := range scs {
			if known(sc) {
				continue
			}
			_, _ = r.code(dictTenant, sc.TenantID)
			if o, _, ok := splitOrigin(sc.Target.URL); ok {
				_, _ = r.code(dictOrigin, o)
			}
		}
		return nil
	})
	return &rowDict{names: &s.names, tokens: s.tokens}
}
