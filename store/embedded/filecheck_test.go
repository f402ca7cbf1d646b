package embedded_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// A second process on the same directory is told the directory is locked,
// not that the store timed out.
func TestOpenLockedDirectorySaysLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	newStoreIn(t, dir)
	_, err := embedded.Open(dir, embedded.Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, embedded.ErrLocked) || !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("second Open: got %v, want ErrLocked and ErrUnavailable", err)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "locked by another process") {
		t.Fatalf("second Open: %q does not name the locked directory %s", msg, dir)
	}
}

// writeStore leaves a closed store in a new directory holding enough rows
// to span many pages, and returns the directory.
func writeStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// Without the reserve, so that half the file cuts into the data.
	s, err := embedded.Open(dir, embedded.Options{ReserveBytes: -1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	for i := range 200 {
		ten := &model.Tenant{ID: fmt.Sprintf("t%03d", i), Name: strings.Repeat("n", 200)}
		if err := s.TenantCreate(t.Context(), ten); err != nil {
			t.Fatalf("TenantCreate: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return dir
}

// A store file cut short used to end the process with SIGBUS when bbolt
// touched the missing pages; Open must refuse it with an error that names
// the file and says what to do.
func TestOpenTruncatedFile(t *testing.T) {
	t.Parallel()
	src := writeStore(t)
	full, err := os.ReadFile(embedded.File(src))
	if err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize()
	// bbolt grows the file ahead of use with zeros; the pages in use end
	// with the last one holding data.
	used := len(full)
	for used > 0 && allZero(full[used-page:used]) {
		used -= page
	}
	if used < 8*page {
		t.Fatalf("store file uses %d bytes; the test needs at least 8 pages", used)
	}
	for _, size := range []int{used - 1, used - page, used / 2, len(full) / 2, 4 * page, 2 * page, page + 100, 100} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			dir := t.TempDir()
			path := embedded.File(dir)
			if err := os.WriteFile(path, full[:size], 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := embedded.Open(dir, embedded.Options{})
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open of a file truncated to %d of %d bytes succeeded", size, len(full))
			}
			assertDamaged(t, err, path)
		})
	}
}

// A file that is not a store at all is refused the same way.
func TestOpenForeignFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := embedded.File(dir)
	junk := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := embedded.Open(dir, embedded.Options{})
	assertDamaged(t, err, path)
}

// The check must not refuse an intact store, whichever meta page is newer.
func TestOpenIntactFileAfterCheck(t *testing.T) {
	t.Parallel()
	dir := writeStore(t)
	for i := range 2 {
		s := newStoreIn(t, dir)
		if _, err := s.TenantGet(t.Context(), "t199"); err != nil {
			t.Fatalf("TenantGet after reopen: %v", err)
		}
		if err := s.TenantCreate(t.Context(), &model.Tenant{ID: fmt.Sprintf("x%d", i), Name: "x"}); err != nil {
			t.Fatalf("TenantCreate: %v", err)
		}
		_ = s.Close()
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func assertDamaged(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, embedded.ErrDamaged) {
		t.Fatalf("Open: got %v, want ErrDamaged", err)
	}
	msg := err.Error()
	for _, want := range []string{path, "restore it from a backup", "move it away"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Open error %q does not contain %q", msg, want)
		}
	}
}
