package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

// TestChaosConsumerFailures runs a consumer that answers 20% of deliveries
// with 500 and lets 10% time out (it hangs past the instance's 1s HTTP
// timeout). Events are retried with backoff; those that fail maxAttempts
// times go to dead with their last error, after exactly maxAttempts attempts
// reached the consumer; the throttle bound holds throughout (failed attempts
// give their tokens back). Then the consumer recovers, every dead event is
// redriven, and all of them are delivered.
func TestChaosConsumerFailures(t *testing.T) {
	skipShort(t)
	schedules, per := 10, 20
	if long() {
		schedules, per = 40, 50
	}
	const failRate, hangRate = 0.2, 0.1
	rng := rand.New(rand.NewPCG(seed(t), 4))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	in := startInstance(t, instanceOpts{id: "solo", dataDir: filepath.Join(t.TempDir(), "data"),
		extra: map[string]string{"SCHEDULER_HTTP_TIMEOUT": "1s"}})
	d := newDeployment(t, ctx, []*instance{in}, chaoskit.RecorderConfig{
		Latency: 50 * time.Millisecond, FailureRate: failRate, HangRate: hangRate, HangFor: 5 * time.Second,
		Seed: rng.Uint64(),
	})
	pol := d.policy(ctx, "tight", 4, time.Minute)
	// maxAttempts 2 and 3: with 30% failed attempts about 9% and 2.7% of
	// the events end dead; the default backoff (attempts^4+5s) keeps the
	// run under a minute.
	maxAttempts := map[string]int{}
	t0 := time.Now().Add(3 * time.Second)
	for i := range schedules {
		policy := ""
		if i%2 == 0 {
			policy = pol
		}
		ma := 2 + i%2
		name := fmt.Sprintf("oneoff-%d", i)
		if err := d.oneOff(ctx, name, t0.Add(time.Duration(i)*500*time.Millisecond), per, policy, ma); err != nil {
			t.Fatal(err)
		}
		maxAttempts[name] = ma
	}
	t.Logf("created %d one-off schedules, %d events", schedules, d.expectedCount())
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go d.samplePolicies(sctx)

	// Phase 1: wait until every event is released or dead.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		un, err := d.api.UnfinishedEvents(ctx)
		if err == nil && len(un) == 0 && time.Now().After(t0.Add(time.Duration(schedules)*500*time.Millisecond)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events still unfinished 3 minutes into the run: %d", len(un))
		}
		time.Sleep(time.Second)
	}
	evs, err := d.api.ListEvents(ctx, url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	snap := d.rec.Snapshot()
	var dead []chaoskit.Event
	retriedReleased := 0
	for _, e := range evs {
		rec := snap.Events[e.ID]
		switch e.Status {
		case "dead":
			dead = append(dead, e)
			if e.Attempts != e.MaxAttempts {
				t.Errorf("dead event %s has %d attempts, maxAttempts %d", e.ID, e.Attempts, e.MaxAttempts)
			}
			if e.LastError == "" {
				t.Errorf("dead event %s has no lastError", e.ID)
			}
			if rec.Seen != e.MaxAttempts || rec.Accepted != 0 {
				t.Errorf("dead event %s: the consumer saw %d attempts (accepted %d), want %d failed ones", e.ID, rec.Seen, rec.Accepted, e.MaxAttempts)
			}
		case "released":
			if rec.Accepted == 0 {
				t.Errorf("event %s is released but the consumer never accepted it", e.ID)
			}
			if rec.Seen > 1 {
				retriedReleased++
			}
			if rec.Seen > e.MaxAttempts {
				t.Errorf("event %s reached the consumer %d times, maxAttempts %d", e.ID, rec.Seen, e.MaxAttempts)
			}
		default:
			t.Errorf("event %s is %s after phase 1", e.ID, e.Status)
		}
	}
	t.Logf("phase 1 (consumer failing %.0f%% + hanging %.0f%%): %d events, %d released (%d of them after retries), %d dead; consumer counters %v",
		100*failRate, 100*hangRate, len(evs), len(evs)-len(dead), retriedReleased, len(dead), snap.Counters)
	if len(evs) != d.expectedCount() {
		t.Errorf("the store has %d events, %d expected", len(evs), d.expectedCount())
	}
	if retriedReleased == 0 {
		t.Errorf("no event was delivered after a retry")
	}
	if len(dead) == 0 {
		t.Errorf("no event went to dead; the run shows nothing about max attempts")
	}
	if len(snap.Violations) > 0 {
		t.Errorf("THROTTLE: %v", snap.Violations[:min(5, len(snap.Violations))])
	}

	// Phase 2: the consumer recovers; redrive every dead event.
	d.rec.SetFailures(0, 0)
	for _, e := range dead {
		if _, err := d.api.Redrive(ctx, e.ID); err != nil {
			t.Errorf("redrive %s: %v", e.ID, err)
		}
	}
	r := d.drain(ctx, 2*time.Minute)
	// Nothing is killed here, so the only duplicate at-least-once allows
	// is an accepted attempt the scheduler had already timed out (its 1 s
	// delivery timeout passed before the answer reached it on a loaded
	// machine): the consumer's release of that copy is refused with 409.
	// Nor may a token wait for its timeout: every attempt ends in an
	// answer or a delivery timeout, and the consumer releases at once.
	d.assert(r, checks{superseded: true, noTokenTimeout: true})
	if r.Statuses["released"] != len(evs) {
		t.Errorf("after the redrive %d of %d events are released", r.Statuses["released"], len(evs))
	}
}
