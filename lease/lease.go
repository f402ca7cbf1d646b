// Package lease spreads a fixed set of work units (emitter partitions, event
// queue shards) over the live instances of a group, without configuration.
//
// Every instance keeps a membership lease "<group>/member/<owner>" and, on
// each tick, aims to hold ceil(units / live members) unit leases
// "<group>/unit/<n>". An instance over its share gives units back: it stops
// their work at once and releases their leases at its next tick, so that
// work in flight under them (a delivery whose outcome is being written)
// normally ends before another instance takes them. One under its share
// takes free or expired units. A dead instance's units expire after one TTL
// and are taken by the others on their next tick. Fences come from the store
// and grow on every change of owner, so work done under a lost lease can be
// refused by the store (compare-and-set on the fence).
package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/internal/startstop"
	"github.com/schedulerd/schedulerd/model"
)

// Store is what the balancer needs from the store.
type Store interface {
	LeaseAcquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (model.Lease, error)
	LeaseRenew(ctx context.Context, name, owner string, fence int64, now time.Time, ttl time.Duration) (model.Lease, error)
	LeaseRelease(ctx context.Context, name, owner string, fence int64) error
	LeaseList(ctx context.Context, prefix string) ([]model.Lease, error)
	LeaseAdvertise(ctx context.Context, name, owner string, fence int64, addr string) error
}

// Config configures a Balancer.
type Config struct {
	// Group names the kind of work, e.g. "emitter" or "handler".
	Group string
	// Units is the number of work units (partitions or shards), numbered 0..Units-1.
	Units int
	// Owner identifies this instance; unique per process.
	Owner string
	// TTL is how long a lease lives without renewal. Default 15s.
	TTL time.Duration
	// Interval is how often leases are renewed and rebalanced. Default TTL/3.
	Interval time.Duration
	// DrainTimeout bounds Stop: a tick in progress may finish until then,
	// and the leases are released within it. Default 5s.
	DrainTimeout time.Duration
	// Addr, if set, is advertised on this instance's member lease (the API
	// base URL other instances reach it at), for HolderOf.
	Addr string
}

func (c *Config) setDefaults() {
	c.TTL = cmp.Or(c.TTL, 15*time.Second)
	if c.TTL > 0 {
		c.Interval = cmp.Or(c.Interval, c.TTL/3)
	}
	c.DrainTimeout = cmp.Or(c.DrainTimeout, 5*time.Second)
}

// validate checks c after setDefaults; the error names the field.
func (c *Config) validate() error {
	switch {
	case c.Group == "" || strings.Contains(c.Group, "/"):
		return errors.New("lease config: Group must be non-empty and contain no '/'")
	case c.Units < 1:
		return fmt.Errorf("lease config: Units must be at least 1, got %d", c.Units)
	case c.Owner == "":
		return errors.New("lease config: Owner must be set")
	case c.TTL < 0:
		return fmt.Errorf("lease config: TTL must be positive, got %s", c.TTL)
	case c.Interval <= 0 || c.Interval >= c.TTL:
		return fmt.Errorf("lease config: Interval must be positive and below TTL, got %s", c.Interval)
	case c.DrainTimeout < 0:
		return fmt.Errorf("lease config: DrainTimeout must not be negative, got %s", c.DrainTimeout)
	}
	return nil
}

// Deps are the balancer's collaborators.
type Deps struct {
	// Store is required.
	Store Store
	// Clock defaults to the real clock; tests pass a clockwork.FakeClock.
	Clock clockwork.Clock
	// Logger receives lease changes at debug level and failures at warn.
	// The zero Logger discards.
	Logger zerolog.Logger
}

// Balancer holds this instance's share of a group's units. Its lifecycle
// is startstop's: Start, Ready, Stop.
type Balancer struct {
	startstop.Base

	cfg   Config
	store Store
	clock clockwork.Clock
	log   zerolog.Logger

	mu      sync.Mutex
	held    map[int]model.Lease
	changed chan struct{}

	lastOK time.Time // last Tick that reached the store, by clock
	// refence holds units given up by Refence whose lease still names this
	// owner in the store; they are released (and only then taken again,
	// with a new fence) on the next ticks.
	refence map[int]model.Lease
	// leaving holds units given back above the share: no longer held
	// (Held, Owns), their leases kept until the next tick releases them.
	leaving map[int]model.Lease

	lifeMu sync.Mutex
	sched  gocron.Scheduler

	holdersMu sync.Mutex
	holders   map[int]Holder // live unit holders as last read, by unit
	holdersAt time.Time      // when holders was read, by clock
}

// Holder is the live holder of a unit as the store has it.
type Holder struct {
	Owner string
	Fence int64
	// Addr is what the holder advertises on its member lease (Config.Addr);
	// "" if nothing.
	Addr string
}

