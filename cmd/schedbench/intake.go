package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	mrand "math/rand/v2"

	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

// batchLimit is the server's most items per POST /v1/schedules/batch.
const batchLimit = 1000

// intakeResult is what an -oneoffs run measured.
type intakeResult struct {
	n, clients     int
	took           time.Duration
	intakeCPU      cpuTime
	idleFor        time.Duration
	idleCPU        cpuTime
	size           int64 // bytes of the data directory; -1 if unknown
	cpuMeasured    bool
	serverMeasured bool
	peakRSS        int64   // bytes; -1 when not measured
	mem            memPeak // during the intake
}

// oneOffItem is one item of a batch create: a one-off due at runAt.
func oneOffItem(i int, runAt time.Time, target string) map[string]any {
	return map[string]any{
		"name":    fmt.Sprintf("j%d", i),
		"runAt":   runAt.UTC().Format(time.RFC3339),
		"target":  map[string]any{"type": "http", "url": target},
		"payload": map[string]any{"job": "nightly-report", "region": "eu-central-1", "batch": 42},
	}
}

// dueTimes are n launch times between 2 h and 24 h after now, drawn from
// seed.
func dueTimes(n int, now time.Time, seed uint64) []time.Time {
	rng := mrand.New(mrand.NewPCG(seed, 11))
	out := make([]time.Time, n)
	for i := range out {
		out[i] = now.Add(2*time.Hour + time.Duration(rng.Int64N(int64(22*time.Hour/time.Second)))*time.Second)
	}
	return out
}

