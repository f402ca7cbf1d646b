package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

// A /proc/PID/stat line whose command name holds spaces and parentheses:
// utime (field 14) 250 ticks, stime (field 15) 75 ticks.
func TestParseStat(t *testing.T) {
	line := "4242 (sched (x) d) S 1 4242 4242 0 -1 4194560 1200 0 3 0 250 75 0 0 20 0 9 0 100 0 0\n"
	c, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if c.user != 2500*time.Millisecond || c.sys != 750*time.Millisecond {
		t.Fatalf("parseStat: user %v sys %v, want 2.5s and 750ms", c.user, c.sys)
	}
	for _, bad := range []string{"4242 sched S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 1200 0 3 0 u 75 0"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) did not fail", bad)
		}
	}
}

// A /proc/PID/io text: write_bytes is its own line, not the one of
// cancelled_write_bytes or wchar.
func TestParseWriteBytes(t *testing.T) {
	text := "rchar: 100\nwchar: 900\nsyscr: 3\nsyscw: 4\nread_bytes: 0\nwrite_bytes: 8192\ncancelled_write_bytes: 4096\n"
	n, err := parseWriteBytes(text)
	if err != nil || n != 8192 {
		t.Fatalf("parseWriteBytes = %d, %v; want 8192", n, err)
	}
	for _, bad := range []string{"rchar: 1\n", "write_bytes: x\n", "write_bytes: -5\n"} {
		if _, err := parseWriteBytes(bad); err == nil {
			t.Errorf("parseWriteBytes(%q) did not fail", bad)
		}
	}
	if _, err := procWriteBytes(0); err != nil {
		t.Fatalf("procWriteBytes(0): %v", err)
	}
}

// The peak resident memory of this process is at least a buffer it has
// touched.
func TestProcPeakRSS(t *testing.T) {
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	n, err := procPeakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if n < int64(len(buf)) {
		t.Fatalf("peak resident memory %d bytes after touching a %d-byte buffer", n, len(buf))
	}
	self, err := procPeakRSS(0)
	if err != nil || self < int64(len(buf)) {
		t.Fatalf("procPeakRSS(0) = %d, %v", self, err)
	}
}

// procCPU of this process grows with the CPU it burns.
func TestProcCPU(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	start := selfCPU()
	x := 0
	for selfCPU().sub(start).total() < 100*time.Millisecond {
		for i := range 100000 {
			x += i
		}
	}
	after, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after.sub(before).total(); d < 50*time.Millisecond {
		t.Fatalf("after burning 100ms of CPU, /proc says %v more (x=%d)", d, x)
	}
}

// A fire's events are evenly spread over the window: event i of n at
// i*window/n after the fire time.
func TestLaunchAt(t *testing.T) {
	fire := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		i, n   int
		window time.Duration
		spread bool
		want   time.Duration
	}{
		{0, 50000, time.Minute, true, 0},
		{25000, 50000, time.Minute, true, 30 * time.Second},
		{49999, 50000, time.Minute, true, time.Minute - 1200*time.Microsecond},
		{1, 3, time.Second, true, 333333333},
		{2, 3, time.Second, true, 666666666},
		{7, 10, time.Second, false, 0},
		{7, 10, 0, true, 0},
		{0, 1, time.Second, true, 0},
	} {
		if got := launchAt(fire, tc.i, tc.n, tc.window, tc.spread).Sub(fire); got != tc.want {
			t.Errorf("launchAt(i=%d, n=%d, window %v, spread %v) = fire + %v, want + %v", tc.i, tc.n, tc.window, tc.spread, got, tc.want)
		}
	}
}