// holdersFor is how long HolderOf answers from what it last read: a unit
// that changed owner is seen within it.
const holdersFor = time.Second

// HolderOf returns the live holder of unit, read from the store at most
// one second ago; ok is false when no live instance holds it. Errors are
// the store's.
func (b *Balancer) HolderOf(ctx context.Context, unit int) (h Holder, ok bool, err error) {
	b.holdersMu.Lock()
	defer b.holdersMu.Unlock()
	now := b.clock.Now()
	if b.holders == nil || now.Sub(b.holdersAt) >= holdersFor || now.Before(b.holdersAt) {
		units, err := b.store.LeaseList(ctx, b.cfg.Group+"/unit/")
		if err != nil {
			return Holder{}, false, fmt.Errorf("lease %s list units: %w", b.cfg.Group, err)
		}
		members, err := b.store.LeaseList(ctx, b.cfg.Group+"/member/")
		if err != nil {
			return Holder{}, false, fmt.Errorf("lease %s list members: %w", b.cfg.Group, err)
		}
		addr := map[string]string{}
		for _, m := range members {
			if m.Owner != "" && now.Before(m.ExpiresAt) {
				addr[m.Owner] = m.Addr
			}
		}
		hs := map[int]Holder{}
		for _, l := range units {
			u, err := strconv.Atoi(strings.TrimPrefix(l.Name, b.cfg.Group+"/unit/"))
			if err != nil || l.Owner == "" || !now.Before(l.ExpiresAt) {
				continue
			}
			hs[u] = Holder{Owner: l.Owner, Fence: l.Fence, Addr: addr[l.Owner]}
		}
		b.holders, b.holdersAt = hs, now
	}
	h, ok = b.holders[unit]
	return h, ok, nil
}

// Healthy reports whether a Tick reached the store within one TTL.
func (b *Balancer) Healthy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.lastOK.IsZero() && b.clock.Now().Sub(b.lastOK) < b.cfg.TTL
}

// New validates cfg and returns a Balancer. It holds nothing until Start or
// Tick.
func New(cfg Config, deps Deps) (*Balancer, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil {
		return nil, errors.New("lease deps: Store must be set")
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	return &Balancer{
		cfg: cfg, store: deps.Store, clock: deps.Clock,
		log:  deps.Logger.With().Str(logkey.Component, "lease").Str("group", cfg.Group).Logger(),
		held: map[int]model.Lease{}, refence: map[int]model.Lease{}, leaving: map[int]model.Lease{}, changed: make(chan struct{}, 1),
	}, nil
}

// Config returns the validated configuration.
func (b *Balancer) Config() Config { return b.cfg }

// Held returns a snapshot of the units this instance holds and their fences.
func (b *Balancer) Held() map[int]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[int]int64, len(b.held))
	for u, l := range b.held {
		out[u] = l.Fence
	}
	return out
}

// Owns reports whether this instance still holds unit under fence and the
// lease has not expired by its own clock.
func (b *Balancer) Owns(unit int, fence int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.held[unit]
	return ok && l.Fence == fence && b.clock.Now().Before(l.ExpiresAt)
}

// Refence gives unit up now and takes it again with a new fence once its
// lease could be released. A worker calls it when it can no longer tell
// which work it holds under the current fence: for example a claim whose
// answer was lost (the store applied it, the reply never came). Work claimed
// under the old fence is then claimable again, by this instance or another.
func (b *Balancer) Refence(unit int) {
	b.mu.Lock()
	l, ok := b.held[unit]
	if ok {
		delete(b.held, unit)
		b.refence[unit] = l
	}
	b.mu.Unlock()
	if ok {
		b.log.Info().Str(logkey.Lease, l.Name).Int64(logkey.Fence, l.Fence).Msg("lease given up for a new fence")
		b.signal()
	}
}

// Changed is signalled (without blocking) whenever the held set changes.
func (b *Balancer) Changed() <-chan struct{} { return b.changed }

// Start ticks once (so that Held is filled when it returns), then every
// Interval on a gocron scheduler driven by the clock. Calling it again while
// started does nothing.
func (b *Balancer) Start(ctx context.Context) error {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	run, ok := b.StartInit(ctx, b.cfg.DrainTimeout)
	if !ok {
		return nil
	}
	b.dropStale(run)
	b.tickLogged(run)
	s, err := gocron.NewScheduler(gocron.WithClock(b.clock))
	if err == nil {
		_, err = s.NewJob(gocron.DurationJob(b.cfg.Interval),
			gocron.NewTask(func() { b.Do(func() { b.tickLogged(run) }) }),
			gocron.WithName("lease-tick-"+b.cfg.Group),
			gocron.WithSingletonMode(gocron.LimitModeReschedule))
		if err != nil {
			_ = s.Shutdown()
		}
	}
	if err != nil {
		b.Base.Stop(nil)
		return fmt.Errorf("lease %s scheduler: %w", b.cfg.Group, err)
	}
	s.Start()
	b.sched = s
	b.Started()
	return nil
}

