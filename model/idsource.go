package model

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"time"
)

// IDSource makes the ids of new objects: prefix + IDText of 10 bytes, the
// creation second (4 bytes) and a counter (6 bytes) of the creating scope
// (a tenant, or the admin key): each scope that creates in a second gets a
// lane of its own (the first 2 bytes, random and distinct among the
// scopes of that second) whose counter (4 bytes) starts at a random value
// below 2^31 and counts that scope's ids only. Ids made in one second
// therefore sort together and, in a scope, in order: the rows of a batch,
// and their fires and events (whose ids start with the schedule's), go
// into a few neighbouring pages of the store's B+trees rather than one
// page each, which is most of what a commit of random ids writes. And a
// tenant comparing its own ids learns nothing of what other tenants
// created meanwhile. Two instances (or a restart) in the same second
// collide only if they give two scopes the same lane and the counters'
// ranges overlap: about n/2^47 for n ids a second. The zero value is ready
// to use.
type IDSource struct {
	mu    sync.Mutex
	sec   uint32                // the latest second ids were made in
	lanes map[string]*idCounter // by scope, in sec
	used  map[uint16]bool       // lanes given out in sec
}

// idCounter is a scope's lane and its next counter value.
type idCounter struct {
	lane uint16
	next uint32
}

// New returns a new id of scope made at now.
func (g *IDSource) New(scope, prefix string, now time.Time) string {
	return g.NewN(scope, prefix, now, 1)[0]
}

// NewN returns n new ids of scope at now, consecutive: a batch's rows go
// into the store's pages in one run even while other batches take ids,
// instead of interleaving with theirs (which leaves pages split half
// full).
func (g *IDSource) NewN(scope, prefix string, now time.Time, n int) []string {
	sec, lane, first := g.reserve(scope, now, n)
	ids := make([]string, n)
	var raw [10]byte
	binary.BigEndian.PutUint32(raw[:4], sec)
	binary.BigEndian.PutUint16(raw[4:6], lane)
	for i := range ids {
		binary.BigEndian.PutUint32(raw[6:], first+uint32(i))
		ids[i] = FormatID(prefix, raw)
	}
	return ids
}

// reserve takes n counter values of scope in the second of now and returns
// the second, the scope's lane and the first value. A second before the
// latest one ids were made in (a batch begun before another's, or the
// clock set back) takes the latest: ids never repeat a lane's range, and a
// scope's sort in the order they are made.
func (g *IDSource) reserve(scope string, now time.Time, n int) (sec uint32, lane uint16, first uint32) {
	sec = uint32(now.Unix())
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lanes == nil || sec > g.sec {
		g.sec, g.lanes, g.used = sec, map[string]*idCounter{}, map[uint16]bool{}
	}
	c := g.lanes[scope]
	if c == nil {
		c = g.newCounter()
		g.lanes[scope] = c
	}
	first = c.next
	c.next += uint32(n)
	return g.sec, c.lane, first
}

// newCounter is a scope's counter in a new lane. Past 2^16 scopes in one
// second (a lane each) a scope shares the counter of another.
func (g *IDSource) newCounter() *idCounter {
	var r [6]byte
	_, _ = rand.Read(r[:])
	lane := binary.BigEndian.Uint16(r[:2])
	if len(g.used) == 1<<16 {
		for _, c := range g.lanes {
			return c
		}
	}
	for g.used[lane] {
		lane++
	}
	g.used[lane] = true
	return &idCounter{lane: lane, next: binary.BigEndian.Uint32(r[2:]) >> 1}
}

// KeyedID returns the deterministic id of the object scope creates under
// an idempotency key: concurrent retries of one create collide on it in
// the store instead of making duplicates.
func KeyedID(prefix, scope, key string) string {
	sum := sha256.Sum256([]byte("idempotency\x00" + scope + "\x00" + key))
	return FormatID(prefix, [10]byte(sum[:10]))
}
