package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

// TestChaosStoreOutage stops the store process for 10 seconds in the middle
// of a run. "restart" kills FerretDB with SIGKILL and starts it again on
// the same port and data directory after 10s; "sigstop" (long runs only)
// freezes it with SIGSTOP for 10s, so that connections hang instead of
// being refused. In both: /readyz turns 503 during the outage and 200 after
// it, no schedulerd process exits, creates during the outage either fail or
// are kept, and every expected event is delivered afterwards.
func TestChaosStoreOutage(t *testing.T) {
	skipShort(t)
	modes := []string{"restart"}
	if long() {
		modes = append(modes, "sigstop")
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { storeOutage(t, mode) })
	}
}

func storeOutage(t *testing.T, mode string) {
	const outage = 10 * time.Second
	nInst, schedules, per, runFor := 1, 8, 10, 40*time.Second
	if long() {
		nInst, schedules, per, runFor = 2, 24, 15, 90*time.Second
	}
	rng := rand.New(rand.NewPCG(seed(t), 3))
	ctx, cancel := context.WithTimeout(context.Background(), runFor+6*time.Minute)
	defer cancel()

	f := startFerret(t)
	var insts []*instance
	for i := range nInst {
		insts = append(insts, startInstance(t, instanceOpts{id: fmt.Sprintf("o%d", i), mongoURI: f.uri}))
	}
	d := newDeployment(t, ctx, insts, chaoskit.RecorderConfig{Latency: 100 * time.Millisecond, Seed: rng.Uint64()})
	tight := d.policy(ctx, "tight", 3, 30*time.Second)
	policies := []string{tight, ""}

	// Fires before, during and after the outage.
	t0 := time.Now().Add(5 * time.Second)
	for i := range schedules {
		at := t0.Add(runFor * time.Duration(i) / time.Duration(schedules))
		if err := d.oneOff(ctx, fmt.Sprintf("oneoff-%d", i), at, per, policies[i%2], 25); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("created %d one-off schedules, %d events, from %s over %v", schedules, d.expectedCount(), t0.Format(time.TimeOnly), runFor)
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go d.samplePolicies(sctx)

	time.Sleep(time.Until(t0.Add(runFor / 4)))
	outStart := time.Now()
	switch mode {
	case "restart":
		t.Logf("store: SIGKILL")
		f.kill()
	case "sigstop":
		t.Logf("store: SIGSTOP")
		f.signal(syscall.SIGSTOP)
	}

	// Readiness must turn false on every instance.
	for _, in := range insts {
		if _, ok := waitReady(ctx, in.base, http.StatusServiceUnavailable, outage-time.Since(outStart)); !ok {
			t.Errorf("%s: /readyz did not answer 503 within %v of the store stopping", in.id, outage)
		} else {
			t.Logf("%s: /readyz 503 %v after the store stopped", in.id, time.Since(outStart).Round(100*time.Millisecond))
		}
	}
	// A create during the outage must fail or be durable.
	quick := &chaoskit.Client{Key: d.api.Key, Bases: d.liveBases, CallTimeout: 3 * time.Second}
	if err := d.oneOffVia(ctx, quick, "during-outage", time.Now().Add(20*time.Second), per, "", 25); err == nil {
		t.Logf("a create during the outage answered 2xx; its events are expected")
	} else {
		t.Logf("a create during the outage failed, as it may: %v", err)
	}

	time.Sleep(time.Until(outStart.Add(outage)))
	switch mode {
	case "restart":
		f.start()
	case "sigstop":
		f.signal(syscall.SIGCONT)
	}
	t.Logf("store: back after %v", time.Since(outStart).Round(100*time.Millisecond))
	for _, in := range insts {
		took, ok := waitReady(ctx, in.base, http.StatusOK, 90*time.Second)
		if !ok {
			t.Errorf("%s: /readyz not 200 within 90s of the store coming back", in.id)
		} else {
			t.Logf("%s: /readyz 200 again %v after the store came back", in.id, took.Round(100*time.Millisecond))
		}
	}
	// The instances could not record outcomes, and lost their leases,
	// until they were ready again.
	d.disrupted("", outStart, time.Now())
	time.Sleep(time.Until(t0.Add(runFor)))
	r := d.drain(ctx, 3*time.Minute)
	stopSampling()
	// Every duplicate must be a copy in flight when the store stopped.
	d.assert(r, checks{})
	for _, in := range insts {
		if !in.running() {
			t.Errorf("%s is not running after the outage", in.id)
		}
	}
}