func (b *Balancer) tickLogged(ctx context.Context) {
	if err := b.Tick(ctx); err != nil && ctx.Err() == nil {
		b.log.Warn().Err(err).Msg("lease tick failed")
	}
}

// Stop stops ticking (a tick in progress may finish until DrainTimeout),
// then releases every lease, within DrainTimeout from the call, so that
// other instances can take the units at once instead of after a TTL. Safe
// to call twice or before Start.
func (b *Balancer) Stop() {
	// Real time, like the drain: the leases must go back even under a
	// stopped test clock.
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.DrainTimeout)
	defer cancel()
	b.lifeMu.Lock()
	s := b.sched
	b.sched = nil
	b.lifeMu.Unlock()
	b.Base.Stop(func() {
		if s != nil {
			// Shutdown waits for a running tick: in a goroutine, so that
			// the drain deadline still applies.
			b.Go(func() { _ = s.Shutdown() })
		}
	})
	b.mu.Lock()
	held, leaving := b.held, maps.Clone(b.leaving)
	b.held = map[int]model.Lease{}
	clear(b.leaving)
	b.mu.Unlock()
	for _, ls := range []map[int]model.Lease{held, leaving} {
		for _, l := range ls {
			_ = b.store.LeaseRelease(ctx, l.Name, b.cfg.Owner, l.Fence)
		}
	}
	if m, err := b.store.LeaseList(ctx, b.memberName()); err == nil {
		for _, l := range m {
			if l.Owner == b.cfg.Owner {
				_ = b.store.LeaseRelease(ctx, l.Name, b.cfg.Owner, l.Fence)
			}
		}
	}
	if len(held) > 0 {
		b.signal()
	}
}

// dropStale releases unit leases that name this owner but that this process
// never acquired: a previous incarnation with the same Owner held them. The
// next acquisition then gets a new fence, so events claimed by the previous
// incarnation are claimed again.
func (b *Balancer) dropStale(ctx context.Context) {
	leases, err := b.store.LeaseList(ctx, b.cfg.Group+"/unit/")
	if err != nil {
		return
	}
	b.mu.Lock()
	mine := map[string]bool{}
	for _, l := range b.held {
		mine[l.Name] = true
	}
	b.mu.Unlock()
	for _, l := range leases {
		if l.Owner == b.cfg.Owner && !mine[l.Name] {
			_ = b.store.LeaseRelease(ctx, l.Name, l.Owner, l.Fence)
		}
	}
}

func (b *Balancer) memberName() string { return b.cfg.Group + "/member/" + b.cfg.Owner }
func (b *Balancer) unitName(u int) string {
	return b.cfg.Group + "/unit/" + strconv.Itoa(u)
}

