package app

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/internal/guard"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/mongo"
)

func itoa(n int) string { return strconv.Itoa(n) }

// Config is everything schedulerd can be told at start-up. Each field has a
// flag and a SCHEDULER_* environment variable (see Options); flags win.
type Config struct {
	ListenAddr      string
	PublicURL       string
	AdvertiseURL    string
	Store           string // "embedded" or "mongo"
	DataDir         string
	MongoURI        string
	MongoDatabase   string
	AdminKey        string
	SigningSecret   string // comma-separated: the current one, then those rotated out (SigningSecrets)
	SQSRegion       string
	SQSEndpoint     string
	Partitions      int
	Shards          int
	Window          time.Duration
	Lead            time.Duration
	CatchUpLimit    time.Duration
	BackgroundAbove int
	BackgroundChunk int
	LeaseTTL        time.Duration
	Retention       time.Duration
	HTTPTimeout     time.Duration
	// HTTPBatchMaxEvents and HTTPBatchMaxBytes bound one request to an
	// http_batch target (httpdelivery.Config's BatchMaxEvents and
	// BatchMaxBytes).
	HTTPBatchMaxEvents int
	HTTPBatchMaxBytes  int
	// EarlyDispatch is auto (on with the embedded store, off with MongoDB), on
	// or off.
	EarlyDispatch string
	// OutcomeLinger and LaunchGap are handler.Config's; 0 turns each off.
	OutcomeLinger time.Duration
	LaunchGap     time.Duration
	// MaxHeld is handler.Config.MaxScheduled: the claimed events held in
	// memory.
	MaxHeld        int
	HTTPAllowCIDRs []netip.Prefix
	HTTPDenyCIDRs  []netip.Prefix
	RateLimit      float64
	// Defaults of every tenant that does not set its own (PATCH /v1/tenants/{id}).
	TenantWeight             int
	TenantMaxSchedules       int
	TenantMaxEventsPerFire   int
	TenantMaxEventsPerMinute int
	TenantMaxEventsStored    int
	// Disk guard of the embedded store's data directory.
	DiskMinFreeBytes   int64
	DiskMinFreePercent float64
	// Disk space the embedded store keeps allocated for writes on a full
	// disk (0: none).
	StoreReserveBytes int64
	RateBurst         int
	ShutdownTimeout   time.Duration
	// The API server's connection timeouts and caps (see Start).
	ServerIdleTimeout       time.Duration
	ServerReadHeaderTimeout time.Duration
	ServerWriteTimeout      time.Duration
	ServerMaxConns          int
	ServerMaxConnsPerClient int
	InstanceID              string
	LogLevel                string
	LogFormat               string // "json" (default) or "console"
	// GCPercent and MemoryLimitPercent are the Go runtime's memory
	// settings; see ApplyMemorySettings.
	GCPercent          int
	MemoryLimitPercent int

	// MongoDB client settings (store=mongo); see mongo.Options.
	MongoAllowWeakWriteConcern  bool
	MongoServerSelectionTimeout time.Duration
	MongoOperationTimeout       time.Duration
	// IdempotencyRetention is how long the master's idempotency records
	// are kept.
	IdempotencyRetention time.Duration
	// AuditRetention is how long the audit records of mutating calls are
	// kept.
	AuditRetention time.Duration
	// CompletedRetention is how long completed schedules are kept; zero
	// (unset) means Retention.
	CompletedRetention time.Duration
	// FinishInterval is how often the finisher looks for watched fires
	// that finished (notifications, dependent schedules).
	FinishInterval time.Duration
}

// Option describes one setting: its flag, its environment variable, its
// default and what it means. The README's configuration table and the
// docker-compose test are built from this list.
type Option struct {
	Flag    string
	Env     string
	Default string
	Usage   string
	set     func(c *Config, v string) error
}

func str(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *p(c) = v; return nil }
}

func dur(name string, p func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("%s: %q is not a duration such as 30s or 2m", name, v)
		}
		*p(c) = d
		return nil
	}
}

// autoDur is dur that also takes "auto", which leaves the duration 0 for
// setDefaults to choose.
func autoDur(name string, p func(*Config) *time.Duration) func(*Config, string) error {
	parse := dur(name, p)
	return func(c *Config, v string) error {
		if v == "auto" {
			*p(c) = 0
			return nil
		}
		return parse(c, v)
	}
}

