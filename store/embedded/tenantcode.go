package embedded

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Tenant codes. The tenant indexes (schedules_by_tcode, ev_tcode) start
// their keys with a code of the tenant instead of its id: tenant_codes
// maps the id to the code, a uvarint (one byte for the first 127 tenants,
// two up to 16,383) given out in order from the bucket's sequence. Its
// keys are the id and a NUL, so that an empty id has a key too. A uvarint
// is prefix-free, so the keys of one tenant are exactly those under its
// code, in the order of what follows it; no query walks the tenant indexes
// across tenants. Codes are never taken back: a deleted tenant's code is a
// few bytes, and reusing it would need its entries gone first.
//
// The children bucket holds a child's tenant as a NUL byte and the code
// (childValue); tenant_ids maps the code back.
var (
	bTenantCodes = []byte("tenant_codes") // tenant id, NUL -> uvarint code
	bTenantIDs   = []byte("tenant_ids")   // uvarint code -> tenant id
)

// tenantPrefix returns the prefix of tenantID's keys in the tenant
// indexes, or nil when the tenant has no code, and so no entries.
func tenantPrefix(tx *bolt.Tx, tenantID string) []byte {
	if v := tx.Bucket(bTenantCodes).Get(strKey(tenantID)); v != nil {
		return bytes.Clone(v)
	}
	return nil
}

// codes finds and gives out the codes of a dictionary (dict.go) in a
// write transaction, remembering those it has met.
type codes struct {
	d      dictKind
	b, ids *bolt.Bucket
	known  map[string][]byte
}

func newCodes(tx *bolt.Tx, d dictKind) *codes {
	return &codes{d: d, b: tx.Bucket(dicts[d].codes), ids: tx.Bucket(dicts[d].names)}
}

// prefix returns name's code, giving it one if it has none.
func (t *codes) prefix(name string) ([]byte, error) {
	if p, ok := t.known[name]; ok {
		return p, nil
	}
	p := t.b.Get(strKey(name))
	if p != nil {
		p = bytes.Clone(p)
	} else {
		seq, err := t.b.NextSequence()
		if err != nil {
			return nil, fmt.Errorf("%s code for %q: %w", dicts[t.d].what, name, err)
		}
		p = binary.AppendUvarint(nil, seq)
		if err := t.b.Put(strKey(name), p); err != nil {
			return nil, fmt.Errorf("%s code for %q: %w", dicts[t.d].what, name, err)
		}
		if err := t.ids.Put(p, []byte(name)); err != nil {
			return nil, fmt.Errorf("%s code for %q: %w", dicts[t.d].what, name, err)
		}
	}
	if t.known == nil {
		t.known = map[string][]byte{}
	}
	t.known[name] = p
	return p, nil
}

// existing returns name's code, or nil when it has none (so no entries
// to delete).
func (t *codes) existing(name string) []byte {
	if p, ok := t.known[name]; ok {
		return p
	}
	return t.b.Get(strKey(name))
}

// tenantCodes are the codes of tenants in a write transaction.
type tenantCodes struct {
	codes
	values map[string][]byte // childValue's, shared by the tenant's children
}

func newTenantCodes(tx *bolt.Tx) *tenantCodes {
	return &tenantCodes{codes: *newCodes(tx, dictTenant)}
}

// key returns tenantID's code followed by rest.
func (t *tenantCodes) key(tenantID string, rest []byte) ([]byte, error) {
	p, err := t.prefix(tenantID)
	if err != nil {
		return nil, err
	}
	return append(append(make([]byte, 0, len(p)+len(rest)), p...), rest...), nil
}

// childValue returns the value of a child of tenantID in the children
// bucket: NUL, then the tenant's code.
//
// The value is shared by the calls for one tenant: nobody writes to it.
func (t *tenantCodes) childValue(tenantID string) ([]byte, error) {
	if v, ok := t.values[tenantID]; ok {
		return v, nil
	}
	p, err := t.prefix(tenantID)
	if err != nil {
		return nil, err
	}
	v := append([]byte{0}, p...)
	if t.values == nil {
		t.values = map[string][]byte{}
	}
	t.values[tenantID] = v
	return v, nil
}

// childTenant returns the tenant id of the children value v, read in the
// read-only transaction tx, through n, the Store's cache of tenant codes.
func childTenant(n *codeNames, tx *bolt.Tx, v []byte) (string, error) {
	if len(v) == 0 || v[0] != 0 {
		return "", fmt.Errorf("child: tenant value %x is not a code", v)
	}
	id, err := n.read(tx, dictTenant, v[1:])
	if err != nil {
		return "", fmt.Errorf("child: %w", err)
	}
	return id, nil
}
