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
	buildAs(t, setup, work)
	docAddr, api := startServerAs(t, setup, work)

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

// TestREADMETour runs the README's tour as TestAPIWalkthrough runs the API
// walk-through: the server and the example consumer are built and started
// as its setup block says (the consumer with the signing secret the server
// wrote), each on a free port.
func TestREADMETour(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the tour needs %s: %v", tool, err)
		}
	}
	blocks := walkthroughBlocks(t, "../README.md", "## A 5-minute tour")
	if len(blocks) < 2 {
		t.Fatalf("README.md tour: want a setup sh block and command blocks, got %d blocks", len(blocks))
	}
	setup := blocks[0].text
	work := t.TempDir()
	buildAs(t, setup, work)
	docAddr, api := startServerAs(t, setup, work)

	line := regexp.MustCompile(`(?m)^((?:[A-Z_]+=(?:\$\([^)]*\)|\S+) )*)bin/consumer$`).FindStringSubmatch(setup)
	if line == nil {
		t.Fatalf("the setup block does not start bin/consumer:\n%s", setup)
	}
	var env []string
	docConsumer := ""
	for _, m := range regexp.MustCompile(`([A-Z_]+)=(\$\([^)]*\)|\S+)`).FindAllStringSubmatch(line[1], -1) {
		kv, k, v := m[0], m[1], m[2]
		switch {
		case k == "LISTEN_ADDR":
			docConsumer, v = v, "127.0.0.1:0"
		case strings.HasPrefix(v, "$(cat ") && strings.HasSuffix(v, ")"):
			b, err := os.ReadFile(filepath.Join(work, strings.TrimSuffix(strings.TrimPrefix(v, "$(cat "), ")")))
			if err != nil {
				t.Fatalf("%s: %v", kv, err)
			}
			v = strings.TrimSpace(string(b))
		}
		env = append(env, k+"="+v)
	}
	if docConsumer == "" {
		t.Fatalf("the setup block starts the consumer without LISTEN_ADDR:\n%s", setup)
	}
	consumer := startProc(t, work, "consumer", env, nil, regexp.MustCompile(`consumer listening on http://(\S+) `))

	runBlocks(t, work, blocks[1:], strings.NewReplacer("http://"+docAddr, api, docConsumer, consumer))
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

// startProc runs dir/bin/name from dir with env (KEY=value) and args, and
// returns the first submatch of ready in what it prints (stdout or stderr):
// where it listens.
func startProc(t *testing.T, dir, name string, env, args []string, ready *regexp.Regexp) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "bin", name), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	found := make(chan string, 1)
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
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
	case addr := <-found:
		return addr
	case err := <-done:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s %v exited before listening: %v\n%s", name, args, err, logs.String())
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s %v did not say where it listens\n%s", name, args, logs.String())
	}
	return ""
}

// buildAs runs the setup block's "go build -o bin/ PACKAGES" with dir/bin/
// as the output directory.
func buildAs(t *testing.T, setup, dir string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go build -o bin/ (\./cmd/schedulerd(?: \./\S+)*)$`).FindStringSubmatch(setup)
	if m == nil {
		t.Fatalf("the setup block does not build with `go build -o bin/ ./cmd/schedulerd ...`:\n%s", setup)
	}
	args := append([]string{"build", "-C", "..", "-o", filepath.Join(dir, "bin") + "/"}, strings.Fields(m[1])...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// startServerAs starts bin/schedulerd as the setup block's line does, on a
// free port instead of its -listen address (default 127.0.0.1:8080). It
// returns the address the block gives and the server's base URL.
func startServerAs(t *testing.T, setup, dir string) (docAddr, base string) {
	t.Helper()
	line := regexp.MustCompile(`(?m)^((?:[A-Z_]+=\S+ )*)bin/schedulerd((?: [^&#\n]*)?)(?:&|#.*)?$`).FindStringSubmatch(setup)
	if line == nil {
		t.Fatalf("the setup block does not start bin/schedulerd:\n%s", setup)
	}
	args := strings.Fields(line[2])
	docAddr = "127.0.0.1:8080"
	listen := false
	for i, a := range args {
		if (a == "-listen" || a == "--listen") && i+1 < len(args) {
			docAddr, args[i+1], listen = args[i+1], "127.0.0.1:0", true
		}
	}
	if !listen {
		args = append(args, "-listen", "127.0.0.1:0")
	}
	base = startProc(t, dir, "schedulerd", strings.Fields(line[1]), args, regexp.MustCompile(`listening on (http://\S+)`))
	return docAddr, base
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