func boolean(name string, p func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: %q is not true or false", name, v)
		}
		*p(c) = b
		return nil
	}
}

func num(name string, p func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", name, v)
		}
		*p(c) = n
		return nil
	}
}

func cidrs(name string, p func(*Config) *[]netip.Prefix) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []netip.Prefix
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				return fmt.Errorf("%s: %q is not a CIDR such as 10.0.0.0/8", name, s)
			}
			out = append(out, pfx)
		}
		*p(c) = out
		return nil
	}
}

// Options lists every setting.
func Options() []Option {
	dq := guard.DefaultTenantQuotas()
	return []Option{
		{"listen", "SCHEDULER_LISTEN_ADDR", "127.0.0.1:8080", "address the REST API listens on (use :8080 in containers)", str(func(c *Config) *string { return &c.ListenAddr })},
		{"public-url", "SCHEDULER_PUBLIC_URL", "", "base URL consumers use for release calls (default: http://<bound listen address>)", str(func(c *Config) *string { return &c.PublicURL })},
		{"advertise-url", "SCHEDULER_ADVERTISE_URL", "", "store=mongo: base URL the other instances reach this one's API at, to forward releases and extends to the instance that owns the event's policy (default: http://<bound listen address>, with the host name if it listens on all addresses)", str(func(c *Config) *string { return &c.AdvertiseURL })},
		{"store", "SCHEDULER_STORE", "embedded", "storage driver: embedded (one process, data directory) or mongo", str(func(c *Config) *string { return &c.Store })},
		{"data-dir", "SCHEDULER_DATA_DIR", "./data", "data directory of the embedded store (also keeps generated secrets)", str(func(c *Config) *string { return &c.DataDir })},
		{"mongo-uri", "SCHEDULER_MONGO_URI", "", "MongoDB connection string (store=mongo)", str(func(c *Config) *string { return &c.MongoURI })},
		{"mongo-database", "SCHEDULER_MONGO_DATABASE", "", "MongoDB database name (store=mongo; default: the database in the URI path, else schedulerd)", str(func(c *Config) *string { return &c.MongoDatabase })},
		{"mongo-allow-weak-write-concern", "SCHEDULER_MONGO_ALLOW_WEAK_WRITE_CONCERN", "false", "store=mongo: accept a write concern in the URI weaker than w=majority (w=0, w=1, journal=false), which a failover can roll back; refused at start otherwise", boolean("mongo-allow-weak-write-concern", func(c *Config) *bool { return &c.MongoAllowWeakWriteConcern })},
		{"mongo-server-selection-timeout", "SCHEDULER_MONGO_SERVER_SELECTION_TIMEOUT", "30s", "store=mongo: how long an operation waits for a usable server (keep it longer than an election)", dur("mongo-server-selection-timeout", func(c *Config) *time.Duration { return &c.MongoServerSelectionTimeout })},
		{"mongo-operation-timeout", "SCHEDULER_MONGO_OPERATION_TIMEOUT", "60s", "store=mongo: bound of one store operation, its retries included, unless its caller's is earlier", dur("mongo-operation-timeout", func(c *Config) *time.Duration { return &c.MongoOperationTimeout })},
		{"admin-key", "SCHEDULER_ADMIN_KEY", "", "admin API key; embedded store: generated into <data-dir>/admin.key when empty; mongo: required", str(func(c *Config) *string { return &c.AdminKey })},
		{"signing-secret", "SCHEDULER_SIGNING_SECRET", "", "HMAC secret for delivery signatures; a comma-separated list while rotating (new first: requests carry a signature per secret); embedded: generated into <data-dir>/signing.secret when empty; mongo: required", str(func(c *Config) *string { return &c.SigningSecret })},
		{"sqs-region", "SCHEDULER_SQS_REGION", "us-east-1", "AWS region for SQS delivery", str(func(c *Config) *string { return &c.SQSRegion })},
		{"sqs-endpoint", "SCHEDULER_SQS_ENDPOINT", "", "SQS endpoint override for local stacks (empty: AWS)", str(func(c *Config) *string { return &c.SQSEndpoint })},
		{"partitions", "SCHEDULER_PARTITIONS", "16", "emitter partitions P (fixed for the life of the data)", num("partitions", func(c *Config) *int { return &c.Partitions })},
		{"shards", "SCHEDULER_SHARDS", "16", "event queue shards K", num("shards", func(c *Config) *int { return &c.Shards })},
		{"window", "SCHEDULER_WINDOW", "1m", "emitter scan window length", dur("window", func(c *Config) *time.Duration { return &c.Window })},
		{"lead", "SCHEDULER_LEAD", "2m", "how far ahead of time the emitter creates events", dur("lead", func(c *Config) *time.Duration { return &c.Lead })},
		{"catch-up-limit", "SCHEDULER_CATCHUP_LIMIT", "1h", "missed fires older than this are not fired after downtime", dur("catch-up-limit", func(c *Config) *time.Duration { return &c.CatchUpLimit })},
		{"emit-background-above", "SCHEDULER_EMIT_BACKGROUND_ABOVE", "10000", "fires with more events than this are answered at once and written in the background", num("emit-background-above", func(c *Config) *int { return &c.BackgroundAbove })},
		{"emit-background-chunk", "SCHEDULER_EMIT_BACKGROUND_CHUNK", "5000", "events per store write of a fire written in the background; its progress is recorded after each (1-100000)", num("emit-background-chunk", func(c *Config) *int { return &c.BackgroundChunk })},
		{"finish-interval", "SCHEDULER_FINISH_INTERVAL", "2s", "how often each instance looks for finished fires that notifications or dependent schedules wait for", dur("finish-interval", func(c *Config) *time.Duration { return &c.FinishInterval })},
		{"lease-ttl", "SCHEDULER_LEASE_TTL", "auto", "lease lifetime; a dead instance's work moves after this: auto is 15s with the embedded store and 30s with mongo, where leases must outlast a replica-set election", autoDur("lease-ttl", func(c *Config) *time.Duration { return &c.LeaseTTL })},
		{"retention", "SCHEDULER_RETENTION", "24h", "how long released and cancelled events are kept", dur("retention", func(c *Config) *time.Duration { return &c.Retention })},
		{"completed-retention", "SCHEDULER_COMPLETED_RETENTION", "", "how long completed schedules (one-offs that fired, cron schedules past endAt, once their events finished) are kept before they are deleted with their fires (empty: -retention)", func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			return dur("completed-retention", func(c *Config) *time.Duration { return &c.CompletedRetention })(c, v)
		}},
		{"idempotency-retention", "SCHEDULER_IDEMPOTENCY_RETENTION", "24h", "how long the answers to creates with an Idempotency-Key are kept for replay", dur("idempotency-retention", func(c *Config) *time.Duration { return &c.IdempotencyRetention })},
		{"audit-retention", "SCHEDULER_AUDIT_RETENTION", "2160h", "how long the audit records of mutating API calls (GET /v1/audit, a schedule's versions) are kept (90 days)", dur("audit-retention", func(c *Config) *time.Duration { return &c.AuditRetention })},
		{"http-timeout", "SCHEDULER_HTTP_TIMEOUT", "10s", "timeout of one HTTP delivery", dur("http-timeout", func(c *Config) *time.Duration { return &c.HTTPTimeout })},
		{"http-batch-max-events", "SCHEDULER_HTTP_BATCH_MAX_EVENTS", "500", "most events in one request to an http_batch target (1-10000; the handler sends at most 500 at once to one host)", num("http-batch-max-events", func(c *Config) *int { return &c.HTTPBatchMaxEvents })},
		{"http-batch-max-bytes", "SCHEDULER_HTTP_BATCH_MAX_BYTES", "1048576", "most bytes of one request body to an http_batch target (1024-67108864); a larger message goes alone", num("http-batch-max-bytes", func(c *Config) *int { return &c.HTTPBatchMaxBytes })},
		{"early-dispatch", "SCHEDULER_EARLY_DISPATCH", "auto", "send the event a release hands its token to before the commit recording both: auto (on with the embedded store, off with MongoDB), on or off; on with MongoDB raises the throttled rate across instances, and a crash before that commit sends such events again (more duplicates)", str(func(c *Config) *string { return &c.EarlyDispatch })},
		{"outcome-linger", "SCHEDULER_OUTCOME_LINGER", "100ms", "how long the outcome of an unthrottled delivery may wait to share its store write with later ones (0-1s; 0: written at once); after a crash the events delivered in the last linger (ten lingers while a burst waits to be sent) are delivered again", dur("outcome-linger", func(c *Config) *time.Duration { return &c.OutcomeLinger })},
		{"launch-gap", "SCHEDULER_LAUNCH_GAP", "4ms", "least time between two wakes of the handler's timer for events not yet due: those due within it go together, at most this late, never early (0-100ms; 0: a wake per launch instant)", dur("launch-gap", func(c *Config) *time.Duration { return &c.LaunchGap })},
		{"max-held-events", "SCHEDULER_MAX_HELD_EVENTS", itoa(handler.DefaultMaxScheduled), "most claimed events held in memory (10-10000000): the timer heap, the throttle's waiting queues, the delivery queues, deliveries and outcomes not yet written; the rest of a large fire stays in the store and is claimed, in launch order, as delivery makes room", num("max-held-events", func(c *Config) *int { return &c.MaxHeld })},
		{"http-allow-cidrs", "SCHEDULER_HTTP_ALLOW_CIDRS", "", "comma-separated CIDRs HTTP targets may resolve to even inside denied ranges (the most specific prefix wins); also applied on save to targets whose host is an address literal", cidrs("http-allow-cidrs", func(c *Config) *[]netip.Prefix { return &c.HTTPAllowCIDRs })},
		{"http-deny-cidrs", "SCHEDULER_HTTP_DENY_CIDRS", "", "comma-separated CIDRs HTTP targets must not resolve to, besides link-local and cloud metadata addresses (denied by default); also applied on save to targets whose host is an address literal", cidrs("http-deny-cidrs", func(c *Config) *[]netip.Prefix { return &c.HTTPDenyCIDRs })},
		{"rate-limit", "SCHEDULER_RATE_LIMIT", "0", "API requests per second per tenant (0: unlimited)", func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				return fmt.Errorf("rate-limit: %q is not a non-negative number", v)
			}
			c.RateLimit = f
			return nil
		}},
		{"rate-burst", "SCHEDULER_RATE_BURST", "50", "API request burst per tenant", num("rate-burst", func(c *Config) *int { return &c.RateBurst })},
		{"tenant-weight", "SCHEDULER_TENANT_WEIGHT", "1", "share of delivery capacity of a tenant that sets no weight (1-1000)", num("tenant-weight", func(c *Config) *int { return &c.TenantWeight })},
		{"tenant-max-schedules", "SCHEDULER_TENANT_MAX_SCHEDULES", itoa(dq.MaxSchedules), "schedules per tenant, unless the tenant's quota says otherwise", num("tenant-max-schedules", func(c *Config) *int { return &c.TenantMaxSchedules })},
		{"tenant-max-events-per-fire", "SCHEDULER_TENANT_MAX_EVENTS_PER_FIRE", itoa(dq.MaxEventsPerFire), "largest eventCount of a tenant's schedule, unless the tenant's quota says otherwise", num("tenant-max-events-per-fire", func(c *Config) *int { return &c.TenantMaxEventsPerFire })},
		{"tenant-max-events-per-minute", "SCHEDULER_TENANT_MAX_EVENTS_PER_MINUTE", itoa(dq.MaxEventsPerMinute), "emission rate of a tenant, unless the tenant's quota says otherwise (the emitter defers what is over it; each instance counts its own emissions)", num("tenant-max-events-per-minute", func(c *Config) *int { return &c.TenantMaxEventsPerMinute })},
		{"tenant-max-events-stored", "SCHEDULER_TENANT_MAX_EVENTS_STORED", itoa(dq.MaxEventsStored), "events a tenant may have stored (waiting, in flight, retained), unless the tenant's quota says otherwise", num("tenant-max-events-stored", func(c *Config) *int { return &c.TenantMaxEventsStored })},
		{"disk-min-free-bytes", "SCHEDULER_DISK_MIN_FREE_BYTES", itoa(guard.DefaultDiskMinFreeBytes), "embedded store: refuse new schedules and triggers (507) when the data directory's disk has less free space than the smaller of this and -disk-min-free-percent", func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return fmt.Errorf("disk-min-free-bytes: %q is not a positive whole number", v)
			}
			c.DiskMinFreeBytes = n
			return nil
		}},
		{"disk-min-free-percent", "SCHEDULER_DISK_MIN_FREE_PERCENT", itoa(guard.DefaultDiskMinFreePercent), "embedded store: the disk guard's threshold as a percentage of the disk's size (see -disk-min-free-bytes)", func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 || f > 100 {
				return fmt.Errorf("disk-min-free-percent: %q is not a number above 0 and at most 100", v)
			}
			c.DiskMinFreePercent = f
			return nil
		}},
		{"store-reserve-bytes", "SCHEDULER_STORE_RESERVE_BYTES", itoa(embedded.DefaultReserveBytes), "embedded store: disk space its file keeps allocated past its data, so that deliveries and releases go on when the disk is full (0: none; Linux)", func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("store-reserve-bytes: %q is not a whole number of bytes", v)
			}
			c.StoreReserveBytes = n
			return nil
		}},
		{"shutdown-timeout", "SCHEDULER_SHUTDOWN_TIMEOUT", "30s", "how long a graceful shutdown may take; a component still stopping then is logged and the process exits non-zero", dur("shutdown-timeout", func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
		{"server-idle-timeout", "SCHEDULER_SERVER_IDLE_TIMEOUT", "60s", "API connections idle between requests this long are closed", dur("server-idle-timeout", func(c *Config) *time.Duration { return &c.ServerIdleTimeout })},
		{"server-read-header-timeout", "SCHEDULER_SERVER_READ_HEADER_TIMEOUT", "10s", "time a client has to send a request's headers", dur("server-read-header-timeout", func(c *Config) *time.Duration { return &c.ServerReadHeaderTimeout })},
		{"server-write-timeout", "SCHEDULER_SERVER_WRITE_TIMEOUT", "2m", "most time from the end of a request's headers to the end of its response", dur("server-write-timeout", func(c *Config) *time.Duration { return &c.ServerWriteTimeout })},
		{"server-max-conns", "SCHEDULER_SERVER_MAX_CONNS", "0", "most API connections open at once (0: half the open-file limit); over it the oldest idle connection is closed, or the new one if none is idle", num("server-max-conns", func(c *Config) *int { return &c.ServerMaxConns })},
		{"server-max-conns-per-client", "SCHEDULER_SERVER_MAX_CONNS_PER_CLIENT", "256", "most API connections from one client IP address, kept as -server-max-conns (0: no cap; raise it behind a proxy that shares one address)", num("server-max-conns-per-client", func(c *Config) *int { return &c.ServerMaxConnsPerClient })},
		{"instance-id", "SCHEDULER_INSTANCE_ID", "", "unique name of this instance (default: local with the embedded store, hostname-pid with mongo)", str(func(c *Config) *string { return &c.InstanceID })},
		{"log-level", "SCHEDULER_LOG_LEVEL", "info", "debug, info, warn or error", str(func(c *Config) *string { return &c.LogLevel })},
		{"log-format", "SCHEDULER_LOG_FORMAT", "json", "json or console", str(func(c *Config) *string { return &c.LogFormat })},
		{"gc-percent", "SCHEDULER_GC_PERCENT", itoa(DefaultGCPercent), "heap growth in percent that starts a garbage collection, as GOGC (25-10000; GOGC in the environment wins): the heap may reach (1 + this/100) times its live size, within the memory limit", num("gc-percent", func(c *Config) *int { return &c.GCPercent })},
		{"memory-limit-percent", "SCHEDULER_MEMORY_LIMIT_PERCENT", itoa(DefaultMemoryLimitPercent), "soft memory limit of the Go runtime, as GOMEMLIMIT, in percent of the memory limit of the process's cgroup (a container's or systemd's), else of the machine's memory (0-100; 0: none; GOMEMLIMIT in the environment wins)", num("memory-limit-percent", func(c *Config) *int { return &c.MemoryLimitPercent })},
	}
}

