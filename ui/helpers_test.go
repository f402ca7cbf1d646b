package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
)

// chromeNames are the Chromium binaries a browser test can drive.
var chromeNames = []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"}

// chromePath finds a Chromium binary or skips the test, naming the
// binaries it looked for.
func chromePath(tb testing.TB) string {
	tb.Helper()
	for _, name := range chromeNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	tb.Skipf("browser test skipped: no Chromium binary on PATH (looked for %s; Debian: apt-get install chromium; scripts/test.sh installs it as root)",
		strings.Join(chromeNames, ", "))
	return ""
}

// env is one schedulerd started in process on the embedded store.
type env struct {
	tb   testing.TB
	app  *app.App
	base string
}

func startApp(tb testing.TB, ctx context.Context, dataDir string) *env {
	tb.Helper()
	vars := map[string]string{"SCHEDULER_LISTEN_ADDR": "127.0.0.1:0", "SCHEDULER_DATA_DIR": dataDir}
	cfg, err := app.ParseConfig(nil, func(k string) string { return vars[k] })
	if err != nil {
		tb.Fatal(err)
	}
	a, err := app.New(ctx, cfg, zerolog.Nop())
	if err != nil {
		tb.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = a.Shutdown(sctx)
	})
	return &env{tb: tb, app: a, base: "http://" + a.Addr()}
}

// call sends a JSON request and decodes the answer into out (if not nil).
// It returns the status.
func (e *env) call(method, path, key string, body any, out any) int {
	e.tb.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.tb.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		e.tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			e.tb.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

// must is call that fails the test on any status above 299.
func (e *env) must(method, path, key string, body any, out any) {
	e.tb.Helper()
	if st := e.call(method, path, key, body, out); st > 299 {
		e.tb.Fatalf("%s %s: status %d", method, path, st)
	}
}

// tenant creates a tenant and returns its id and a key.
func (e *env) tenant(name string) (id, key string) {
	e.tb.Helper()
	var t struct{ ID string }
	e.must(http.MethodPost, "/v1/tenants", e.app.AdminKey(), map[string]any{"name": name}, &t)
	var k struct{ Key string }
	e.must(http.MethodPost, "/v1/tenants/"+t.ID+"/keys", e.app.AdminKey(), nil, &k)
	return t.ID, k.Key
}

// consumer is an HTTP target on 127.0.0.1: on /ok it answers 200 and gives
// the token back through the release URL it was sent; on /fail it answers
// 500 while failing is set, else it behaves as /ok.
type consumer struct {
	url     string
	failing atomic.Bool
	mu      sync.Mutex
	errs    []string
}

func startConsumer(tb testing.TB) *consumer {
	tb.Helper()
	c := &consumer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	c.url = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(c.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return c
}

func (c *consumer) serve(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Release struct{ URL, Token string }
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/fail") && c.failing.Load() {
		http.Error(w, "consumer failing on purpose", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	go c.release(msg.Release.URL, msg.Release.Token)
}

// release gives the token back. The answer to the delivery may not have
// been recorded yet, so a 409 is retried a few times.
func (c *consumer) release(url, token string) {
	body := fmt.Sprintf(`{"token":%q}`, token)
	for i := 0; i < 50; i++ {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			if resp.StatusCode != http.StatusConflict {
				err = fmt.Errorf("release %s: status %d", url, resp.StatusCode)
			}
		}
		if err != nil {
			c.mu.Lock()
			c.errs = append(c.errs, err.Error())
			c.mu.Unlock()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// browser starts a headless Chromium (1280×800) and records what the page
// writes to the console as an error, and its uncaught exceptions. Entries of
// the browser's own log (such as a 401 answer to a wrong key) are not the
// page's errors.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func newBrowser(tb testing.TB, parent context.Context) *browser {
	tb.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromePath(tb)),
		chromedp.NoSandbox, // root in containers
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelA := chromedp.NewExecAllocator(parent, opts...)
	ctx, cancel := chromedp.NewContext(actx)
	tb.Cleanup(func() { cancel(); cancelA() })
	b := &browser{ctx: ctx}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		tb.Fatalf("start chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			// A refused request (the page's own 4xx answers) is logged by
			// the network; everything else that is an error fails the test,
			// such as a Content-Security-Policy violation.
			if m.IsException() || (m.Type == chromedp.ConsoleError && m.Source != "network") {
				b.mu.Lock()
				b.errors = append(b.errors, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

func (b *browser) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// run runs actions with a deadline, failing the test with what was tried.
func (b *browser) run(tb testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.Fatalf("%s: %v\npage: %s", what, err, b.describe())
	}
}

// describe returns the page's address and text, for a failure message.
func (b *browser) describe() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText.slice(0, 2000)`))
	if err != nil {
		return err.Error()
	}
	return s
}

// get runs one action that reads a value.
func get[T any](tb testing.TB, b *browser, what string, a chromedp.Action[T]) T {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	return v
}