// intake creates o.oneoffs one-offs due 2-24 h later through the batch
// API (batchLimit a request, o.clients requests at once), then measures the
// server's CPU while it holds them and nothing is due.
func intake(ctx context.Context, o *options, base string, meter *cpuMeter, dataDir string, stderr io.Writer) (*intakeResult, error) {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "schedbench: "+format+"\n", a...) }
	admin := chaoskit.NewClient(o.adminKey, base)
	tenant, key, err := admin.CreateTenant(ctx, "schedbench-"+randomHex(4))
	if err != nil {
		return nil, fmt.Errorf("create tenant: %w", err)
	}
	if err := admin.Do(ctx, "PATCH", "/v1/tenants/"+tenant, map[string]any{
		"quotas": map[string]any{"maxSchedules": o.oneoffs + batchLimit, "maxEventsStored": 2*o.oneoffs + batchLimit},
	}, nil); err != nil {
		return nil, fmt.Errorf("raise the tenant's quotas: %w", err)
	}
	api := admin.WithKey(key)
	due := dueTimes(o.oneoffs, time.Now(), o.seed)
	// The target is never called: nothing falls due during the run.
	const target = "http://127.0.0.1:9/hook"
	chunks := make(chan int)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
		done int
	)
	start := time.Now()
	meter.mark("intake-start")
	memStop := make(chan struct{})
	memPeaks := sampleMem(meter.pid, 250*time.Millisecond, memStop)
	for range o.clients {
		wg.Go(func() {
			for from := range chunks {
				to := min(from+batchLimit, o.oneoffs)
				items := make([]map[string]any, 0, to-from)
				for i := from; i < to; i++ {
					items = append(items, oneOffItem(i, due[i], target))
				}
				var res struct {
					Created int `json:"created"`
					Failed  int `json:"failed"`
				}
				err := api.Do(ctx, "POST", "/v1/schedules/batch", map[string]any{"items": items}, &res)
				if err == nil && res.Failed > 0 {
					err = fmt.Errorf("batch at %d: %d items failed", from, res.Failed)
				}
				mu.Lock()
				errs = errors.Join(errs, err)
				done += res.Created
				n := done
				mu.Unlock()
				if n%100_000 < batchLimit && err == nil {
					logf("%d of %d one-offs created", n, o.oneoffs)
				}
			}
		})
	}
	for from := 0; from < o.oneoffs; from += batchLimit {
		select {
		case chunks <- from:
		case <-ctx.Done():
		}
	}
	close(chunks)
	wg.Wait()
	took := time.Since(start)
	meter.mark("intake-end")
	close(memStop)
	mem := <-memPeaks
	if errs != nil {
		return nil, fmt.Errorf("create one-offs: %w", errs)
	}
	// The create path finishes its writes (fires, background emission)
	// within seconds; idle CPU is measured after that.
	logf("%d one-offs created in %v; settling %v, then measuring idle CPU for %v", o.oneoffs, took.Round(time.Millisecond), o.settle, o.idle)
	if err := sleepCtx(ctx, o.settle); err != nil {
		return nil, err
	}
	meter.mark("idle-start")
	if err := sleepCtx(ctx, o.idle); err != nil {
		return nil, err
	}
	meter.mark("idle-end")
	r := &intakeResult{n: o.oneoffs, clients: o.clients, took: took, size: -1, serverMeasured: meter.pid != 0, mem: mem}
	var ok1, ok2 bool
	r.intakeCPU, _, ok1 = meter.between("intake-start", "intake-end")
	r.idleCPU, r.idleFor, ok2 = meter.between("idle-start", "idle-end")
	r.cpuMeasured = ok1 && ok2
	r.peakRSS = meter.peakRSS()
	if dataDir != "" {
		if n, err := dirSize(dataDir); err == nil {
			r.size = n
		} else {
			logf("data directory size: %v", err)
		}
	}
	return r, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *intakeResult) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "one-offs created\t%d, due 2-24 h later, %d a request, %d clients\n", r.n, batchLimit, r.clients)
	fmt.Fprintf(tw, "intake time\t%v (%.0f one-offs/s)\n", r.took.Round(time.Millisecond), float64(r.n)/r.took.Seconds())
	who := "schedbench process (server and clients)"
	if r.serverMeasured {
		who = "schedulerd"
	}
	if r.cpuMeasured {
		fmt.Fprintf(tw, "CPU during intake (%s)\t%v\n", who, r.intakeCPU)
		fmt.Fprintf(tw, "idle CPU (%s)\t%v over %v = %.2f%% of a core\n", who, r.idleCPU, r.idleFor.Round(time.Millisecond),
			100*r.idleCPU.total().Seconds()/r.idleFor.Seconds())
	}
	if r.peakRSS > 0 {
		fmt.Fprintf(tw, "peak resident memory (%s)\t%s\n", who, mib(r.peakRSS))
	}
	if r.mem.pss > 0 {
		fmt.Fprintf(tw, "peak PSS during intake (%s, sampled every 250 ms)\t%s\n", who, r.mem)
	}
	if r.size >= 0 {
		fmt.Fprintf(tw, "data directory\t%d bytes = %.0f bytes a one-off\n", r.size, float64(r.size)/float64(r.n))
	}
	tw.Flush()
}

// batchCreate creates n schedules, item(i) each, through the batch API
// (batchLimit a request, clients requests at once) and calls created with
// the id of each one created.
func batchCreate(ctx context.Context, api *chaoskit.Client, n, clients int, item func(i int) chaoskit.ScheduleSpec, created func(id string)) error {
	chunks := make(chan int)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	for range clients {
		wg.Go(func() {
			for from := range chunks {
				to := min(from+batchLimit, n)
				items := make([]chaoskit.ScheduleSpec, 0, to-from)
				for i := from; i < to; i++ {
					items = append(items, item(i))
				}
				var res struct {
					Failed int `json:"failed"`
					Items  []struct {
						Schedule *chaoskit.Schedule `json:"schedule"`
					} `json:"items"`
				}
				err := api.Do(ctx, "POST", "/v1/schedules/batch", map[string]any{"items": items}, &res)
				if err == nil && res.Failed > 0 {
					err = fmt.Errorf("batch at %d: %d items failed", from, res.Failed)
				}
				for _, it := range res.Items {
					if it.Schedule != nil {
						created(it.Schedule.ID)
					}
				}
				mu.Lock()
				errs = errors.Join(errs, err)
				mu.Unlock()
			}
		})
	}
	for from := 0; from < n; from += batchLimit {
		select {
		case chunks <- from:
		case <-ctx.Done():
		}
	}
	close(chunks)
	wg.Wait()
	return errs
}
