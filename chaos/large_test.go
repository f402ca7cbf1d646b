package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

// TestChaosLargeEmission kills the only instance (embedded store) with
// SIGKILL while it writes the events of a large fire in the background and
// restarts it on the same data directory. The trigger answers at once
// (202, emitting); after the restart the emission resumes from its durable
// watermark and ends with exactly the fire's n events, indexes 0..n-1 once
// each, every one delivered and released: nothing lost, nothing emitted
// twice.
func TestChaosLargeEmission(t *testing.T) {
	skipShort(t)
	// A threshold far below n and a small chunk make the emission 200
	// store writes (over a second on two cores), so that the kill lands
	// inside it.
	n, above, chunk := 10000, 500, 50
	if long() {
		n, above, chunk = 30000, 500, 100
	}
	rng := rand.New(rand.NewPCG(seed(t), 3))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	in := startInstance(t, instanceOpts{id: "solo", dataDir: filepath.Join(t.TempDir(), "data"), extra: map[string]string{
		"SCHEDULER_EMIT_BACKGROUND_ABOVE": strconv.Itoa(above),
		"SCHEDULER_EMIT_BACKGROUND_CHUNK": strconv.Itoa(chunk),
	}})
	d := newDeployment(t, ctx, []*instance{in}, chaoskit.RecorderConfig{Latency: 2 * time.Millisecond, Seed: rng.Uint64()})
	sched := d.cronSchedule(ctx, "large", n, "", 25)

	status, f, err := triggerOnce(ctx, in.base, d.api.Key, sched)
	if err != nil {
		t.Fatalf("trigger: %v", err)
	}
	answered := time.Now()
	if status != http.StatusAccepted || !f.Emitting || f.N != n {
		t.Fatalf("trigger answered %d with n=%d emitting=%v, want 202 with n=%d emitting=true", status, f.N, f.Emitting, n)
	}
	d.mu.Lock()
	d.fires[f.ID] = n
	d.mu.Unlock()

	// Kill once at least target events are written and not all: a
	// random point in the first half of the emission.
	target := chunk + rng.IntN(n/2-chunk)
	var emitted int
	for {
		g, err := d.api.GetFire(ctx, f.ID)
		if err != nil {
			t.Fatalf("get fire %s: %v", f.ID, err)
		}
		if !g.Emitting {
			t.Fatalf("fire %s finished emitting before the kill; make n larger or the chunk smaller", f.ID)
		}
		if g.Emitted >= target && g.Emitted < n {
			emitted = g.Emitted
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("fire %s wrote no events: %v", f.ID, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	killedAt := time.Now()
	in.kill()
	t.Logf("SIGKILL with %d of %d events written (%v after the trigger's answer)", emitted, n, killedAt.Sub(answered).Round(time.Millisecond))
	in.start()
	restarted := time.Now()
	d.disrupted(in.base, killedAt, restarted)

	// The restarted instance resumes the emission from its watermark.
	resumeBy := time.Now().Add(45 * time.Second)
	for {
		g, err := d.api.GetFire(ctx, f.ID)
		if err == nil && !g.Emitting {
			t.Logf("emission finished %v after the restart", time.Since(restarted).Round(time.Millisecond))
			break
		}
		if time.Now().After(resumeBy) {
			t.Fatalf("fire %s still emitting 45s after the restart (last read: %+v, %v)", f.ID, g, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	r := d.drain(ctx, time.Minute)
	d.assert(r, checks{})

	// The store holds exactly the fire's n events, once each, all released.
	evs, err := d.api.ListEvents(ctx, url.Values{"fireId": {f.ID}})
	if err != nil {
		t.Fatalf("list events of fire %s: %v", f.ID, err)
	}
	if len(evs) != n {
		t.Errorf("fire %s has %d events in the store, want %d", f.ID, len(evs), n)
	}
	seen := make([]int, n)
	statuses := map[string]int{}
	for _, e := range evs {
		statuses[e.Status]++
		if e.Index < 0 || e.Index >= n {
			t.Errorf("event %s has index %d, outside 0..%d", e.ID, e.Index, n-1)
			continue
		}
		seen[e.Index]++
	}
	var wrong []string
	for i, c := range seen {
		if c != 1 {
			wrong = append(wrong, fmt.Sprintf("%d×%d", i, c))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d indexes not stored exactly once (index×count), for example %v", len(wrong), wrong[:min(10, len(wrong))])
	}
	if statuses["released"] != n {
		t.Errorf("events of fire %s by status %v, want all %d released", f.ID, statuses, n)
	}
	// And the consumer saw no event of the fire beyond its n.
	distinct := 0
	for _, e := range r.snap.Events {
		if e.FireID == f.ID && e.Accepted > 0 {
			distinct++
		}
	}
	if distinct != n {
		t.Errorf("the consumer accepted %d distinct events of fire %s, want %d", distinct, f.ID, n)
	}
}

// triggerOnce fires schedule id through base and returns the answer's
// status and fire (a trigger is not idempotent, so it is sent once).
func triggerOnce(ctx context.Context, base, key, id string) (int, chaoskit.Fire, error) {
	var f chaoskit.Fire
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/schedules/"+url.PathEscape(id)+"/trigger", nil)
	if err != nil {
		return 0, f, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, f, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, f, err
	}
	if err := json.Unmarshal(body, &f); err != nil {
		return resp.StatusCode, f, fmt.Errorf("decode %d answer %q: %w", resp.StatusCode, body, err)
	}
	return resp.StatusCode, f, nil
}
