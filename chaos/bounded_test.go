package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
	"github.com/schedulerd/schedulerd/model"
)

// TestChaosBoundedFire delivers a fire sixty times larger than the
// instance's bound on claimed events in memory (-max-held-events 50), a
// throttled fire beside it (maxInFlight 5, released at once) and a second
// tenant's fire due at the same instant, across a SIGKILL in the middle:
// every event is delivered, in launch order within each tenant and
// priority (on each shard, by the fire's index) but for the bound's worth
// of overtaking, and the instance never held more than the bound after a
// claim (schedulerd_events_held_peak, read before the kill and at the
// end), events on their way from the throttle to the delivery queues
// counted.
func TestChaosBoundedFire(t *testing.T) {
	skipShort(t)
	const (
		n, nOther, nThrottled, bound, maxInFlight = 3000, 1000, 300, 50, 5
		shards                                    = 4 // newInstance's SCHEDULER_SHARDS
	)
	rng := rand.New(rand.NewPCG(seed(t), 5))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	in := startInstance(t, instanceOpts{id: "solo", dataDir: filepath.Join(t.TempDir(), "data"), extra: map[string]string{
		"SCHEDULER_MAX_HELD_EVENTS":              strconv.Itoa(bound),
		"SCHEDULER_TENANT_MAX_EVENTS_PER_FIRE":   strconv.Itoa(n),
		"SCHEDULER_TENANT_MAX_EVENTS_PER_MINUTE": strconv.Itoa(10 * n),
		"SCHEDULER_TENANT_MAX_EVENTS_STORED":     strconv.Itoa(10 * n),
	}})
	d := newDeployment(t, ctx, []*instance{in}, chaoskit.RecorderConfig{Latency: time.Millisecond, Seed: rng.Uint64()})
	pol := d.policy(ctx, "narrow", maxInFlight, time.Minute)
	runAt := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	if err := d.oneOff(ctx, "big", runAt, n, "", 0); err != nil {
		t.Fatalf("create the fire: %v", err)
	}
	if err := d.oneOff(ctx, "narrow", runAt, nThrottled, pol, 0); err != nil {
		t.Fatalf("create the throttled fire: %v", err)
	}
	_, key, err := d.admin.CreateTenant(ctx, "chaos-"+t.Name()+"-other")
	if err != nil {
		t.Fatalf("create the second tenant: %v", err)
	}
	if err := d.oneOffVia(ctx, d.admin.WithKey(key), "other", runAt, nOther, "", 0); err != nil {
		t.Fatalf("create the second tenant's fire: %v", err)
	}

	// Kill once a third to two thirds of the fire arrived.
	target := n/3 + rng.IntN(n/3)
	for d.rec.Snapshot().Counters["accepted"] < target {
		select {
		case <-ctx.Done():
			t.Fatalf("fewer than %d events arrived: %v", target, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	before := heldPeak(t, ctx, in.base)
	killedAt := time.Now()
	in.kill()
	t.Logf("SIGKILL after %d deliveries; peak held before it %d", d.rec.Snapshot().Counters["accepted"], before)
	in.start()
	restartedAt := time.Now()
	d.disrupted(in.base, killedAt, restartedAt)

	// A throttled event the killed instance had started and not sent
	// waits for its token to time out (a minute), then for its retry's
	// backoff: the drain outlasts both.
	r := d.drain(ctx, 2*time.Minute)
	d.assert(r, checks{})
	after := heldPeak(t, ctx, in.base)
	t.Logf("peak held %d before the kill and %d after it, bound %d", before, after, bound)
	if before > bound || after > bound {
		t.Errorf("held %d events before the kill and %d after it, bound %d", before, after, bound)
	}
	if before == 0 || after == 0 {
		t.Errorf("peak held %d before the kill and %d after: the gauge did not count the claims", before, after)
	}

	// Order: a shard's claims take each tenant's unthrottled events of one
	// priority (all of them here, each tenant's being one fire) in launch
	// order, the fire's index among events due at the same instant, so an
	// event arrives after at most the bound's worth of events of its shard
	// and tenant with a greater index (those held with it), by their first
	// arrivals. After the restart the events claimed before the kill are
	// claimed first again, and wait the takeover grace (the killed instance
	// may have sent them): the events claimed meanwhile, while the bound
	// has room, pass them, and are not counted against them.
	type lane struct {
		shard  int
		tenant string // the fire's tag: one fire per tenant
	}
	byLane := map[lane][]chaoskit.Delivery{}
	for _, e := range r.snap.Events {
		if e.Policy != "" || e.Accepted == 0 {
			continue
		}
		l := lane{model.ShardOf(&model.Event{ID: e.EventID}, shards), e.Tag}
		byLane[l] = append(byLane[l], e)
	}
	// The handler's default TakeoverGrace, and a second for the claims.
	const takeoverGrace = 2 * time.Second
	inGrace := func(at time.Time) bool {
		return at.After(killedAt) && at.Before(restartedAt.Add(takeoverGrace+time.Second))
	}
	for l, evs := range byLane {
		slices.SortFunc(evs, func(a, b chaoskit.Delivery) int { return a.First.Compare(b.First) })
		worst := 0
		for i, e := range evs {
			takenOver := !e.First.Before(restartedAt.Add(takeoverGrace))
			later := 0
			for _, f := range evs[:i] {
				if f.Index > e.Index && !(takenOver && inGrace(f.First)) {
					later++
				}
			}
			worst = max(worst, later)
		}
		// 2×: the bound before and after the kill.
		if worst > 2*bound {
			t.Errorf("shard %d, fire %s: an event arrived after %d events of the lane with a greater index, want at most %d", l.shard, l.tenant, worst, 2*bound)
		}
		t.Logf("shard %d, fire %s: %d events, at most %d overtaken", l.shard, l.tenant, len(evs), worst)
	}
}

// heldPeak reads schedulerd_events_held_peak from an instance's /metrics.
func heldPeak(t *testing.T, ctx context.Context, base string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("read %s/metrics: %v", base, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "schedulerd_events_held_peak "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("schedulerd_events_held_peak %q: %v", v, err)
			}
			return int(f)
		}
	}
	t.Fatal(fmt.Errorf("%s/metrics has no schedulerd_events_held_peak (%v)", base, sc.Err()))
	return 0
}