func (b *Balancer) signal() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// Tick renews membership and held units, then moves towards a fair share.
func (b *Balancer) Tick(ctx context.Context) error {
	now := b.clock.Now()
	ttl := b.cfg.TTL
	member, err := b.store.LeaseAcquire(ctx, b.memberName(), b.cfg.Owner, now, ttl)
	if err != nil {
		return fmt.Errorf("lease %s membership: %w", b.cfg.Group, err)
	}
	if b.cfg.Addr != "" && member.Addr != b.cfg.Addr {
		if err := b.store.LeaseAdvertise(ctx, member.Name, b.cfg.Owner, member.Fence, b.cfg.Addr); err != nil {
			b.log.Warn().Err(err).Msg("advertising the address on the member lease failed")
		}
	}
	b.mu.Lock()
	b.lastOK = now
	b.mu.Unlock()
	members, err := b.store.LeaseList(ctx, b.cfg.Group+"/member/")
	if err != nil {
		return fmt.Errorf("lease %s list members: %w", b.cfg.Group, err)
	}
	live := 0
	for _, m := range members {
		if m.Owner != "" && now.Before(m.ExpiresAt) {
			live++
		}
	}
	if live < 1 {
		live = 1
	}
	share := (b.cfg.Units + live - 1) / live

	changed := false
	pending := b.release(ctx, b.refence)
	// Units given back at the previous tick have had an interval for
	// their work in flight to end.
	leaving := b.release(ctx, b.leaving)
	// Renew what we hold; forget what we lost.
	b.mu.Lock()
	held := make(map[int]model.Lease, len(b.held))
	for u, l := range b.held {
		held[u] = l
	}
	b.mu.Unlock()
	for _, r := range b.renewAll(ctx, held, now, ttl) {
		u, l := r.unit, r.lease
		switch {
		case r.err == nil:
			held[u] = r.renewed
		case errors.Is(r.err, model.ErrConflict):
			b.log.Info().Str(logkey.Lease, l.Name).Int64(logkey.Fence, l.Fence).Msg("lease lost")
			delete(held, u)
			changed = true
		default:
			// Store trouble: keep the lease until it expires by our clock.
			if !now.Before(l.ExpiresAt) {
				delete(held, u)
				changed = true
			}
		}
	}
	// Give back units above our share, highest numbers first: their work
	// stops now, their leases go at the next tick.
	if len(held) > share {
		units := sortedUnits(held)
		b.mu.Lock()
		for _, u := range units[share:] {
			b.leaving[u] = held[u]
			leaving[u] = held[u]
			delete(held, u)
		}
		b.mu.Unlock()
		changed = true
	}
	// Take free or expired units up to our share.
	if len(held) < share {
		leases, err := b.store.LeaseList(ctx, b.cfg.Group+"/unit/")
		if err != nil {
			b.commit(held, changed)
			return fmt.Errorf("lease %s list units: %w", b.cfg.Group, err)
		}
		busy := map[int]bool{}
		for _, l := range leases {
			u, err := strconv.Atoi(strings.TrimPrefix(l.Name, b.cfg.Group+"/unit/"))
			if err != nil {
				continue
			}
			if l.Owner != "" && l.Owner != b.cfg.Owner && now.Before(l.ExpiresAt) {
				busy[u] = true
			}
			if _, ok := pending[u]; ok {
				busy[u] = true // still names us under the old fence
			}
			if _, ok := leaving[u]; ok {
				busy[u] = true // its work may still be ending
			}
		}
		// Start at an owner-dependent offset so that instances starting
		// together do not all race for unit 0.
		h := fnv.New32a()
		h.Write([]byte(b.cfg.Owner))
		off := int(h.Sum32() % uint32(b.cfg.Units))
		for i := 0; i < b.cfg.Units && len(held) < share; i++ {
			u := (off + i) % b.cfg.Units
			if busy[u] {
				continue
			}
			if _, ok := held[u]; ok {
				continue
			}
			l, err := b.store.LeaseAcquire(ctx, b.unitName(u), b.cfg.Owner, now, ttl)
			if err != nil {
				continue
			}
			held[u] = l
			changed = true
		}
	}
	b.commit(held, changed)
	return nil
}

// release releases the leases of set (b.refence or b.leaving), dropping
// from it those released or lost, and returns what is left. One the store
// could not release stays, even expired: taken again by this owner before
// that, it would keep its fence, and the work claimed under it would stay
// claimed by nobody.
func (b *Balancer) release(ctx context.Context, set map[int]model.Lease) map[int]model.Lease {
	b.mu.Lock()
	left := maps.Clone(set)
	b.mu.Unlock()
	for u, l := range left {
		err := b.store.LeaseRelease(ctx, l.Name, b.cfg.Owner, l.Fence)
		if err == nil || errors.Is(err, model.ErrConflict) {
			b.mu.Lock()
			delete(set, u)
			b.mu.Unlock()
			delete(left, u)
		}
	}
	return left
}

func (b *Balancer) commit(held map[int]model.Lease, changed bool) {
	b.mu.Lock()
	b.held = held
	b.mu.Unlock()
	if changed {
		b.log.Debug().Ints("units", sortedUnits(held)).Msg("leases changed")
		b.signal()
	}
}

func sortedUnits(m map[int]model.Lease) []int {
	out := make([]int, 0, len(m))
	for u := range m {
		out = append(out, u)
	}
	sort.Ints(out)
	return out
}

// maxRenewing bounds the renewals of one balancer in flight at once.
const maxRenewing = 16

type renewal struct {
	unit           int
	lease, renewed model.Lease
	err            error
}

// renewAll renews the held leases concurrently: the embedded store writes
// renewals that arrive together in one commit, and MongoDB's round trips
// overlap, where one after another each would cost its own.
func (b *Balancer) renewAll(ctx context.Context, held map[int]model.Lease, now time.Time, ttl time.Duration) []renewal {
	rs := make([]renewal, 0, len(held))
	for u, l := range held {
		rs = append(rs, renewal{unit: u, lease: l})
	}
	sem := make(chan struct{}, maxRenewing)
	var wg sync.WaitGroup
	for i := range rs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := &rs[i]
			r.renewed, r.err = b.store.LeaseRenew(ctx, r.lease.Name, b.cfg.Owner, r.lease.Fence, now, ttl)
		})
	}
	wg.Wait()
	return rs
}
