// Command schedbench measures a schedulerd deployment end to end: it creates
// a tenant, policies and one-off schedules whose fires are spread over a
// period, receives every delivery on its own recording HTTP consumer (which
// verifies signatures, holds each throttled event's token for a configurable
// latency and then releases it, and can fail a fraction of deliveries), and
// prints throughput, lateness percentiles, duplicates, losses and the most
// tokens held per policy against the policy's bound.
//
// Against a running deployment:
//
//	schedbench -target http://127.0.0.1:8080 -admin-key KEY -signing-secret SECRET
//
// In process (app.New with the embedded store in a temporary directory):
//
//	schedbench -inprocess -schedules 100 -events-per-fire 100 -policies 4 -max-in-flight 50
//
// Lateness is the receipt time at the consumer minus the event's launch time
// (its fire time: schedbench never spreads a fire's events), so for
// throttled events it includes the wait for a token.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	mrand "math/rand/v2"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

type options struct {
	target        string
	adminKey      string
	signingSecret string
	inprocess     bool
	dataDir       string
	consumerURL   string

	schedules       int
	eventsPerFire   int
	policies        int
	maxInFlight     int
	throttled       float64
	autoRelease     bool
	releaseAll      bool
	consumerLatency time.Duration
	failureRate     float64
	maxAttempts     int
	tokenTimeout    time.Duration
	duration        time.Duration
	window          time.Duration
	spread          bool
	lead            time.Duration
	drain           time.Duration
	seed            uint64
	shards          int
	logLevel        string
	markdown        bool
	targetType      string
	batchCreate     bool

	server     string
	serverPID  int
	scenario   string
	cpuprofile string
	oneoffs    int
	clients    int
	settle     time.Duration
	idle       time.Duration
}

