// Package sqstest runs a real SQS protocol server for tests: local-aws-sqs
// (the npm package pinned in this directory's package.json), started with Node.
//
// One server serves a whole test process. It starts on the first call of
// Endpoint and stops when Main returns, or, if a package does not use Main,
// when the test process exits: the server reads its stdin and quits when
// that pipe closes, so no process is left behind either way.
//
// The server is installed by `npm ci --prefix internal/testkit/sqstest` (CI does this). If
// it is missing, tests that need it fail, naming the command to run; they are
// not skipped, so that a green run always means the SQS tests ran.
package sqstest

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// serverScript is the Node entry point; local-aws-sqs has no command of its own.
//
//go:embed server.js
var serverScript string

// startTimeout bounds how long Node may take to load and listen.
const startTimeout = 30 * time.Second

// Region is the region the server puts in its ARNs and clients should use.
const Region = "us-east-1"

// shared is the server of this test process. It is the package's only
// state, and it exists because starting Node once per test would cost a
// second or so each time.
var shared server

type server struct {
	mu       sync.Mutex
	started  bool
	endpoint string
	err      error
	stdin    io.Closer
	cmd      *exec.Cmd
	exited   chan struct{}
}

// Main runs the tests of m, stops the shared server and exits with the
// tests' code. Use it from TestMain:
//
//	func TestMain(m *testing.M) { sqstest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := shared.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "sqstest:", err)
	}
	os.Exit(code)
}

// Endpoint returns the base URL ("http://127.0.0.1:PORT") of the shared
// local-aws-sqs server, starting it on first use. It fails t if the server
// cannot be started, for example because `npm ci` has not been run.
func Endpoint(t testing.TB) string {
	t.Helper()
	endpoint, err := shared.start()
	if err != nil {
		t.Fatalf("sqstest: %v", err)
	}
	return endpoint
}

// NewClient returns an SQS client for the shared server with static dummy
// credentials (the server checks none).
func NewClient(t testing.TB) *sqs.Client {
	t.Helper()
	endpoint := Endpoint(t)
	return sqs.New(sqs.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  aws.CredentialsProviderFunc(staticCredentials),
	})
}

func staticCredentials(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test", Source: "sqstest"}, nil
}

// CreateQueue creates a queue named after the test (plus suffix) and deletes
// it when the test ends. A suffix ending in ".fifo" makes a FIFO queue. It
// returns the queue URL.
func CreateQueue(t testing.TB, client *sqs.Client, suffix string) string {
	t.Helper()
	name := queueName(t.Name(), suffix)
	in := &sqs.CreateQueueInput{QueueName: aws.String(name)}
	if strings.HasSuffix(name, ".fifo") {
		in.Attributes = map[string]string{string(types.QueueAttributeNameFifoQueue): "true"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := client.CreateQueue(ctx, in)
	if err != nil {
		t.Fatalf("sqstest: create queue %q: %v", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
			t.Errorf("sqstest: delete queue %q: %v", name, err)
		}
	})
	return url
}

// queueName makes a valid queue name ([A-Za-z0-9_-], at most 80 characters
// including a ".fifo" suffix) from a test name.
func queueName(testName, suffix string) string {
	fifo := strings.HasSuffix(suffix, ".fifo")
	suffix = strings.TrimSuffix(suffix, ".fifo")
	var b strings.Builder
	for _, r := range testName + "_" + suffix {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	limit := 80
	if fifo {
		limit -= len(".fifo")
	}
	if len(name) > limit {
		name = name[len(name)-limit:]
	}
	if fifo {
		name += ".fifo"
	}
	return name
}

// start starts the server once; later calls return the first call's result.
func (s *server) start() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		s.endpoint, s.err = s.launch()
	}
	return s.endpoint, s.err
}

func (s *server) launch() (string, error) {
	dir, err := packageDir()
	if err != nil {
		return "", err
	}
	return s.launchIn(dir)
}

// launchIn starts the server installed in dir/node_modules.
func (s *server) launchIn(dir string) (string, error) {
	pkg := filepath.Join(dir, "node_modules", "local-aws-sqs", "package.json")
	if _, err := os.Stat(pkg); err != nil {
		return "", fmt.Errorf("local-aws-sqs is not installed (%s missing): run `npm ci --prefix %s`", pkg, dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("node (needed to run local-aws-sqs) not found on PATH: %w", err)
	}

	ready := newReadyWriter()
	stderr := &tailBuffer{max: 8 << 10}
	cmd := exec.Command(node, "-e", serverScript)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SQSTEST_DIR="+dir)
	cmd.Stdout = ready
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", fmt.Errorf("stdin pipe for local-aws-sqs: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start local-aws-sqs with %s: %w", node, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.stdin, s.exited = cmd, stdin, exited

	fail := func(err error) (string, error) {
		_ = s.stopLocked()
		return "", fmt.Errorf("%w; server stderr: %q", err, stderr.String())
	}
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	var port int
	select {
	case line := <-ready.line:
		p, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "listening "))
		if err != nil || !strings.HasPrefix(line, "listening ") {
			return fail(fmt.Errorf("local-aws-sqs printed %q, want \"listening <port>\"", line))
		}
		port = p
	case <-exited:
		return fail(fmt.Errorf("local-aws-sqs exited before listening (%v)", cmd.ProcessState))
	case <-timer.C:
		return fail(fmt.Errorf("local-aws-sqs did not listen within %v", startTimeout))
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitAccepting(addr, timer.C, exited); err != nil {
		return fail(err)
	}
	return "http://" + addr, nil
}

// waitAccepting dials addr until it accepts a connection, the deadline
// passes or the server exits. The server prints its port only after listen
// returned, so the first dial normally succeeds; the loop guards against a
// slow event loop rather than being the main wait.
func waitAccepting(addr string, deadline <-chan time.Time, exited <-chan struct{}) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-tick.C:
		case <-exited:
			return fmt.Errorf("local-aws-sqs exited while starting: %w", err)
		case <-deadline:
			return fmt.Errorf("local-aws-sqs at %s does not accept connections: %w", addr, err)
		}
	}
}

func (s *server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

// stopLocked closes the server's stdin (it exits on EOF) and waits for it,
// killing it if it does not exit in time.
func (s *server) stopLocked() error {
	if s.cmd == nil {
		return nil
	}
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	_ = s.stdin.Close()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case <-exited:
		return nil
	case <-timer.C:
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("kill local-aws-sqs: %w", err)
		}
		<-exited
		return errors.New("local-aws-sqs did not exit on stdin EOF; killed it")
	}
}

// packageDir returns this package's directory, which holds package.json and
// node_modules: internal/testkit/sqstest under the directory of go.mod above the
// working directory (go test runs in the tested package's directory).
func packageDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "internal", "testkit", "sqstest"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory; cannot find node_modules")
		}
		dir = parent
	}
}

// readyWriter is the server's stdout: it hands the first line to line and
// discards the rest.
type readyWriter struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	line chan string
}

func newReadyWriter() *readyWriter { return &readyWriter{line: make(chan string, 1)} }

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.line <- string(w.buf[:i])
		w.sent, w.buf = true, nil
	}
	return len(p), nil
}

// tailBuffer keeps the last max bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
