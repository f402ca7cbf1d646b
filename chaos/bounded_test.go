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
// instance's bound on claimed events in memory (-max-held-events 50), and
// a throttled fire beside it (maxInFlight 5, released at once), across a
// SIGKILL in the middle: every event is delivered, the events of a shard
// in the order of their claims (the fire's index) but for the bound's
// worth of overtaking, and the instance never held more than the bound
// after a claim (schedulerd_events_held_peak, read before the kill and at
// the end), plus the policy's maxInFlight: events that took a token are
// not counted on their way from the throttle to the delivery queues.
func TestChaosBoundedFire(t *testing.T) {
	skipShort(t)
	const (
		n, nThrottled, bound, maxInFlight = 3000, 300, 50, 5
		shards                            = 4 // newInstance's SCHEDULER_SHARDS
	)
	rng := rand.New(rand.NewPCG(seed(t), 5))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	d.disrupted(in.base, killedAt, time.Now())

	r := d.drain(ctx, time.Minute)
	d.assert(r, checks{})
	after := heldPeak(t, ctx, in.base)
	if before > bound+maxInFlight || after > bound+maxInFlight {
		t.Errorf("held %d events before the kill and %d after it, bound %d + maxInFlight %d", before, after, bound, maxInFlight)
	}
	if before == 0 || after == 0 {
		t.Errorf("peak held %d before the kill and %d after: the gauge did not count the claims", before, after)
	}

	// Order: within a shard the unthrottled events are claimed by index, so
	// an event arrives after at most the bound's worth of events of its
	// shard with a greater index (those held with it), by their first
	// arrivals. After the restart the events claimed before the kill come
	// first again: they sort before the others and fill the bound while
	// they wait TakeoverGrace.
	byShard := make([][]chaoskit.Delivery, shards)
	for _, e := range r.snap.Events {
		if e.Policy != "" || e.Accepted == 0 {
			continue
		}
		s := model.ShardOf(&model.Event{ID: e.EventID}, shards)
		byShard[s] = append(byShard[s], e)
	}
	for s, evs := range byShard {
		slices.SortFunc(evs, func(a, b chaoskit.Delivery) int { return a.First.Compare(b.First) })
		worst := 0
		for i, e := range evs {
			later := 0
			for _, f := range evs[:i] {
				if f.Index > e.Index {
					later++
				}
			}
			worst = max(worst, later)
		}
		// 2×: the bound before and after the kill.
		if worst > 2*bound {
			t.Errorf("shard %d: an event arrived after %d events of the shard with a greater index, want at most %d", s, worst, 2*bound)
		}
		t.Logf("shard %d: %d events, at most %d overtaken", s, len(evs), worst)
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