// scenarios are the preset workloads of -scenario; flags given on the
// command line override them.
var scenarios = map[string]map[string]string{
	// 50,000 events spread over 60 s: one one-off of 50,000 events with a
	// window of 60 s and spread, each event at its own instant.
	"spread": {"schedules": "1", "events-per-fire": "50000", "policies": "0", "window": "60s", "spread": "true", "duration": "0s", "drain": "90s"},
	// 50,000 events in fires spread over 60 s: 1,000 one-offs of 50
	// events, about 17 fires (833 events) due at each whole second.
	"fires": {"schedules": "1000", "events-per-fire": "50", "policies": "0", "duration": "60s", "drain": "30s"},
	// 100,000 events due at one instant: 100 one-offs of 1,000 events.
	"burst": {"schedules": "100", "events-per-fire": "1000", "policies": "0", "duration": "0s", "lead": "10s", "drain": "60s"},
	// burst and spread with an http_batch target: the events due together
	// go to the consumer in few requests.
	"burst-batch":  {"schedules": "100", "events-per-fire": "1000", "policies": "0", "duration": "0s", "lead": "10s", "drain": "60s", "target-type": "http_batch"},
	"spread-batch": {"schedules": "1", "events-per-fire": "50000", "policies": "0", "window": "60s", "spread": "true", "duration": "0s", "drain": "90s", "target-type": "http_batch"},
	// 1,000,000 one-offs due within a day, created through the batch API.
	"oneoffs": {"oneoffs": "1000000"},
	// One fire of 100,000 (1,000,000) events due at one instant, and the
	// same throttled by one policy of maxInFlight 100 that releases on
	// delivery (autoRelease): memory stays flat whatever the fire's size.
	"fire100k":           {"schedules": "1", "events-per-fire": "100000", "policies": "0", "duration": "0s", "lead": "15s", "drain": "120s"},
	"fire1m":             {"schedules": "1", "events-per-fire": "1000000", "policies": "0", "duration": "0s", "lead": "40s", "drain": "600s"},
	"fire100k-throttled": {"schedules": "1", "events-per-fire": "100000", "policies": "1", "max-in-flight": "100", "throttled": "1", "auto-release": "true", "duration": "0s", "lead": "15s", "drain": "300s"},
	"fire1m-throttled":   {"schedules": "1", "events-per-fire": "1000000", "policies": "1", "max-in-flight": "100", "throttled": "1", "auto-release": "true", "duration": "0s", "lead": "40s", "drain": "1200s"},
	// 100,000 (1,000,000) one-offs due at one instant, created through
	// the batch API, each delivered in a request of its own.
	"oneoffs-burst":    {"schedules": "100000", "events-per-fire": "1", "policies": "0", "duration": "0s", "lead": "20s", "drain": "120s", "batch-create": "true"},
	"oneoffs-burst-1m": {"schedules": "1000000", "events-per-fire": "1", "policies": "0", "duration": "0s", "lead": "100s", "drain": "900s", "batch-create": "true"},
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("schedbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.target, "target", "", "base URL of a running deployment (needs -admin-key and -signing-secret)")
	fs.StringVar(&o.adminKey, "admin-key", os.Getenv("SCHEDULER_ADMIN_KEY"), "admin API key of the deployment (env SCHEDULER_ADMIN_KEY)")
	fs.StringVar(&o.signingSecret, "signing-secret", os.Getenv("SCHEDULER_SIGNING_SECRET"), "signing secret of the deployment, to verify deliveries (env SCHEDULER_SIGNING_SECRET)")
	fs.BoolVar(&o.inprocess, "inprocess", false, "start schedulerd in this process with the embedded store in a temporary directory")
	fs.StringVar(&o.dataDir, "data-dir", "", "with -inprocess: data directory (default: a new temporary directory, removed afterwards)")
	fs.StringVar(&o.consumerURL, "consumer-url", "", "URL the deployment should deliver to, if not the consumer's own 127.0.0.1 address (e.g. from a container)")
	fs.IntVar(&o.schedules, "schedules", 20, "number of one-off schedules (one fire each)")
	fs.IntVar(&o.eventsPerFire, "events-per-fire", 50, "events per fire (eventCount n)")
	fs.IntVar(&o.policies, "policies", 2, "number of throttling policies (0: none)")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 20, "maxInFlight of each policy")
	fs.Float64Var(&o.throttled, "throttled", 0.5, "fraction of the schedules that name a policy (round robin over the policies)")
	fs.BoolVar(&o.autoRelease, "auto-release", false, "policies release tokens on delivery (no release call needed)")
	fs.BoolVar(&o.releaseAll, "release-all", false, "the consumer releases every delivery, also those that hold no token (no policy, or autoRelease), which need no release call")
	fs.DurationVar(&o.consumerLatency, "consumer-latency", 20*time.Millisecond, "how long the consumer holds an event before releasing it (x0.5-1.5 at random)")
	fs.Float64Var(&o.failureRate, "failure-rate", 0, "fraction of delivery attempts the consumer answers with 500")
	fs.IntVar(&o.maxAttempts, "max-attempts", 5, "maxAttempts of every schedule")
	fs.DurationVar(&o.tokenTimeout, "token-timeout", 5*time.Minute, "tokenTimeout of every policy")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "the fires are spread evenly over this period")
	fs.DurationVar(&o.window, "window", 0, "window of every schedule (0: none)")
	fs.BoolVar(&o.spread, "spread", false, "spread each fire's events evenly over -window (lateness is then measured from each event's own launch time)")
	fs.DurationVar(&o.lead, "lead", 5*time.Second, "the first fire is this long after the setup ends")
	fs.DurationVar(&o.drain, "drain", 2*time.Minute, "how long to wait after the last fire for the last deliveries")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the consumer's random latency and failures")
	fs.IntVar(&o.shards, "shards", 16, "with -inprocess: event queue shards and emitter partitions")
	fs.StringVar(&o.logLevel, "log-level", "warn", "with -inprocess: schedulerd log level")
	fs.BoolVar(&o.markdown, "markdown", false, "also print the result as a Markdown table row")
	fs.BoolVar(&o.batchCreate, "batch-create", false, "create the schedules through POST /v1/schedules/batch, 1,000 a request (the tenant's quotas raised to fit)")
	fs.StringVar(&o.targetType, "target-type", "http", "target type of every schedule: http (a request per event) or http_batch (the events due together in one request)")
	fs.StringVar(&o.server, "server", "", "start this schedulerd binary (embedded store, new data directory) and measure its CPU time apart from schedbench's")
	fs.IntVar(&o.serverPID, "server-pid", 0, "with -target: process id of the schedulerd to measure the CPU time of (read from /proc)")
	fs.StringVar(&o.scenario, "scenario", "", "preset workload: spread (50,000 events over 60 s), burst (100,000 at one instant), burst-batch and spread-batch (the same with -target-type http_batch), oneoffs (1,000,000 one-offs due within a day), fire100k, fire1m and their -throttled (one fire due at one instant; maxInFlight 100, autoRelease), oneoffs-burst and oneoffs-burst-1m (one-offs due at one instant, batch creates); other flags override it")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process to the file (with -inprocess: the server's and the consumer's)")
	fs.IntVar(&o.oneoffs, "oneoffs", 0, "instead of delivering: create this many one-offs due 2-24 h later through the batch API, then measure intake time, idle CPU and the data directory")
	fs.IntVar(&o.clients, "clients", 4, "with -oneoffs: concurrent batch requests")
	fs.DurationVar(&o.settle, "settle", 10*time.Second, "with -oneoffs: wait after the intake before measuring idle CPU")
	fs.DurationVar(&o.idle, "idle", 60*time.Second, "with -oneoffs: how long idle CPU is measured")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.scenario != "" {
		preset, ok := scenarios[o.scenario]
		if !ok {
			return nil, fmt.Errorf("unknown -scenario %q (spread, fires, burst, burst-batch, spread-batch, oneoffs, fire100k, fire1m, fire100k-throttled, fire1m-throttled, oneoffs-burst or oneoffs-burst-1m)", o.scenario)
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range preset {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return nil, err
				}
			}
		}
	}
	modes := 0
	for _, on := range []bool{o.inprocess, o.target != "", o.server != ""} {
		if on {
			modes++
		}
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case modes != 1:
		return nil, errors.New("give exactly one of -target URL, -inprocess and -server BINARY")
	case o.serverPID != 0 && o.target == "":
		return nil, errors.New("-server-pid goes with -target")
	case o.targetType != "http" && o.targetType != "http_batch":
		return nil, fmt.Errorf("-target-type %q: want http or http_batch", o.targetType)
	case o.window < 0 || (o.spread && o.window == 0):
		return nil, errors.New("-window must be >= 0, and -spread needs a -window")
	case o.oneoffs < 0 || o.clients < 1:
		return nil, errors.New("-oneoffs must be >= 0 and -clients >= 1")
	case o.target != "" && (o.adminKey == "" || o.signingSecret == ""):
		return nil, errors.New("-target needs -admin-key and -signing-secret")
	case o.schedules < 1 || o.eventsPerFire < 1:
		return nil, errors.New("-schedules and -events-per-fire must be at least 1")
	case o.policies < 0 || (o.policies > 0 && o.maxInFlight < 1):
		return nil, errors.New("-policies must be >= 0 and -max-in-flight >= 1")
	case o.failureRate < 0 || o.failureRate >= 1 || o.throttled < 0 || o.throttled > 1:
		return nil, errors.New("-failure-rate must be in [0,1) and -throttled in [0,1]")
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	base := strings.TrimRight(o.target, "/")
	meter := &cpuMeter{pid: o.serverPID}
	dataDir := ""
	switch {
	case o.inprocess:
		a, cleanup, err := startInProcess(ctx, o, stderr)
		if err != nil {
			return err
		}
		defer cleanup()
		base = "http://" + a.Addr()
		o.adminKey = a.AdminKey()
		if o.dataDir != "" {
			dataDir = filepath.Join(o.dataDir, "data")
		}
	case o.server != "":
		srv, stopServer, err := startServer(ctx, o, stderr)
		if err != nil {
			return err
		}
		defer stopServer()
		base = "http://" + srv.base
		meter.pid, dataDir = srv.pid, srv.dataDir
	}
	if o.oneoffs > 0 {
		r, err := intake(ctx, o, base, meter, dataDir, stderr)
		if err != nil {
			return err
		}
		r.print(stdout)
		return nil
	}
	if o.target != "" && o.serverPID == 0 {
		meter = nil // the server's CPU time is unknown
	}
	res, err := bench(ctx, o, base, meter, stderr)
	if err != nil {
		return err
	}
	res.print(stdout, o)
	if fails := res.failures(); len(fails) > 0 {
		fmt.Fprintln(stdout)
		for _, f := range fails {
			fmt.Fprintln(stdout, f)
		}
		return fmt.Errorf("%d checks failed", len(fails))
	}
	return nil
}

