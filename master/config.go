package master

import (
	"cmp"
	"fmt"
	"net/netip"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/internal/guard"
	"github.com/schedulerd/schedulerd/model"
)

// Config configures the master. Zero values of the limits take the defaults
// listed on each field; New validates the result and names the bad field.
type Config struct {
	// AdminKey is the one key that may call the /v1/tenants operations.
	// Empty disables the admin API (every admin call answers 401). When set it
	// must be at least 16 characters long.
	AdminKey string
	// Partitions is the number of emitter partitions (model.PartitionOf).
	// Required; it must match the emitter's configuration.
	Partitions int

	// MaxPayloadBytes limits a schedule's payload (default 256 KiB).
	MaxPayloadBytes int
	// MaxEventCount limits a schedule's eventCount (default 1,000,000).
	MaxEventCount int
	// MaxNameLen limits names of schedules, policies and tenants, in
	// characters (default 200).
	MaxNameLen int
	// MaxChildren limits the children of one schedule (default
	// cron.MaxChildren).
	MaxChildren int
	// MaxBodyBytes limits request bodies; larger ones answer 413 before they
	// are read whole (default 1 MiB; at least MaxPayloadBytes + 4 KiB).
	MaxBodyBytes int64
	// MaxWindow limits a schedule's batch window (default 24h).
	MaxWindow time.Duration
	// MaxTokenTimeout limits a policy's tokenTimeout and an extend call's
	// extendBy (default 24h).
	MaxTokenTimeout time.Duration
	// DefaultTokenTimeout is a new policy's tokenTimeout when none is given
	// (default 15m).
	DefaultTokenTimeout time.Duration
	// DefaultMaxAttempts is a new schedule's maxAttempts when none is given
	// (default model.DefaultMaxAttempts).
	DefaultMaxAttempts int

	// TargetAllowCIDRs and TargetDenyCIDRs are the SSRF rule of HTTP targets
	// on top of netguard.DefaultDeny. Give them the HTTP deliverer's
	// AllowCIDRs and DenyCIDRs: a target URL whose host is an address
	// literal that delivery would refuse (169.254.169.254, 127.1 when
	// loopback is denied) is then refused on save, a 422 naming target.url.
	TargetAllowCIDRs []netip.Prefix
	TargetDenyCIDRs  []netip.Prefix

	// TenantWeight is the weight of a tenant that sets none (default 1).
	TenantWeight int
	// TenantQuotas are the quotas of a tenant that sets none of its own;
	// each zero field takes its default (guard.TenantQuotaDefaults).
	TenantQuotas model.TenantQuotas
	// CatchUpLimit is the emitter's catch-up limit (default 1h): a one-off
	// whose runAt is older is refused unless its misfire is fire_all. Give
	// it the emitter's value.
	CatchUpLimit time.Duration

	// RateLimit limits requests per tenant (and for the admin key).
	RateLimit RateLimit
	// WrongTokens limits release and extend calls with a wrong token (or
	// an unknown event) per client address and per event (default 60 per
	// minute each).
	WrongTokens WrongTokens

	// PreviewDefault is the number of fire times a preview returns without
	// ?count (default 10). PreviewMax is the largest count (default 1000).
	PreviewDefault int
	PreviewMax     int
	// PageDefault is the page size of list calls without ?limit (default 100).
	PageDefault int
	// BulkPage is how many matching schedules one POST
	// /v1/schedules/actions call acts on at most (default and most 1,000).
	BulkPage int
	// MaxBatchItems limits the items of one POST /v1/schedules/batch
	// (default 1,000); more answer 413 naming items.
	MaxBatchItems int
	// MaxBatchBodyBytes limits the body of POST /v1/schedules/batch in
	// place of MaxBodyBytes (default 8 MiB; at least MaxBodyBytes).
	MaxBatchBodyBytes int64
	// BatchBodyBudget bounds the bytes of batch bodies handled at once
	// (default 2 × MaxBatchBodyBytes), each batch counting at least
	// MaxBodyBytes: a batch costs many times its body in memory while it
	// is decoded and written (docs/benchmarks.md), so this bounds the
	// memory of batch intake whatever the number of clients. A batch waits
	// for room up to BatchBodyWait (default 10 s), then answers 503 with
	// Retry-After.
	BatchBodyBudget int64
	BatchBodyWait   time.Duration
	// IdempotencyWait is how long a create that collides with a concurrent
	// request carrying the same Idempotency-Key waits for the first one's
	// answer (default 5s).
	IdempotencyWait time.Duration
	// QuotaCountTTL is how long a tenant's counted schedules and stored
	// events serve the quota checks at least before they are counted again,
	// in the background (what this process lets through meanwhile is
	// added); a tenant whose count takes long is counted at most once per
	// 20 times that. Default 5s; negative: count on every check, before it.
	QuotaCountTTL time.Duration
	// IdempotencySecret is what the key sealing idempotency records
	// (AES-256-GCM) is derived from; instances sharing a store need the same
	// one. The runtime passes the signing secret. Empty: a random key, so
	// records replay only in this process.
	IdempotencySecret []byte
	// PreviousIdempotencySecrets are secrets rotated out: records sealed
	// with one of them still open (new ones are sealed with
	// IdempotencySecret).
	PreviousIdempotencySecrets [][]byte
}

