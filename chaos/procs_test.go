package chaos

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Shared secrets of a test deployment (every instance must agree).
const (
	adminKey      = "sk_admin_chaos_0123456789abcdef"
	signingSecret = "chaos-signing-secret-0123456789"
)

var (
	binDir    string
	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// long reports whether the long runs were asked for (CHAOS_LONG=1).
func long() bool { return os.Getenv("CHAOS_LONG") == "1" }

// skipShort skips chaos tests under -short.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("chaos tests run real processes for minutes; skipped with -short")
	}
}

// binaries builds cmd/schedulerd and cmd/ferretdb once per test process and
// returns the directory holding them.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "schedulerd-chaos-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = "/usr/local/go/bin/go"
		}
		for _, c := range []string{"schedulerd", "ferretdb"} {
			cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, c), "./cmd/"+c)
			cmd.Dir = ".." // the module root
			out, err := cmd.CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build ./cmd/%s: %v\n%s", c, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// proc is one process of a test deployment that can be killed, stopped and
// started again with the same arguments. Its stdout and stderr go to a log
// file that a failing test prints.
type proc struct {
	t      *testing.T
	name   string
	bin    string
	args   []string
	env    []string
	banner string // stdout prefix printed when ready
	logPth string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	expected bool // the current run ends by our signal
	up       bool // the current run printed its banner
	starts   int
	crashes  []string // unexpected exits of a running (banner printed) process

	startFailures int // exits before the banner that no signal of ours caused
}

func newProc(t *testing.T, name, bin, banner string, args, env []string) *proc {
	dir := t.TempDir()
	if keep := os.Getenv("CHAOS_LOG_DIR"); keep != "" {
		// Keep the logs after the run, one directory per test.
		dir = filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &proc{t: t, name: name, bin: bin, banner: banner, args: args, env: env,
		logPth: filepath.Join(dir, name+".log")}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() || os.Getenv("CHAOS_KEEP_LOGS") == "1" {
			p.dumpLog(200)
		}
	})
	return p
}

// start runs the process and waits (up to 60s) for its banner line, which
// it returns.
func (p *proc) start() string {
	p.t.Helper()
	line, err := p.tryStart()
	if err != nil {
		p.dumpLog(60)
		p.t.Fatalf("%s: %v", p.name, err)
	}
	return line
}

func (p *proc) tryStart() (string, error) {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return "", errors.New("already running")
	}
	logf, err := os.OpenFile(p.logPth, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return "", err
	}
	p.starts++
	fmt.Fprintf(logf, "=== %s start #%d at %s\n", p.name, p.starts, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	// The process dies with the test process, even if the test is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.mu.Unlock()
		logf.Close()
		return "", err
	}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		logf.Close()
		return "", err
	}
	done := make(chan struct{})
	p.cmd, p.done, p.expected = cmd, done, false
	p.mu.Unlock()

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !sent && strings.HasPrefix(sc.Text(), p.banner) {
				lines <- sc.Text()
				sent = true
			}
		}
		_, _ = io.Copy(logf, stdout)
	}()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		fmt.Fprintf(logf, "=== %s exited at %s: %v (expected %v)\n", p.name, time.Now().Format(time.RFC3339Nano), err, p.expected)
		switch {
		case !p.expected && p.up:
			p.crashes = append(p.crashes, fmt.Sprintf("%s exited on its own at %s: %v", p.name, time.Now().Format(time.RFC3339Nano), err))
		case !p.expected:
			// Failing to start (for example while the store restarts) is
			// not a crash of a running instance; the caller retries.
			p.startFailures++
		}
		if p.cmd == cmd {
			p.cmd, p.up = nil, false
		}
		p.mu.Unlock()
		logf.Close()
		close(done)
	}()
	select {
	case l := <-lines:
		p.mu.Lock()
		p.up = p.cmd == cmd
		p.mu.Unlock()
		return l, nil
	case <-done:
		return "", errors.New("exited before printing its banner")
	case <-time.After(60 * time.Second):
		// A Go program prints every goroutine's stack on SIGQUIT: the log
		// then shows where the start hangs.
		p.signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
		}
		p.kill()
		return "", errors.New("no banner within 60s (goroutine dump in its log)")
	}
}

// signal sends sig to the running process; a signal that ends it is
// expected, so it does not count as a crash.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGQUIT {
		p.expected = true
	}
	_ = p.cmd.Process.Signal(sig)
}

// kill sends SIGKILL (and SIGCONT, for a stopped process) and waits until
// the process is gone.
func (p *proc) kill() {
	p.mu.Lock()
	done := p.done
	running := p.cmd != nil
	p.mu.Unlock()
	if !running {
		return
	}
	p.signal(syscall.SIGKILL)
	p.signal(syscall.SIGCONT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.t.Errorf("%s: still running 10s after SIGKILL", p.name)
	}
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// isUp reports whether the process runs and printed its banner.
func (p *proc) isUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && p.up
}

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// startWithRetry starts the process, trying again (like a supervisor) when
// a start fails, up to n times.
func (p *proc) startWithRetry(n int) error {
	var err error
	for range n {
		if _, err = p.tryStart(); err == nil {
			return nil
		}
		p.t.Logf("start %s: %v; trying again", p.name, err)
		time.Sleep(time.Second)
	}
	return fmt.Errorf("start %s failed %d times: %w", p.name, n, err)
}