func startInProcess(ctx context.Context, o *options, stderr io.Writer) (*app.App, func(), error) {
	env, removeDir, err := embeddedEnv(o)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := app.ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		return nil, nil, err
	}
	level, _ := zerolog.ParseLevel(o.logLevel)
	log := zerolog.New(stderr).Level(level).With().Timestamp().Logger()
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	if err := a.Start(context.WithoutCancel(ctx)); err != nil {
		_ = a.Shutdown(context.Background())
		return nil, nil, err
	}
	cleanup := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.Shutdown(sctx); err != nil {
			fmt.Fprintln(stderr, "schedbench: shutdown:", err)
		}
		removeDir()
	}
	return a, cleanup, nil
}

// embeddedEnv is the configuration of a schedulerd on the embedded store
// in o.dataDir (a new temporary directory when empty; removeDir removes
// only that one) listening on a free port of 127.0.0.1.
func embeddedEnv(o *options) (env map[string]string, removeDir func(), err error) {
	dir, removeDir := o.dataDir, func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "schedbench-"); err != nil {
			return nil, nil, err
		}
		removeDir = func() { _ = os.RemoveAll(dir) }
	}
	if o.signingSecret == "" {
		o.signingSecret = randomHex(24)
	}
	return map[string]string{
		"SCHEDULER_LISTEN_ADDR":    "127.0.0.1:0",
		"SCHEDULER_STORE":          "embedded",
		"SCHEDULER_DATA_DIR":       filepath.Join(dir, "data"),
		"SCHEDULER_SIGNING_SECRET": o.signingSecret,
		"SCHEDULER_LOG_LEVEL":      o.logLevel,
		"SCHEDULER_PARTITIONS":     fmt.Sprint(o.shards),
		"SCHEDULER_SHARDS":         fmt.Sprint(o.shards),
	}, removeDir, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// result is what one run measured.