// EnvVars returns the names of every environment variable schedulerd reads.
func EnvVars() []string {
	var out []string
	for _, o := range Options() {
		out = append(out, o.Env)
	}
	sort.Strings(out)
	return out
}

// ParseConfig reads defaults, then the environment (getenv), then args.
// Errors name the flag.
func ParseConfig(args []string, getenv func(string) string) (Config, error) {
	var c Config
	opts := Options()
	values := map[string]string{}
	for _, o := range opts {
		values[o.Flag] = o.Default
		if v := getenv(o.Env); v != "" {
			values[o.Flag] = v
		}
	}
	fs := flag.NewFlagSet("schedulerd", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	for _, o := range opts {
		usage := o.Usage + " (env " + o.Env + ", default " + strconv.Quote(o.Default) + ")"
		record := func(v string) error {
			values[o.Flag] = v
			return nil
		}
		// A setting whose default is a boolean is a boolean flag: given
		// alone, it means true.
		if _, err := strconv.ParseBool(o.Default); err == nil && o.Default != "0" && o.Default != "1" {
			fs.BoolFunc(o.Flag, usage, record)
			continue
		}
		fs.Func(o.Flag, usage, record)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, o := range opts {
		if err := o.set(&c, values[o.Flag]); err != nil {
			return c, err
		}
	}
	c.setDefaults()
	return c, c.validate()
}

// setDefaults fills in what depends on other settings; the flag defaults
// are in Options.
func (c *Config) setDefaults() {
	// An empty PublicURL is filled in by the App from the bound address.
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	c.CompletedRetention = cmp.Or(c.CompletedRetention, c.Retention)
	if c.Store == "embedded" {
		// One process owns an embedded data directory, so a stable name lets
		// a restarted instance take its leases back at once.
		c.InstanceID = cmp.Or(c.InstanceID, "local")
	}
	if c.LeaseTTL == 0 {
		// A MongoDB election takes up to about 12 s (electionTimeoutMillis
		// 10 s, then the vote), during which no lease is renewed: 15 s
		// would move every partition and shard after a slow one.
		c.LeaseTTL = 15 * time.Second
		if c.Store == "mongo" {
			c.LeaseTTL = 30 * time.Second
		}
	}
	if c.InstanceID == "" {
		h, _ := os.Hostname()
		c.InstanceID = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
}

// SigningSecrets splits a -signing-secret value: the current secret, then
// the previous ones. Delivery signs with each; idempotency records sealed
// with any of them still open, and new ones are sealed with the first.
func SigningSecrets(v string) ([][]byte, error) {
	var secrets [][]byte
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, errors.New("signing-secret: an empty secret in the comma-separated list")
		}
		secrets = append(secrets, []byte(part))
	}
	return secrets, nil
}

// validate checks c after setDefaults; the error names the flag.
func (c *Config) validate() error {
	switch c.Store {
	case "embedded":
		if c.DataDir == "" {
			return errors.New("data-dir: must be set for store=embedded")
		}
	case "mongo":
		if c.MongoURI == "" {
			return errors.New("mongo-uri: must be set for store=mongo")
		}
		if c.AdminKey == "" {
			return errors.New("admin-key: must be set for store=mongo (instances must share it)")
		}
		if c.SigningSecret == "" {
			return errors.New("signing-secret: must be set for store=mongo (instances must share it)")
		}
	default:
		return fmt.Errorf("store: %q is not embedded or mongo", c.Store)
	}
	if c.SigningSecret != "" {
		if _, err := SigningSecrets(c.SigningSecret); err != nil {
			return err
		}
	}
	if c.Partitions < 1 || c.Partitions > 4096 {
		return fmt.Errorf("partitions: %d is out of range 1-4096", c.Partitions)
	}
	if c.Shards < 1 || c.Shards > 4096 {
		return fmt.Errorf("shards: %d is out of range 1-4096", c.Shards)
	}
	if c.Window < time.Second {
		return fmt.Errorf("window: %s is below 1s", c.Window)
	}
	if c.Lead < c.Window {
		return fmt.Errorf("lead: %s must be at least the window (%s)", c.Lead, c.Window)
	}
	if c.BackgroundAbove < 1 {
		return fmt.Errorf("emit-background-above: %d is below 1", c.BackgroundAbove)
	}
	if c.BackgroundChunk < 1 || c.BackgroundChunk > 100000 {
		return fmt.Errorf("emit-background-chunk: %d is out of range 1-100000", c.BackgroundChunk)
	}
	if c.LeaseTTL < time.Second {
		return fmt.Errorf("lease-ttl: %s is below 1s", c.LeaseTTL)
	}
	if c.TenantWeight < 1 || c.TenantWeight > master.MaxTenantWeight {
		return fmt.Errorf("tenant-weight: %d is out of range 1-%d", c.TenantWeight, master.MaxTenantWeight)
	}
	for _, q := range []struct {
		flag string
		v    int
	}{
		{"tenant-max-schedules", c.TenantMaxSchedules}, {"tenant-max-events-per-fire", c.TenantMaxEventsPerFire},
		{"tenant-max-events-per-minute", c.TenantMaxEventsPerMinute}, {"tenant-max-events-stored", c.TenantMaxEventsStored},
	} {
		if q.v < 1 {
			return fmt.Errorf("%s: %d must be at least 1", q.flag, q.v)
		}
	}
	if c.TenantMaxEventsPerFire > master.DefaultMaxEventCount {
		return fmt.Errorf("tenant-max-events-per-fire: %d is above the eventCount limit %d", c.TenantMaxEventsPerFire, master.DefaultMaxEventCount)
	}
	if c.HTTPTimeout <= 0 {
		return errors.New("http-timeout: must be positive")
	}
	if c.HTTPBatchMaxEvents < 1 || c.HTTPBatchMaxEvents > 10000 {
		return fmt.Errorf("http-batch-max-events: %d is out of range 1-10000", c.HTTPBatchMaxEvents)
	}
	if c.HTTPBatchMaxBytes < 1024 || c.HTTPBatchMaxBytes > 64<<20 {
		return fmt.Errorf("http-batch-max-bytes: %d is out of range 1024-67108864", c.HTTPBatchMaxBytes)
	}
	switch c.EarlyDispatch {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("early-dispatch: %q is not auto, on or off", c.EarlyDispatch)
	}
	if c.OutcomeLinger < 0 || c.OutcomeLinger > time.Second {
		return fmt.Errorf("outcome-linger: %s is out of range 0-1s", c.OutcomeLinger)
	}
	if c.MaxHeld < 10 || c.MaxHeld > 10_000_000 {
		return fmt.Errorf("max-held-events: %d is out of range 10-10000000", c.MaxHeld)
	}
	if c.LaunchGap < 0 || c.LaunchGap > 100*time.Millisecond {
		return fmt.Errorf("launch-gap: %s is out of range 0-100ms", c.LaunchGap)
	}
	for _, r := range []struct {
		flag string
		v    time.Duration
	}{{"retention", c.Retention}, {"idempotency-retention", c.IdempotencyRetention}, {"completed-retention", c.CompletedRetention}, {"audit-retention", c.AuditRetention}} {
		// The bounds of a TTL index's expireAfterSeconds (store=mongo),
		// for every store alike.
		if r.v < time.Second || r.v > mongo.MaxRetention {
			return fmt.Errorf("%s: %s is out of range 1s-%s", r.flag, r.v, mongo.MaxRetention)
		}
	}
	if c.MongoServerSelectionTimeout <= 0 {
		return errors.New("mongo-server-selection-timeout: must be positive")
	}
	if c.MongoOperationTimeout <= 0 {
		return errors.New("mongo-operation-timeout: must be positive")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"server-idle-timeout", c.ServerIdleTimeout}, {"server-read-header-timeout", c.ServerReadHeaderTimeout}, {"server-write-timeout", c.ServerWriteTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("%s: must be positive", d.flag)
		}
	}
	if c.ServerMaxConns < 0 {
		return fmt.Errorf("server-max-conns: %d is negative", c.ServerMaxConns)
	}
	if c.ServerMaxConnsPerClient < 0 {
		return fmt.Errorf("server-max-conns-per-client: %d is negative", c.ServerMaxConnsPerClient)
	}
	if c.GCPercent < 25 || c.GCPercent > 10000 {
		return fmt.Errorf("gc-percent: %d is out of range 25-10000", c.GCPercent)
	}
	if c.MemoryLimitPercent < 0 || c.MemoryLimitPercent > 100 {
		return fmt.Errorf("memory-limit-percent: %d is out of range 0-100", c.MemoryLimitPercent)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log-level: %q is not debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		return fmt.Errorf("log-format: %q is not json or console", c.LogFormat)
	}
	return nil
}