// RateLimit is a token bucket per tenant: PerSecond requests per second on
// average with bursts of Burst. PerSecond 0 turns the limit off.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// WrongTokens: once a client address sent Max release or extend calls
// that answered 404 in a Window, or Max such calls named one event, their
// further wrong tokens answer 429 for the rest of the Window. A correct
// token is always served. Max < 0 turns the limit off.
type WrongTokens struct {
	Max    int
	Window time.Duration
}

// Default limits.
const (
	DefaultMaxPayloadBytes = 256 << 10
	DefaultMaxEventCount   = 1_000_000
	DefaultMaxNameLen      = 200
	DefaultMaxBodyBytes    = 1 << 20
	// DefaultMaxBatchItems and DefaultMaxBatchBodyBytes bound a batch create.
	DefaultMaxBatchItems     = 1000
	DefaultMaxBatchBodyBytes = 8 << 20

	// MinPriority and MaxPriority bound a schedule's priority.
	MinPriority = -1000
	MaxPriority = 1000
	// MaxAttemptsLimit bounds a schedule's maxAttempts (also in openapi.yaml).
	MaxAttemptsLimit = 100
	// MaxTenantWeight bounds a tenant's weight (also in openapi.yaml).
	MaxTenantWeight = 1000
)

func (c *Config) setDefaults() {
	c.MaxPayloadBytes = cmp.Or(c.MaxPayloadBytes, DefaultMaxPayloadBytes)
	c.MaxEventCount = cmp.Or(c.MaxEventCount, DefaultMaxEventCount)
	c.MaxNameLen = cmp.Or(c.MaxNameLen, DefaultMaxNameLen)
	c.MaxChildren = cmp.Or(c.MaxChildren, cron.MaxChildren)
	// The body must fit the largest payload and the rest of the schedule.
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, max(DefaultMaxBodyBytes, int64(c.MaxPayloadBytes)+64<<10))
	c.MaxWindow = cmp.Or(c.MaxWindow, 24*time.Hour)
	c.MaxTokenTimeout = cmp.Or(c.MaxTokenTimeout, 24*time.Hour)
	c.DefaultTokenTimeout = cmp.Or(c.DefaultTokenTimeout, 15*time.Minute)
	c.DefaultMaxAttempts = cmp.Or(c.DefaultMaxAttempts, model.DefaultMaxAttempts)
	c.PreviewDefault = cmp.Or(c.PreviewDefault, 10)
	c.PreviewMax = cmp.Or(c.PreviewMax, 1000)
	c.PageDefault = cmp.Or(c.PageDefault, 100)
	c.BulkPage = cmp.Or(c.BulkPage, maxBulkPage)
	c.IdempotencyWait = cmp.Or(c.IdempotencyWait, 5*time.Second)
	c.QuotaCountTTL = cmp.Or(c.QuotaCountTTL, 5*time.Second)
	c.TenantWeight = cmp.Or(c.TenantWeight, 1)
	c.TenantQuotas = guard.TenantQuotaDefaults(c.TenantQuotas, c.MaxEventCount)
	c.CatchUpLimit = cmp.Or(c.CatchUpLimit, time.Hour)
	c.MaxBatchItems = cmp.Or(c.MaxBatchItems, DefaultMaxBatchItems)
	c.BatchBodyWait = cmp.Or(c.BatchBodyWait, 10*time.Second)
	c.MaxBatchBodyBytes = cmp.Or(c.MaxBatchBodyBytes, max(DefaultMaxBatchBodyBytes, c.MaxBodyBytes))
	c.BatchBodyBudget = cmp.Or(c.BatchBodyBudget, 2*c.MaxBatchBodyBytes)
	c.WrongTokens.Max = cmp.Or(c.WrongTokens.Max, 60)
	c.WrongTokens.Window = cmp.Or(c.WrongTokens.Window, time.Minute)
}