type result struct {
	want                                                    expectation
	verdict                                                 verdict
	expected, delivered, duplicates, lost, dead, unfinished int
	failedAttempts                                          int
	batches                                                 int // http_batch requests received
	firstFire, lastFire, lastReceipt                        time.Time
	setup                                                   time.Duration
	lateAll, lateFree, lateThrottled                        []time.Duration
	policies                                                []string
	bounds, maxHeld                                         map[string]int
	violations                                              int
	tokenTimeouts                                           int64
	releases                                                map[string]int
	drainedOK                                               bool
	early                                                   int
	// CPU time of the server (or, in process, of the whole process) while
	// the schedules were created and from then until the last release.
	setupCPU, runCPU cpuTime
	runSelfCPU       cpuTime // schedbench's own, with -server or -server-pid
	runWall          time.Duration
	cpuMeasured      bool
	serverMeasured   bool
	peakRSS          int64 // bytes; -1 or 0 when not measured
	mem              memPeak
	runWritten       int64       // bytes written to storage after setup; -1: not measured
	commits          commitCount // the embedded store's after setup
	commitsMeasured  bool
}

func bench(ctx context.Context, o *options, base string, meter *cpuMeter, stderr io.Writer) (*result, error) {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "schedbench: "+format+"\n", a...) }
	rec := chaoskit.NewRecorder(chaoskit.RecorderConfig{
		Secret: []byte(o.signingSecret), Latency: o.consumerLatency, FailureRate: o.failureRate,
		ReleaseBases: func() []string { return []string{base} }, Seed: o.seed, ReleaseOnlyTokens: !o.releaseAll,
	})
	consumer, err := rec.Start()
	if err != nil {
		return nil, err
	}
	defer rec.Close()
	if o.consumerURL != "" {
		consumer = o.consumerURL
	}

	setupStart := time.Now()
	meter.mark("start")
	var memStop chan struct{}
	var memPeaks <-chan memPeak
	if meter != nil {
		memStop = make(chan struct{})
		memPeaks = sampleMem(meter.pid, 250*time.Millisecond, memStop)
		defer func() {
			if memStop != nil {
				close(memStop)
			}
		}()
	}
	admin := chaoskit.NewClient(o.adminKey, base)
	tenantID, key, err := admin.CreateTenant(ctx, "schedbench-"+randomHex(4))
	if err != nil {
		return nil, fmt.Errorf("create tenant: %w", err)
	}
	api := admin.WithKey(key)
	if total := o.schedules * o.eventsPerFire; total > 10_000 || o.eventsPerFire > 1000 {
		if err := admin.Do(ctx, "PATCH", "/v1/tenants/"+tenantID, map[string]any{"quotas": map[string]any{
			"maxSchedules": o.schedules + batchLimit, "maxEventsStored": 2*total + batchLimit,
			"maxEventsPerFire": o.eventsPerFire, "maxEventsPerMinute": 2*total + batchLimit,
		}}, nil); err != nil {
			return nil, fmt.Errorf("raise the tenant's quotas: %w", err)
		}
	}
	var pols []string
	for i := range o.policies {
		p, err := api.CreatePolicy(ctx, fmt.Sprintf("bench-%d", i), o.maxInFlight, o.tokenTimeout)
		if err != nil {
			return nil, fmt.Errorf("create policy: %w", err)
		}
		if o.autoRelease {
			if err := api.Do(ctx, "PATCH", "/v1/policies/"+p.ID, map[string]any{"autoRelease": true}, nil); err != nil {
				return nil, fmt.Errorf("policy autoRelease: %w", err)
			}
		}
		if !o.autoRelease {
			// With autoRelease a token comes back when the delivery's
			// outcome is written, not when the consumer would release
			// it: the consumer cannot count the tokens out.
			rec.SetPolicy(p.ID, o.maxInFlight)
		}
		pols = append(pols, p.ID)
	}

	// Fire times: evenly over the duration, after an allowance for the
	// creates (estimated from the first ones).
	nThrottled := 0
	if len(pols) > 0 {
		nThrottled = int(o.throttled*float64(o.schedules) + 0.5)
	}
	rng := mrand.New(mrand.NewPCG(o.seed, 7))
	perm := rng.Perm(o.schedules) // which schedules are throttled, spread over time
	createBudget := time.Duration(o.schedules)*5*time.Millisecond + 2*time.Second
	if o.batchCreate {
		createBudget = time.Duration(o.schedules)*20*time.Microsecond + 2*time.Second
	}
	first := time.Now().Add(createBudget + o.lead).Truncate(time.Second)
	at := func(i int) time.Time {
		if o.schedules == 1 {
			return first
		}
		return first.Add(o.duration * time.Duration(i) / time.Duration(o.schedules-1)).Truncate(time.Second)
	}
	type job struct{ i int }
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var createErr error
	want := expectation{}
	for range min(8, o.schedules) {
		if o.batchCreate {
			break
		}
		wg.Go(func() {
			for j := range jobs {
				policy := ""
				if perm[j.i] < nThrottled {
					policy = pols[perm[j.i]%len(pols)]
				}
				runAt := at(j.i)
				sch, err := api.CreateSchedule(ctx, chaoskit.ScheduleSpec{
					Name: fmt.Sprintf("bench-%d", j.i), RunAt: &runAt, EventCount: o.eventsPerFire,
					PolicyID: policy, MaxAttempts: o.maxAttempts, Window: windowString(o.window), Spread: o.spread,
					Target:  chaoskit.Target{Type: o.targetType, URL: consumer},
					Payload: chaoskit.Payload{Policy: policy, Tag: fmt.Sprint(j.i)}.JSON(),
				})
				mu.Lock()
				if err != nil {
					createErr = errors.Join(createErr, err)
				} else {
					// The fire's size is the one asked for, whatever the
					// server answers.
					want[sch.ID] = o.eventsPerFire
				}
				mu.Unlock()
			}
		})
	}
	if o.batchCreate {
		close(jobs)
		wg.Wait()
		err := batchCreate(ctx, api, o.schedules, o.clients, func(i int) chaoskit.ScheduleSpec {
			policy := ""
			if perm[i] < nThrottled {
				policy = pols[perm[i]%len(pols)]
			}
			runAt := at(i)
			return chaoskit.ScheduleSpec{
				Name: fmt.Sprintf("bench-%d", i), RunAt: &runAt, EventCount: o.eventsPerFire,
				PolicyID: policy, MaxAttempts: o.maxAttempts, Window: windowString(o.window), Spread: o.spread,
				Target:  chaoskit.Target{Type: o.targetType, URL: consumer},
				Payload: chaoskit.Payload{Policy: policy, Tag: fmt.Sprint(i)}.JSON(),
			}
		}, func(id string) {
			mu.Lock()
			want[id] = o.eventsPerFire
			mu.Unlock()
		})
		createErr = errors.Join(createErr, err)
	} else {
		for i := range o.schedules {
			jobs <- job{i}
		}
		close(jobs)
		wg.Wait()
	}
	if createErr != nil {
		return nil, fmt.Errorf("create schedules: %w", createErr)
	}
	meter.mark("setup-end")
	commits0, ok0 := readCommits(ctx, base)
	res := &result{want: want, expected: o.schedules * o.eventsPerFire, setup: time.Since(setupStart),
		firstFire: at(0), lastFire: at(o.schedules - 1), policies: pols}
	if time.Now().After(first) {
		logf("warning: the creates took %v and ended after the first fire time; that fire's lateness includes it", res.setup.Round(time.Millisecond))
	}
	logf("%d schedules x %d events (%d throttled schedules over %d policies of maxInFlight %d), fires from %s to %s",
		o.schedules, o.eventsPerFire, nThrottled, len(pols), o.maxInFlight, res.firstFire.Format(time.TimeOnly), res.lastFire.Format(time.TimeOnly))

	// Wait for the deliveries.
	deadline := res.lastFire.Add(o.drain)
	lastLog := time.Now()
	for {
		// Comparing the sets costs a copy of every delivery: only once
		// enough deliveries were accepted for the run to be complete.
		n := rec.Counter("accepted") - rec.Counter("duplicates")
		missing := res.expected - n
		if missing <= 0 {
			missing = len(verify(want, rec.Snapshot(), nil).missing)
		}
		if missing == 0 {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_ = rec.WaitReleases(wctx)
			cancel()
			res.drainedOK = true
			break
		}
		if time.Now().After(res.lastFire) && o.failureRate > 0 {
			// Some events may end dead: stop when nothing is left to do.
			if un, err := api.UnfinishedEvents(ctx); err == nil && len(un) == 0 {
				res.drainedOK = true
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			logf("%d of %d events delivered", n, res.expected)
		}
		time.Sleep(250 * time.Millisecond)
	}

	meter.mark("end")
	if c, ok := readCommits(ctx, base); ok && ok0 {
		res.commits = commitCount{c.commits - commits0.commits, c.writes - commits0.writes}
		res.commitsMeasured = true
	}
	if meter != nil {
		var ok1, ok2 bool
		res.setupCPU, _, ok1 = meter.between("start", "setup-end")
		res.runCPU, res.runSelfCPU, res.runWall, ok2 = meter.between2("setup-end", "end")
		res.cpuMeasured, res.serverMeasured = ok1 && ok2, meter.pid != 0
		res.runWritten = -1
		if w, ok := meter.writtenBetween("setup-end", "end"); ok {
			res.runWritten = w
		}
		res.peakRSS = meter.peakRSS()
		close(memStop)
		memStop = nil
		res.mem = <-memPeaks
	}
	s := rec.Snapshot()
	status := map[eventKey]string{}
	if evs, err := api.ListEvents(ctx, nil); err == nil {
		for _, e := range evs {
			status[eventKey{e.ScheduleID, e.Index}] = e.Status
			switch {
			case e.Status == "dead":
				res.dead++
			case slices.Contains(chaoskit.Unfinished, e.Status):
				res.unfinished++
			}
		}
	} else {
		logf("list events: %v", err)
	}
	res.verdict = verify(want, s, status)
	res.lost = len(res.verdict.missing)
	res.delivered = res.expected - res.lost - len(res.verdict.dead)
	res.duplicates = s.Duplicates()
	res.failedAttempts = s.Counters["answered_500"]
	res.batches = s.Counters["batches"]
	res.violations = len(s.Violations)
	res.bounds, res.maxHeld = s.Bounds, s.MaxHeld
	res.releases = map[string]int{}
	for k, v := range s.Counters {
		if strings.HasPrefix(k, "release_") {
			res.releases[strings.TrimPrefix(k, "release_")] = v
		}
	}
	for _, d := range s.Events {
		if d.Accepted > 0 && d.First.After(res.lastReceipt) {
			res.lastReceipt = d.First
		}
	}
	res.lateAll = lateness(s, o, nil)
	res.lateFree = lateness(s, o, func(d chaoskit.Delivery) bool { return d.Policy == "" })
	res.lateThrottled = lateness(s, o, func(d chaoskit.Delivery) bool { return d.Policy != "" })
	res.early = countEarly(res.lateAll)
	for _, id := range pols {
		if p, err := api.GetPolicy(ctx, id); err == nil {
			res.tokenTimeouts += p.TokenTimeouts
		}
	}
	return res, nil
}

