package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/store/embedded"
)

func embeddedConfig(t *testing.T, dir string) app.Config {
	t.Helper()
	cfg, err := app.ParseConfig([]string{"-data-dir", dir, "-listen", "127.0.0.1:0"}, func(string) string { return "" })
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return cfg
}

// An empty store file beside the secrets of an earlier start means the data
// was lost; New must stop and say so instead of starting an empty store.
func TestNewRefusesEmptyStoreWithSecrets(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"admin.key": "sk_admin_0123456789abcdef\n", "signing.secret": "0123456789abcdef0123\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db := embedded.File(dir)
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), embeddedConfig(t, dir), zerolog.Nop())
	if err == nil {
		_ = a.Shutdown(t.Context())
		t.Fatal("New started on an empty store file beside existing secrets")
	}
	for _, want := range []string{db, "restore", "move it away"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New error %q does not contain %q", err, want)
		}
	}
	if info, err := os.Stat(db); err != nil || info.Size() != 0 {
		t.Errorf("store file changed: %v, %v", info, err)
	}
}

// A truncated store file stops New with an error naming it (it used to
// crash the process when bbolt touched the missing pages).
func TestNewRefusesTruncatedStore(t *testing.T) {
	dir := t.TempDir()
	db := embedded.File(dir)
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	full, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, full[:os.Getpagesize()+100], 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), embeddedConfig(t, dir), zerolog.Nop())
	if err == nil {
		_ = a.Shutdown(t.Context())
		t.Fatal("New started on a truncated store file")
	}
	if !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "restore it from a backup") {
		t.Errorf("New error %q does not name %s and what to do", err, db)
	}
}
