package ui_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/ui"
)

func TestHandlerServesTheConsole(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/ui", ui.Handler()))
	defer srv.Close()
	cases := []struct {
		path, contentType string
		status            int
	}{
		{"/ui/", "text/html", http.StatusOK},
		{"/ui/app.js", "text/javascript", http.StatusOK},
		{"/ui/cron.js", "text/javascript", http.StatusOK},
		{"/ui/style.css", "text/css", http.StatusOK},
		{"/ui/nope.js", "", http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if ct := resp.Header.Get("Content-Type"); c.contentType != "" && !strings.HasPrefix(ct, c.contentType) {
				t.Errorf("Content-Type %q, want %s", ct, c.contentType)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("Content-Security-Policy %q does not keep the page to its own origin", csp)
			}
		})
	}
	resp, err := http.Post(srv.URL+"/ui/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: status %d, want 405", resp.StatusCode)
	}
}

// The console loads nothing from another origin: no CDN, no fonts, no
// analytics. Every URL in its files is relative or names this API.
func TestNoThirdPartyURLs(t *testing.T) {
	abs := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := filepath.WalkDir("static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		for _, m := range abs.FindAllString(string(b), -1) {
			// The SVG namespace is a name, not a request.
			if m == "http://www.w3.org" {
				continue
			}
			t.Errorf("%s refers to %s", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