func (r *result) throughput() float64 {
	span := r.lastReceipt.Sub(r.firstFire)
	if span <= 0 {
		return 0
	}
	return float64(r.delivered) / span.Seconds()
}

// mib formats bytes as mebibytes.
func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
}

func (r *result) print(w io.Writer, o *options) {
	mode := "inprocess (embedded store)"
	switch {
	case o.target != "":
		mode = o.target
	case o.server != "":
		mode = o.server + " started by schedbench (embedded store)"
	}
	fmt.Fprintf(w, "schedbench: %s, GOMAXPROCS %d, %s/%s\n", mode, runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	pols := "no policies"
	if o.policies > 0 {
		pols = fmt.Sprintf("%d policies (maxInFlight %d, %.0f%% of schedules throttled)", o.policies, o.maxInFlight, 100*o.throttled)
	}
	spread := ""
	if o.spread {
		spread = fmt.Sprintf(", each fire's events spread over %v", o.window)
	}
	fmt.Fprintf(w, "workload: %d schedules x %d events over %v%s, %s, target %s, consumer latency %v, failure rate %.0f%%, maxAttempts %d, seed %d\n\n",
		o.schedules, o.eventsPerFire, o.duration, spread, pols, o.targetType, o.consumerLatency, 100*o.failureRate, o.maxAttempts, o.seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "events expected\t%d\n", r.expected)
	fmt.Fprintf(tw, "delivered (distinct)\t%d\n", r.delivered)
	fmt.Fprintf(tw, "duplicates\t%d (%d events)\n", r.duplicates, len(r.verdict.duplicated))
	fmt.Fprintf(tw, "not delivered\t%d (lost %d, dead %d; unfinished at the end %d)\n", r.lost+len(r.verdict.dead), r.lost, len(r.verdict.dead), r.unfinished)
	fmt.Fprintf(tw, "unexpected deliveries\t%d\n", len(r.verdict.unexpected))
	fmt.Fprintf(tw, "failed attempts (injected)\t%d\n", r.failedAttempts)
	if o.targetType == "http_batch" {
		fmt.Fprintf(tw, "http_batch requests\t%d\n", r.batches)
	}
	fmt.Fprintf(tw, "throughput\t%.1f events/s (first fire to last first receipt: %v)\n", r.throughput(), r.lastReceipt.Sub(r.firstFire).Round(time.Millisecond))
	fmt.Fprintf(tw, "setup (tenant, policies, schedules)\t%v\n", r.setup.Round(time.Millisecond))
	fmt.Fprintf(tw, "\t\n")
	fmt.Fprintf(tw, "lateness\tn\tp50\tp95\tp99\tmax\n")
	for _, row := range []struct {
		name string
		d    []time.Duration
	}{{"all", r.lateAll}, {"unthrottled", r.lateFree}, {"throttled", r.lateThrottled}} {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\n", row.name, len(row.d), ms(chaoskit.Percentile(row.d, 50)), ms(chaoskit.Percentile(row.d, 95)),
			ms(chaoskit.Percentile(row.d, 99)), ms(chaoskit.Percentile(row.d, 100)))
	}
	fmt.Fprintf(tw, "early (received before the launch time)\t%d\n", r.early)
	if r.cpuMeasured {
		who := "schedbench process (server, consumer and clients)"
		if r.serverMeasured {
			who = "schedulerd"
		}
		fmt.Fprintf(tw, "CPU of %s: setup\t%v\n", who, r.setupCPU)
		fmt.Fprintf(tw, "CPU of %s: after setup until the last release\t%v over %v\n", who, r.runCPU, r.runWall.Round(time.Millisecond))
		if r.serverMeasured {
			fmt.Fprintf(tw, "CPU of schedbench (consumer, releases, clients) meanwhile\t%v\n", r.runSelfCPU)
		}
		if r.runWritten >= 0 && r.expected > 0 {
			fmt.Fprintf(tw, "written to storage by %s after setup (write_bytes)\t%s, %d bytes an event\n", who,
				mib(r.runWritten), r.runWritten/int64(r.expected))
		}
		if r.commitsMeasured && r.commits.commits > 0 {
			fmt.Fprintf(tw, "commits of the embedded store after setup\t%d, %.1f writes and %.1f events a commit\n", r.commits.commits,
				float64(r.commits.writes)/float64(r.commits.commits), float64(r.expected)/float64(r.commits.commits))
		}
		if r.peakRSS > 0 {
			fmt.Fprintf(tw, "peak resident memory of %s\t%s\n", who, mib(r.peakRSS))
		}
		if r.mem.pss > 0 {
			fmt.Fprintf(tw, "peak PSS of %s (sampled every 250 ms)\t%s\n", who, r.mem)
		}
	}
	fmt.Fprintf(tw, "\t\n")
	ids := append([]string(nil), r.policies...)
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(tw, "policy %s\tmax held %d / bound %d\n", id, r.maxHeld[id], r.bounds[id])
	}
	fmt.Fprintf(tw, "throttle violations\t%d\n", r.violations)
	fmt.Fprintf(tw, "tokens reclaimed by timeout\t%d\n", r.tokenTimeouts)
	fmt.Fprintf(tw, "release calls\t%v\n", r.releases)
	tw.Flush()
	if !r.drainedOK {
		fmt.Fprintf(w, "\nWARNING: the run ended at the drain deadline with %d events not delivered\n", r.lost)
	}
	for _, d := range r.verdict.duplicated[:min(len(r.verdict.duplicated), 10)] {
		fmt.Fprintf(w, "duplicate: %s\n", d)
	}
	if o.markdown {
		maxHeld := 0
		for _, v := range r.maxHeld {
			maxHeld = max(maxHeld, v)
		}
		fmt.Fprintf(w, "\n| schedules x n | policies x maxInFlight | latency | fail | expected | delivered | dup | not delivered | events/s | p50 | p95 | p99 | max | max held / bound |\n")
		fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		fmt.Fprintf(w, "| %d x %d | %d x %d | %v | %.0f%% | %d | %d | %d | %d | %.1f | %s | %s | %s | %s | %d / %d |\n",
			o.schedules, o.eventsPerFire, o.policies, boundOf(o), o.consumerLatency, 100*o.failureRate,
			r.expected, r.delivered, r.duplicates, r.lost+len(r.verdict.dead), r.throughput(),
			ms(chaoskit.Percentile(r.lateAll, 50)), ms(chaoskit.Percentile(r.lateAll, 95)), ms(chaoskit.Percentile(r.lateAll, 99)), ms(chaoskit.Percentile(r.lateAll, 100)),
			maxHeld, boundOf(o))
	}
}

// boundOf is the policies' maxInFlight, or 0 without policies.
func boundOf(o *options) int {
	if o.policies == 0 {
		return 0
	}
	return o.maxInFlight
}