// validate checks c after defaults were applied; the error names the field.
func (c *Config) validate() error {
	switch {
	case c.AdminKey != "" && len(c.AdminKey) < 16:
		return fmt.Errorf("master: Config.AdminKey must be at least 16 characters")
	case c.Partitions < 1:
		return fmt.Errorf("master: Config.Partitions must be at least 1, got %d", c.Partitions)
	case c.MaxPayloadBytes < 0:
		return fmt.Errorf("master: Config.MaxPayloadBytes must not be negative")
	case c.MaxEventCount < 0:
		return fmt.Errorf("master: Config.MaxEventCount must not be negative")
	case c.MaxNameLen < 0:
		return fmt.Errorf("master: Config.MaxNameLen must not be negative")
	case c.MaxChildren < 0:
		return fmt.Errorf("master: Config.MaxChildren must not be negative")
	case c.MaxBodyBytes < int64(c.MaxPayloadBytes)+4<<10:
		return fmt.Errorf("master: Config.MaxBodyBytes (%d) must be at least MaxPayloadBytes + 4 KiB (%d)", c.MaxBodyBytes, c.MaxPayloadBytes+4<<10)
	case c.MaxWindow < 0:
		return fmt.Errorf("master: Config.MaxWindow must not be negative")
	case c.MaxTokenTimeout < 0:
		return fmt.Errorf("master: Config.MaxTokenTimeout must not be negative")
	case c.DefaultTokenTimeout < 0 || c.DefaultTokenTimeout > c.MaxTokenTimeout:
		return fmt.Errorf("master: Config.DefaultTokenTimeout must be between 0 and MaxTokenTimeout")
	case c.DefaultMaxAttempts < 0 || c.DefaultMaxAttempts > MaxAttemptsLimit:
		return fmt.Errorf("master: Config.DefaultMaxAttempts must be between 1 and %d", MaxAttemptsLimit)
	case c.RateLimit.PerSecond < 0:
		return fmt.Errorf("master: Config.RateLimit.PerSecond must not be negative")
	case c.RateLimit.PerSecond > 0 && c.RateLimit.Burst < 1:
		return fmt.Errorf("master: Config.RateLimit.Burst must be at least 1 when RateLimit.PerSecond is set")
	case c.BulkPage < 1 || c.BulkPage > maxBulkPage:
		return fmt.Errorf("master: Config.BulkPage must be between 1 and %d", maxBulkPage)
	case c.PreviewMax < 1 || c.PreviewMax > 1000:
		return fmt.Errorf("master: Config.PreviewMax must be between 1 and 1000")
	case c.PreviewDefault < 1 || c.PreviewDefault > c.PreviewMax:
		return fmt.Errorf("master: Config.PreviewDefault must be between 1 and PreviewMax")
	case c.PageDefault < 1 || c.PageDefault > 1000:
		return fmt.Errorf("master: Config.PageDefault must be between 1 and 1000")
	case c.WrongTokens.Window < 0:
		return fmt.Errorf("master: Config.WrongTokens.Window must not be negative")
	case c.MaxBatchItems < 1:
		return fmt.Errorf("master: Config.MaxBatchItems must be at least 1")
	case c.MaxBatchBodyBytes < c.MaxBodyBytes:
		return fmt.Errorf("master: Config.MaxBatchBodyBytes (%d) must be at least MaxBodyBytes (%d)", c.MaxBatchBodyBytes, c.MaxBodyBytes)
	case c.BatchBodyBudget < c.MaxBatchBodyBytes:
		return fmt.Errorf("master: Config.BatchBodyBudget (%d) must be at least MaxBatchBodyBytes (%d)", c.BatchBodyBudget, c.MaxBatchBodyBytes)
	case c.IdempotencyWait < 0:
		return fmt.Errorf("master: Config.IdempotencyWait must not be negative")
	case c.TenantWeight < 1 || c.TenantWeight > MaxTenantWeight:
		return fmt.Errorf("master: Config.TenantWeight must be between 1 and %d", MaxTenantWeight)
	case c.TenantQuotas.MaxSchedules < 1, c.TenantQuotas.MaxEventsPerMinute < 1, c.TenantQuotas.MaxEventsStored < 1:
		return fmt.Errorf("master: Config.TenantQuotas must be positive, got %+v", c.TenantQuotas)
	case c.TenantQuotas.MaxEventsPerFire < 1 || c.TenantQuotas.MaxEventsPerFire > c.MaxEventCount:
		return fmt.Errorf("master: Config.TenantQuotas.MaxEventsPerFire must be between 1 and MaxEventCount (%d), got %d", c.MaxEventCount, c.TenantQuotas.MaxEventsPerFire)
	case c.CatchUpLimit < 0:
		return fmt.Errorf("master: Config.CatchUpLimit must not be negative")
	}
	for i, p := range c.TargetAllowCIDRs {
		if !p.IsValid() {
			return fmt.Errorf("master: Config.TargetAllowCIDRs[%d]: invalid prefix", i)
		}
	}
	for i, p := range c.TargetDenyCIDRs {
		if !p.IsValid() {
			return fmt.Errorf("master: Config.TargetDenyCIDRs[%d]: invalid prefix", i)
		}
	}
	return nil
}
