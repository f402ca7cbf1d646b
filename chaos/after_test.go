package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

// afterConsumer records what it is sent and answers 200; it does not
// release (the test does, when it wants the upstream fire finished).
type afterConsumer struct {
	mu   sync.Mutex
	msgs []delivery.Message
}

func (c *afterConsumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m delivery.Message
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
}

// of returns the messages of schedule id.
func (c *afterConsumer) of(id string) []delivery.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []delivery.Message
	for _, m := range c.msgs {
		if m.ScheduleID == id {
			out = append(out, m)
		}
	}
	return out
}

type fireView struct {
	ID         string         `json:"id"`
	Decision   string         `json:"decision"`
	Note       string         `json:"note"`
	Counts     map[string]int `json:"counts"`
	FinishedAt *time.Time     `json:"finishedAt"`
}

// TestChaosAfterExactlyOnce kills the only instance (embedded store) with
// SIGKILL after an upstream fire finished and before the schedule that
// fires after it fired: the upstream's event is released through an
// instance that does not sweep for finished fires (its finish interval is
// an hour), which is then killed. The instance started next on the same
// data directory fires the dependent exactly once, with the id derived
// from the upstream fire's, and its event reaches the consumer once.
func TestChaosAfterExactlyOnce(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	cons := &afterConsumer{}
	srv := httptest.NewServer(cons)
	t.Cleanup(srv.Close)

	sweeping := func(id string) *instance {
		return newInstance(t, instanceOpts{id: id, dataDir: dir, extra: map[string]string{"SCHEDULER_FINISH_INTERVAL": "200ms"}})
	}
	a := sweeping("a")
	a.start()
	admin := &chaoskit.Client{Key: adminKey, Bases: func() []string { return []string{a.base} }, CallTimeout: 30 * time.Second}
	_, key, err := admin.CreateTenant(ctx, "after")
	if err != nil {
		t.Fatal(err)
	}
	base := a.base
	api := &chaoskit.Client{Key: key, Bases: func() []string { return []string{base} }, CallTimeout: 30 * time.Second}
	pol, err := api.CreatePolicy(ctx, "held", 1, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var up, down chaoskit.Schedule
	target := map[string]string{"type": "http", "url": srv.URL}
	if err := api.Do(ctx, http.MethodPost, "/v1/schedules", map[string]any{
		"name": "upstream", "cron": "0 0 1 1 *", "policyId": pol.ID, "target": target,
	}, &up); err != nil {
		t.Fatal(err)
	}
	if err := api.Do(ctx, http.MethodPost, "/v1/schedules", map[string]any{
		"name": "downstream", "after": map[string]string{"scheduleId": up.ID, "when": "succeeded"}, "target": target,
	}, &down); err != nil {
		t.Fatal(err)
	}
	f, err := api.Trigger(ctx, up.ID)
	if err != nil {
		t.Fatal(err)
	}
	m := waitMessage(t, ctx, cons, up.ID)

	// The upstream's event holds its token. Restart on an instance that
	// does not sweep, release the event there: the fire has finished and
	// nothing has fired after it.
	a.kill()
	quiet := newInstance(t, instanceOpts{id: "b", dataDir: dir, extra: map[string]string{"SCHEDULER_FINISH_INTERVAL": "1h"}})
	quiet.start()
	base = quiet.base
	release(t, ctx, quiet.base, m.Release)
	var fv fireView
	if err := api.Do(ctx, http.MethodGet, "/v1/fires/"+url.PathEscape(f.ID), nil, &fv); err != nil {
		t.Fatal(err)
	}
	if fv.Counts["released"] != 1 || fv.FinishedAt != nil {
		t.Fatalf("upstream fire before the kill: %+v, want its event released and the fire not yet seen finished", fv)
	}
	if n := len(fires(t, ctx, api, down.ID)); n != 0 {
		t.Fatalf("the dependent fired %d times before the kill; the quiet instance swept after the release", n)
	}
	quiet.kill()

	c := sweeping("c")
	c.start()
	base = c.base
	waitMessage(t, ctx, cons, down.ID)
	// Let the instance sweep a few more times after the fire.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := api.Do(ctx, http.MethodGet, "/v1/fires/"+url.PathEscape(f.ID), nil, &fv); err != nil {
			t.Fatal(err)
		}
		if fv.FinishedAt != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream fire %s never marked finished: %+v", f.ID, fv)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // five more sweeps
	fs := fires(t, ctx, api, down.ID)
	if len(fs) != 1 || fs[0].ID != down.ID+".after."+f.ID || fs[0].Decision != "after" {
		t.Fatalf("fires of the dependent: %+v, want exactly one, %s.after.%s", fs, down.ID, f.ID)
	}
	if got := cons.of(down.ID); len(got) != 1 {
		t.Fatalf("the dependent's event reached the consumer %d times, want once", len(got))
	}
}

func waitMessage(t *testing.T, ctx context.Context, c *afterConsumer, scheduleID string) delivery.Message {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if ms := c.of(scheduleID); len(ms) > 0 {
			return ms[0]
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("no delivery of schedule %s", scheduleID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// release posts the token of rel to base (the instance now running).
func release(t *testing.T, ctx context.Context, base string, rel delivery.Release) {
	t.Helper()
	path := rel.URL[strings.Index(rel.URL, "/v1/events/"):]
	body, _ := json.Marshal(map[string]string{"token": rel.Token})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("release: %d", resp.StatusCode)
	}
}

func fires(t *testing.T, ctx context.Context, api *chaoskit.Client, scheduleID string) []fireView {
	t.Helper()
	var out struct {
		Items []fireView `json:"items"`
	}
	if err := api.Do(ctx, http.MethodGet, "/v1/schedules/"+url.PathEscape(scheduleID)+"/fires", nil, &out); err != nil {
		t.Fatal(err)
	}
	return out.Items
}
