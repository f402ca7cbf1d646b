package master_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// GET /openapi.yaml serves the repository's openapi.yaml as it is, without
// an API key.
func TestServesOpenAPIDocument(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	for _, key := range []string{"", "not-a-key"} {
		req, err := http.NewRequest(http.MethodGet, h.url+"/openapi.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("key %q: status %d: %s", key, resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/yaml" {
			t.Errorf("key %q: Content-Type %q, want application/yaml", key, ct)
		}
		if !bytes.Equal(body, want) {
			t.Errorf("key %q: body (%d bytes) is not openapi.yaml (%d bytes)", key, len(body), len(want))
		}
	}
}
