package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	consumerlib "github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/delivery"
)

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "schedulerd-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "schedulerd")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build schedulerd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running schedulerd binary.
type proc struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:port
	logs *bytes.Buffer
	done chan error
}

var bannerRE = regexp.MustCompile(`listening on (http://\S+)`)

// start runs the binary in dir with no flags. The only setting is the
// listen port (0, so that tests never collide with a running service).
func start(t *testing.T, dir string) *proc {
	t.Helper()
	return startEnv(t, dir)
}

// startEnv is start with more environment variables (KEY=value).
func startEnv(t *testing.T, dir string, env ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(binPath), dir, env...)
}

// startCmd is startEnv with the command that runs the binary (under
// prlimit, say).
func startCmd(t *testing.T, cmd *exec.Cmd, dir string, env ...string) *proc {
	t.Helper()
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "SCHEDULER_LISTEN_ADDR=127.0.0.1:0"), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, logs: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = &lockedWriter{w: p.logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := bannerRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { p.done <- cmd.Wait() }()
	select {
	case p.base = <-found:
	case err := <-p.done:
		t.Fatalf("schedulerd exited before listening: %v\n%s", err, p.logs)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("schedulerd did not print where it listens\n%s", p.logs)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("schedulerd exited with %v after SIGTERM\n%s", err, p.logs)
		}
	case <-time.After(40 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("schedulerd did not stop within 40s of SIGTERM\n%s", p.logs)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// api calls the REST API with JSON and decodes the answer into out.
func api(t *testing.T, base, key, method, path string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
}

// consumer is a real HTTP consumer on 127.0.0.1: it checks signatures,
// records deliveries and releases each event after a short piece of work.
type consumer struct {
	t      *testing.T
	secret []byte
	work   time.Duration
	srv    *httptest.Server
	base   atomic.Pointer[string] // the live schedulerd, for release calls

	mu        sync.Mutex
	delivered map[string]int
	released  map[string]bool
	badSig    int
	progress  chan struct{}
}

func newConsumer(t *testing.T, secret []byte) *consumer {
	c := &consumer{t: t, secret: secret, delivered: map[string]int{}, released: map[string]bool{}, progress: make(chan struct{}, 1)}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *consumer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	v := consumerlib.Verifier{Secrets: [][]byte{c.secret}}
	if _, err := v.Verify(r.Header.Get(consumerlib.HeaderSignature), r.Header.Get(consumerlib.HeaderTimestamp), body); err != nil {
		c.mu.Lock()
		c.badSig++
		c.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var m delivery.Message
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.delivered[m.EventID]++
	c.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
	go func() {
		time.Sleep(c.work) // the consumer's work on the event
		c.release(m)
	}()
}

// release returns the token to whichever instance is live now (the one that
// delivered may have been stopped since; any instance serves releases).
func (c *consumer) release(m delivery.Message) {
	u, err := url.Parse(m.Release.URL)
	if err != nil {
		return
	}
	for attempt := 0; attempt < 100; attempt++ {
		base := *c.base.Load()
		b, _ := json.Marshal(map[string]string{"token": m.Release.Token})
		resp, err := http.Post(base+u.Path, "application/json", bytes.NewReader(b))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				c.mu.Lock()
				c.released[m.EventID] = true
				c.mu.Unlock()
				select {
				case c.progress <- struct{}{}:
				default:
				}
				return
			}
		}
		time.Sleep(100 * time.Millisecond) // retry back-off while an instance restarts
	}
}

func (c *consumer) counts() (delivered, released, dups, badSig int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.delivered {
		if n > 1 {
			dups += n - 1
		}
	}
	return len(c.delivered), len(c.released), dups, c.badSig
}

// waitReleased waits, on the consumer's progress signal, until n distinct
// events were released.
func (c *consumer) waitReleased(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	deadline := time.After(limit)
	for {
		if _, rel, _, _ := c.counts(); rel >= n {
			return
		}
		select {
		case <-c.progress:
		case <-deadline:
			d, rel, dups, bad := c.counts()
			t.Fatalf("after %s: %d delivered, %d released (want %d), %d duplicates, %d bad signatures", limit, d, rel, n, dups, bad)
		}
	}
}

// TestEndToEnd runs the real binary as a user would: no flags, a fresh
// directory, a policy and schedules created through the API, events received
// by a local consumer that releases them, SIGTERM mid-run, a restart, and
// nothing lost.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	a := start(t, dir)
	adminKey := readTrim(t, filepath.Join(dir, "data", "admin.key"))
	secret := readTrim(t, filepath.Join(dir, "data", "signing.secret"))
	c := newConsumer(t, []byte(secret))
	c.work = 100 * time.Millisecond // 40 events, 3 at a time: about 1.4s of work
	c.base.Store(&a.base)

	var tenant struct{ ID string }
	api(t, a.base, adminKey, "POST", "/v1/tenants", map[string]any{"name": "e2e"}, 201, &tenant)
	var key struct{ Key string }
	api(t, a.base, adminKey, "POST", "/v1/tenants/"+tenant.ID+"/keys", nil, 201, &key)
	var pol struct{ ID string }
	api(t, a.base, key.Key, "POST", "/v1/policies", map[string]any{"name": "steady", "maxInFlight": 3, "tokenTimeout": "2m"}, 201, &pol)

	const n = 40
	var sched struct {
		ID            string
		Children      int
		NextFireTimes []any
	}
	api(t, a.base, key.Key, "POST", "/v1/schedules", map[string]any{
		"name": "batch", "runAt": time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano),
		"eventCount": n, "policyId": pol.ID,
		"target": map[string]any{"type": "http", "url": c.srv.URL + "/work"},
	}, 201, &sched)

	// SIGTERM once part of the batch went through, then restart.
	c.waitReleased(t, 8, 60*time.Second)
	a.stop(t)
	if _, rel, _, _ := c.counts(); rel >= n {
		t.Fatalf("the whole batch was released before SIGTERM took effect; the restart proves nothing")
	}
	b := start(t, dir)
	c.base.Store(&b.base)
	c.waitReleased(t, n, 90*time.Second)

	// A cron schedule fired on demand, unthrottled.
	var cronSched struct{ ID string }
	api(t, b.base, key.Key, "POST", "/v1/schedules", map[string]any{
		"name": "yearly", "cron": "0 3 1 1 *", "timezone": "Europe/Berlin", "eventCount": 5,
		"target": map[string]any{"type": "http", "url": c.srv.URL + "/cron"},
	}, 201, &cronSched)
	api(t, b.base, key.Key, "POST", "/v1/schedules/"+cronSched.ID+"/trigger", nil, 202, nil)
	c.waitReleased(t, n+5, 60*time.Second)

	delivered, released, dups, bad := c.counts()
	if delivered != n+5 || released != n+5 || bad != 0 {
		t.Errorf("consumer saw %d delivered, %d released, %d bad signatures; want %d, %d, 0", delivered, released, bad, n+5, n+5)
	}
	t.Logf("duplicates after SIGTERM+restart: %d of %d", dups, n+5)

	// The store agrees: every event of the batch ended released.
	var events struct {
		Items []struct{ ID, Status string }
	}
	api(t, b.base, key.Key, "GET", "/v1/events?scheduleId="+sched.ID+"&limit=1000", nil, 200, &events)
	if len(events.Items) != n {
		t.Fatalf("store lists %d events of the batch, want %d", len(events.Items), n)
	}
	for _, e := range events.Items {
		if e.Status != "released" {
			t.Errorf("event %s is %s, want released", e.ID, e.Status)
		}
	}

	t.Run("Metrics", func(t *testing.T) {
		resp, err := http.Get(b.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := parseMetrics(string(raw))
		checks := []struct {
			series string
			ok     func(float64) bool
			want   string
		}{
			{`schedulerd_events_delivered_total`, func(v float64) bool { return v >= 5 && v <= n+5 }, "between 5 and 45"},
			{`schedulerd_events_emitted_total`, func(v float64) bool { return v == 5 }, "5 (the trigger on this instance)"},
			{`schedulerd_fires_total{decision="triggered"}`, func(v float64) bool { return v == 1 }, "1"},
			{`schedulerd_delivery_lateness_seconds_count`, func(v float64) bool { return v >= 5 }, ">= 5"},
			{`schedulerd_leases_held{group="handler"}`, func(v float64) bool { return v == 16 }, "16 (single instance holds every shard)"},
			{`schedulerd_leases_held{group="emitter"}`, func(v float64) bool { return v == 16 }, "16"},
			{`schedulerd_tokens_in_use{policy="` + pol.ID + `"}`, func(v float64) bool { return v >= 0 && v <= 3 }, "0..3"},
			{`schedulerd_api_requests_total{method="POST",route="/v1/schedules/:id/trigger",status="202"}`, func(v float64) bool { return v == 1 }, "1"},
			{`schedulerd_events_dead_total{priority="default"}`, func(v float64) bool { return v == 0 }, "0"},
		}
		for _, ck := range checks {
			v, ok := m[ck.series]
			if !ok {
				t.Errorf("series %s missing", ck.series)
				continue
			}
			if !ck.ok(v) {
				t.Errorf("%s = %v, want %s", ck.series, v, ck.want)
			}
		}
		for _, name := range []string{"schedulerd_emitter_window_scan_seconds_count", "schedulerd_emitter_children_read_total", `schedulerd_events_retried_total{priority="high"}`,
			`schedulerd_delivery_failures_total{reason="refused"}`, "schedulerd_token_wait_seconds_count"} {
			if _, ok := m[name]; !ok {
				t.Errorf("series %s missing", name)
			}
		}
	})

	t.Run("Probes", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := http.Get(b.base + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s answered %d", path, resp.StatusCode)
			}
		}
	})
	b.stop(t)
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// parseMetrics reads the Prometheus text format into series → value.
func parseMetrics(text string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}
