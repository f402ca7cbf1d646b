package docs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The walk-through of docs/api.md is run as it is written: its first sh
// block says how to build and start the server and the consumer, and the
// sh blocks after it are the commands. The other blocks (no language)
// show each command block's output.

// TestAPIWalkthrough builds schedulerd, starts it as the walk-through's
// setup block says (on a free port, in a fresh directory) with a consumer
// that does what master/testdata/consumer.py does, and runs the command
// blocks in order in one bash. It fails when a command fails (the blocks
// run under set -e -o pipefail, and the documented curl calls that expect
// success use --fail) or when a block's output lacks an HTTP status its
// documented output shows.
func TestAPIWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walk-through needs %s: %v", tool, err)
		}
	}
	blocks := walkthroughBlocks(t, "api.md", "## Walk-through")
	if len(blocks) < 2 || blocks[0].lang != "sh" {
		t.Fatalf("docs/api.md walk-through: want a setup sh block and command blocks, got %d blocks", len(blocks))
	}
	setup := blocks[0].text
	work := t.TempDir()

	// Build as the setup block says, into the test's directory.
	build := regexp.MustCompile(`(?m)^go build -o bin/ (\./cmd/schedulerd)$`).FindStringSubmatch(setup)
	if build == nil {
		t.Fatalf("the setup block does not build with `go build -o bin/ ./cmd/schedulerd`:\n%s", setup)
	}
	if out, err := exec.Command("go", "build", "-C", "..", "-o", filepath.Join(work, "bin")+"/", build[1]).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// Start the server with the setup block's environment and flags, on a
	// free port instead of its address.
	line := regexp.MustCompile(`(?m)^((?:[A-Z_]+=\S+ )*)bin/schedulerd ([^&\n]*)&$`).FindStringSubmatch(setup)
	if line == nil {
		t.Fatalf("the setup block does not start bin/schedulerd in the background:\n%s", setup)
	}
	args := strings.Fields(line[2])
	docAddr := ""
	for i, a := range args {
		if (a == "-listen" || a == "--listen") && i+1 < len(args) {
			docAddr, args[i+1] = args[i+1], "127.0.0.1:0"
		}
	}
	if docAddr == "" {
		t.Fatalf("the setup block starts schedulerd without -listen:\n%s", setup)
	}
	api := startServer(t, work, strings.Fields(line[1]), args)

	// The consumer: appends each delivery to deliveries.jsonl, answers 200.
	if !strings.Contains(setup, "master/testdata/consumer.py") {
		t.Fatalf("the setup block does not start master/testdata/consumer.py:\n%s", setup)
	}
	py, err := os.ReadFile("../master/testdata/consumer.py")
	if err != nil {
		t.Fatal(err)
	}
	docConsumer := regexp.MustCompile(`\('127\.0\.0\.1', (\d+)\)`).FindSubmatch(py)
	if docConsumer == nil {
		t.Fatal("master/testdata/consumer.py: no ('127.0.0.1', PORT) address")
	}
	consumer := startConsumer(t, filepath.Join(work, "deliveries.jsonl"))

	replace := strings.NewReplacer("http://"+docAddr, api, "127.0.0.1:"+string(docConsumer[1]), consumer)
	runBlocks(t, work, blocks[1:], replace)
}

// block is one fenced block of a Markdown section.
type block struct {
	lang, text string
	line       int // of its opening fence
	output     string
}

// walkthroughBlocks returns the fenced blocks of the section of file that
// starts with heading: the sh blocks, each with the text of the unlabelled
// block after it (its documented output) as output.
func walkthroughBlocks(t *testing.T, file, heading string) []block {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, heading) })
	if start < 0 {
		t.Fatalf("%s: no section %q", file, heading)
	}
	var blocks []block
	var cur *block
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		if cur == nil && strings.HasPrefix(l, "## ") {
			break
		}
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(l, "```")), line: i + 1}
		case cur != nil && l == "```":
			switch {
			case cur.lang == "sh":
				blocks = append(blocks, *cur)
			case cur.lang == "" && len(blocks) > 0 && blocks[len(blocks)-1].output == "":
				blocks[len(blocks)-1].output = cur.text
			}
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: unclosed block", file, cur.line)
	}
	return blocks
}

// statusRE finds the HTTP statuses an output shows: a problem's "status",
// a status line of curl -i, or a -w '%{http_code}' line.
var statusRE = regexp.MustCompile(`"status":(\d{3})\b|HTTP/1\.1 (\d{3}) |(?m)^(\d{3})(?: |$)`)

func statuses(s string) []string {
	var out []string
	for _, m := range statusRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1]+m[2]+m[3])
	}
	return out
}

// runBlocks runs blocks in order in one bash in dir, with replace applied
// to their text, and checks each block's HTTP statuses against its
// documented output.
func runBlocks(t *testing.T, dir string, blocks []block, replace *strings.Replacer) {
	t.Helper()
	const marker = "@@walkthrough-block "
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for i, b := range blocks {
		fmt.Fprintf(&script, "echo '%s%d'\n%s", marker, i, replace.Replace(b.text))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()

	// The output of each block, by the markers.
	outs := make([]string, 0, len(blocks))
	for _, part := range strings.Split(stdout.String(), marker)[1:] {
		_, out, _ := strings.Cut(part, "\n")
		outs = append(outs, out)
	}
	if err != nil {
		n := len(outs) - 1
		if n < 0 {
			t.Fatalf("bash: %v\nstderr: %s", err, stderr.String())
		}
		t.Fatalf("the block at line %d fails (%v):\n%s\noutput:\n%s\nstderr:\n%s", blocks[n].line, err, blocks[n].text, outs[n], stderr.String())
	}
	if len(outs) != len(blocks) {
		t.Fatalf("%d of %d blocks ran\nstdout:\n%s", len(outs), len(blocks), stdout.String())
	}
	for i, b := range blocks {
		t.Logf("block at line %d:\n%s-->\n%s", b.line, b.text, outs[i])
		if want, got := statuses(b.output), statuses(outs[i]); !slices.Equal(want, got) {
			t.Errorf("the block at line %d answered the statuses %v, its documented output shows %v:\n%s\noutput:\n%s", b.line, got, want, b.text, outs[i])
		}
	}
}

// startServer runs bin/schedulerd from dir with env (KEY=value) and args
// and returns its base URL, from the line it prints when it listens.
func startServer(t *testing.T, dir string, env, args []string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "bin", "schedulerd"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	cmd.Stderr = &lockedWriter{w: &logs}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	select {
	case base := <-found:
		return base
	case err := <-done:
		t.Fatalf("schedulerd %v exited before listening: %v\n%s", args, err, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("schedulerd %v did not say where it listens\n%s", args, logs.String())
	}
	return ""
}

// startConsumer serves deliveries on 127.0.0.1 as
// master/testdata/consumer.py does: each body is appended to file as a
// line, and the answer is 200. It returns the host:port.
func startConsumer(t *testing.T, file string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = f.Write(append(body, '\n'))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
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