// Lateness is measured from each event's own launch time when the fire is
// spread, and a receipt before it is early and fails the run.
func TestLatenessEarly(t *testing.T) {
	fire := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	ev := func(id string, i int, received time.Duration) chaoskit.Delivery {
		d := accepted(id, "sch_a", i, 4, 1)
		d.FireTime, d.First = fire, fire.Add(received)
		return d
	}
	// 4 events over 4 s: launches at 0, 1, 2 and 3 s.
	s := snapshot(ev("e0", 0, 2*time.Millisecond), ev("e1", 1, time.Second+5*time.Millisecond),
		ev("e2", 2, 1500*time.Millisecond), ev("e3", 3, 3*time.Second))
	o := &options{window: 4 * time.Second, spread: true}
	got := lateness(s, o, nil)
	want := []time.Duration{-500 * time.Millisecond, 0, 2 * time.Millisecond, 5 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("lateness %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lateness %v, want %v", got, want)
		}
	}
	r := &result{early: countEarly(got)}
	if r.early != 1 {
		t.Fatalf("countEarly(%v) = %d, want 1", got, r.early)
	}
	if f := strings.Join(r.failures(), "\n"); !strings.Contains(f, "FAIL early: 1 events") {
		t.Fatalf("an early event did not fail the run: %q", f)
	}
	// Without spread every event launches at the fire time: none early.
	if n := countEarly(lateness(s, &options{}, nil)); n != 0 {
		t.Fatalf("without spread %d events early, want 0", n)
	}
}