// unexpectedExits lists the exits no signal of ours caused.
func (p *proc) unexpectedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.crashes...)
}

func (p *proc) dumpLog(lines int) {
	b, err := os.ReadFile(p.logPth)
	if err != nil {
		return
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		p.t.Logf("--- %s log (last %d of %d lines, %s)", p.name, lines, len(all), p.logPth)
		all = all[len(all)-lines:]
	} else {
		p.t.Logf("--- %s log (%s)", p.name, p.logPth)
	}
	for _, l := range all {
		p.t.Log(l)
	}
}

// ferret is a FerretDB process on a fixed port with a fixed data directory,
// so that it can be restarted under the same URI with its data.
type ferret struct {
	*proc
	uri string
}

func startFerret(t *testing.T) *ferret {
	t.Helper()
	bin := filepath.Join(binaries(t), "ferretdb")
	port := freePort(t)
	backend := []string{"-dir", filepath.Join(t.TempDir(), "ferretdb-data")}
	clientPool := 10 // SQLite: FerretDB's pool has 100 connections
	if usePostgres(t) {
		backend = []string{"-postgresql-url", startPostgres(t)}
		clientPool = 20
	}
	args := append([]string{"-listen", "127.0.0.1:" + strconv.Itoa(port), "-log-level", cmp.Or(os.Getenv("CHAOS_FERRETDB_LOG"), "warn")}, backend...)
	if every := os.Getenv("CHAOS_FERRETDB_STATS"); every != "" {
		// What FerretDB spends its time on, in its log (see cmd/ferretdb).
		args = append(args, "-stats-every", every)
	}
	if addr := os.Getenv("CHAOS_FERRETDB_PPROF"); addr != "" {
		args = append(args, "-pprof", addr)
	}
	p := newProc(t, "ferretdb", bin, "ferretdb listening on ", args, baseEnv())
	line := p.start()
	// FerretDB v1 holds one backend connection for each statement of a
	// command until the command ends, and another for its write, so
	// commands in flight at once can take every connection of its pool and
	// wait for each other for good. The clients' pools are kept far below
	// its pool (see startPostgres for PostgreSQL's).
	uri := strings.TrimSpace(strings.TrimPrefix(line, "ferretdb listening on ")) + "?maxPoolSize=" + strconv.Itoa(clientPool)
	return &ferret{proc: p, uri: uri}
}

// baseEnv is the test process's environment without SCHEDULER_* settings.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SCHEDULER_") {
			out = append(out, kv)
		}
	}
	return out
}

// instance is one schedulerd process on a fixed port.
type instance struct {
	*proc
	id   string
	base string
}

// leaseTTL is the instances' lease TTL: a killed instance's shards move
// to the others this long after its last renewal.
const leaseTTL = 3 * time.Second

// instanceOpts are the settings of a schedulerd instance beyond the
// defaults of the tests.
type instanceOpts struct {
	id       string
	mongoURI string // empty: embedded store in dataDir
	dataDir  string
	extra    map[string]string
}

func startInstance(t *testing.T, o instanceOpts) *instance {
	t.Helper()
	inst := newInstance(t, o)
	inst.start()
	return inst
}

func newInstance(t *testing.T, o instanceOpts) *instance {
	t.Helper()
	bin := filepath.Join(binaries(t), "schedulerd")
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := map[string]string{
		"SCHEDULER_LISTEN_ADDR":      addr,
		"SCHEDULER_PUBLIC_URL":       "http://" + addr,
		"SCHEDULER_ADMIN_KEY":        adminKey,
		"SCHEDULER_SIGNING_SECRET":   signingSecret,
		"SCHEDULER_INSTANCE_ID":      o.id,
		"SCHEDULER_LEASE_TTL":        leaseTTL.String(),
		"SCHEDULER_PARTITIONS":       "4",
		"SCHEDULER_SHARDS":           "4",
		"SCHEDULER_LOG_LEVEL":        cmp.Or(os.Getenv("CHAOS_SCHEDULER_LOG"), "warn"),
		"SCHEDULER_SHUTDOWN_TIMEOUT": "5s",
	}
	if o.mongoURI != "" {
		env["SCHEDULER_STORE"] = "mongo"
		env["SCHEDULER_MONGO_URI"] = o.mongoURI
	} else {
		env["SCHEDULER_STORE"] = "embedded"
		env["SCHEDULER_DATA_DIR"] = o.dataDir
	}
	for k, v := range o.extra {
		env[k] = v
	}
	envList := baseEnv()
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	p := newProc(t, "schedulerd-"+o.id, bin, "schedulerd listening on ", nil, envList)
	return &instance{proc: p, id: o.id, base: "http://" + addr}
}

// waitReady polls /readyz until it answers want or d passes.
func waitReady(ctx context.Context, base string, want int, d time.Duration) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < d {
		if got := readyz(ctx, base); got == want {
			return time.Since(start), true
		}
		select {
		case <-ctx.Done():
			return time.Since(start), false
		case <-time.After(200 * time.Millisecond):
		}
	}
	return time.Since(start), false
}
