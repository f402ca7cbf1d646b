package emitter

import (
	"sync"

	"github.com/schedulerd/schedulerd/cron"
)

// keyCacheMax bounds the keys a keyCache holds (about 40 bytes each).
const keyCacheMax = 1 << 16

// keySet is the set of children keys of one cron expression; shared, never
// written after it was built.
type keySet map[cron.Key]struct{}

// keyCache holds the children keys of the cron expressions Saved has split,
// so that saving many schedules with a common expression parses it once.
// The keys depend on the canonical expression alone (the stored
// Schedule.Cron), not on the schedule or its version, so that string is the
// cache key. The zero value is ready to use.
type keyCache struct {
	mu     sync.Mutex
	sets   map[string]keySet
	held   int // keys in sets
	misses int // expressions parsed
}

// get returns the children keys of expr.
func (c *keyCache) get(expr string) (keySet, error) {
	c.mu.Lock()
	ks, ok := c.sets[expr]
	c.mu.Unlock()
	if ok {
		return ks, nil
	}
	e, err := cron.Parse(expr)
	if err != nil {
		return nil, err
	}
	// The master enforces its children limit; the emitter splits whatever
	// was stored.
	keys, err := e.Children(1 << 22)
	if err != nil {
		return nil, err
	}
	ks = make(keySet, len(keys))
	for _, k := range keys {
		ks[k] = struct{}{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.misses++
	if len(ks) > keyCacheMax {
		return ks, nil
	}
	if c.sets == nil {
		c.sets = map[string]keySet{}
	}
	if old, ok := c.sets[expr]; ok {
		return old, nil // a concurrent get stored it meanwhile
	}
	for k, v := range c.sets {
		if c.held+len(ks) <= keyCacheMax {
			break
		}
		delete(c.sets, k)
		c.held -= len(v)
	}
	c.sets[expr] = ks
	c.held += len(ks)
	return ks, nil
}