func TestScenarios(t *testing.T) {
	o, err := parse([]string{"-server", "bin/schedulerd", "-scenario", "spread"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.schedules != 1 || o.eventsPerFire != 50000 || o.window != time.Minute || !o.spread || o.policies != 0 || o.duration != 0 {
		t.Fatalf("-scenario spread: %d schedules x %d events, window %v, spread %v, %d policies, duration %v",
			o.schedules, o.eventsPerFire, o.window, o.spread, o.policies, o.duration)
	}
	o, err = parse([]string{"-inprocess", "-events-per-fire", "10", "-scenario", "burst"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.schedules != 100 || o.eventsPerFire != 10 || o.duration != 0 {
		t.Fatalf("-scenario burst with -events-per-fire 10: %d x %d over %v; want the flag to win over the preset", o.schedules, o.eventsPerFire, o.duration)
	}
	o, err = parse([]string{"-server", "x", "-scenario", "burst-batch"}, io.Discard)
	if err != nil || o.schedules != 100 || o.eventsPerFire != 1000 || o.duration != 0 || o.targetType != "http_batch" {
		t.Fatalf("-scenario burst-batch: %d x %d over %v to %s, %v; want the burst to http_batch", o.schedules, o.eventsPerFire, o.duration, o.targetType, err)
	}
	o, err = parse([]string{"-server", "x", "-scenario", "spread-batch"}, io.Discard)
	if err != nil || o.eventsPerFire != 50000 || !o.spread || o.targetType != "http_batch" {
		t.Fatalf("-scenario spread-batch: %d events, spread %v, to %s, %v; want the spread to http_batch", o.eventsPerFire, o.spread, o.targetType, err)
	}
	if o, err = parse([]string{"-server", "x", "-scenario", "burst"}, io.Discard); err != nil || o.targetType != "http" {
		t.Fatalf("-scenario burst: target %q, %v; want http", o.targetType, err)
	}
	o, err = parse([]string{"-server", "x", "-scenario", "oneoffs"}, io.Discard)
	if err != nil || o.oneoffs != 1000000 {
		t.Fatalf("-scenario oneoffs: %d one-offs, %v", o.oneoffs, err)
	}
	for _, args := range [][]string{
		{"-inprocess", "-scenario", "nope"},
		{"-inprocess", "-server", "x"},
		{"-inprocess", "-server-pid", "1"},
		{"-inprocess", "-spread"},
		{"-inprocess", "-target-type", "sqs"},
	} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) did not fail", args)
		}
	}
}

// startServer reads the address from the banner of the binary it starts
// and measures that process.
func TestStartServerBanner(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-schedulerd")
	script := "#!/bin/sh\necho 'schedulerd listening on http://127.0.0.1:45678 (store: embedded)'\nexec sleep 30\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := &options{server: bin, logLevel: "warn", shards: 4, dataDir: t.TempDir()}
	s, stop, err := startServer(context.Background(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if s.base != "127.0.0.1:45678" {
		t.Fatalf("server base %q, want 127.0.0.1:45678", s.base)
	}
	if _, err := procCPU(s.pid); err != nil {
		t.Fatalf("CPU of the started process: %v", err)
	}
	if o.adminKey == "" || o.signingSecret == "" {
		t.Fatal("startServer set no admin key or signing secret for the benchmark to use")
	}
}

// End to end in process: a spread fire is delivered with no event early,
// and the CPU lines are printed.
func TestRunSpreadInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the service")
	}
	var out bytes.Buffer
	err := run([]string{"-inprocess", "-data-dir", t.TempDir(), "-schedules", "1", "-events-per-fire", "20", "-policies", "0",
		"-window", "2s", "-spread", "-duration", "0s", "-lead", "1s", "-drain", "30s", "-consumer-latency", "1ms"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"delivered (distinct)", "early (received before the launch time)", "CPU of schedbench process", "peak resident memory of schedbench process"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !containsFields(out.String(), "delivered (distinct)", "20") {
		t.Fatalf("not all 20 events delivered:\n%s", out.String())
	}
}

// End to end in process with an http_batch target: fires due at one
// instant reach the consumer in far fewer requests than events, every
// event once and none early.
func TestRunBurstBatchInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the service")
	}
	var out bytes.Buffer
	err := run([]string{"-inprocess", "-data-dir", t.TempDir(), "-schedules", "3", "-events-per-fire", "200", "-policies", "0",
		"-duration", "0s", "-lead", "1s", "-drain", "30s", "-consumer-latency", "1ms", "-target-type", "http_batch"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !containsFields(out.String(), "delivered (distinct)", "600") || !containsFields(out.String(), "duplicates", "0") {
		t.Fatalf("not all 600 events delivered once:\n%s", out.String())
	}
	requests := -1
	for _, l := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(l, "http_batch requests"); ok {
			requests, _ = strconv.Atoi(strings.TrimSpace(rest))
		}
	}
	if requests < 1 || requests > 60 {
		t.Fatalf("%d http_batch requests for 600 events due at one instant, want 1-60:\n%s", requests, out.String())
	}
}

// Intake in process: one-offs through the batch API, the data directory
// measured.
func TestRunOneOffsInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the service")
	}
	var out bytes.Buffer
	err := run([]string{"-inprocess", "-data-dir", t.TempDir(), "-oneoffs", "2500", "-clients", "2", "-settle", "0s", "-idle", "500ms"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !containsFields(out.String(), "one-offs created", "2500,") {
		t.Fatalf("output does not say 2500 one-offs were created:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "bytes a one-off") || !strings.Contains(out.String(), "idle CPU") || !strings.Contains(out.String(), "peak resident memory") {
		t.Fatalf("output lacks the data directory size or idle CPU:\n%s", out.String())
	}
}

// containsFields reports whether a line of s starts with label and its
// next field after the label is value.
func containsFields(s, label, value string) bool {
	for _, l := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(l, label); ok {
			if f := strings.Fields(rest); len(f) > 0 && f[0] == value {
				return true
			}
		}
	}
	return false
}

// readCommits takes the two counters from a /metrics text, whatever the
// other lines, and says when one is missing.
func TestReadCommits(t *testing.T) {
	bodies := map[string]string{
		"/full/metrics": "# HELP schedulerd_store_commits_total x\n# TYPE schedulerd_store_commits_total counter\n" +
			"schedulerd_store_commits_total 1234\nschedulerd_store_commits_total_other 9\n" +
			"# TYPE schedulerd_store_writes_total counter\nschedulerd_store_writes_total 5.678e+06\nschedulerd_events_held 3\n",
		"/short/metrics": "# TYPE schedulerd_store_commits_total counter\nschedulerd_store_commits_total 1234\n",
		// A gauge of the name is not the counter.
		"/gauge/metrics": "# TYPE schedulerd_store_commits_total gauge\nschedulerd_store_commits_total 1\n" +
			"# TYPE schedulerd_store_writes_total counter\nschedulerd_store_writes_total 1\n",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	c, ok := readCommits(t.Context(), srv.URL+"/full")
	if !ok || c != (commitCount{commits: 1234, writes: 5678000}) {
		t.Fatalf("readCommits = %+v, %v", c, ok)
	}
	if _, ok := readCommits(t.Context(), srv.URL+"/short"); ok {
		t.Fatal("readCommits without the writes counter said ok")
	}
	if _, ok := readCommits(t.Context(), srv.URL+"/gauge"); ok {
		t.Fatal("readCommits took a gauge for the commits counter")
	}
}
