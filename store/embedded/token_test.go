package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// TestTokenKeySealed: a store opened with secrets from the start never
// writes the key release tokens are derived from to its file; a token
// minted before a restart is the event's after it, across a rotation of
// the secrets; a secret that does not open the key fails Open.
func TestTokenKeySealed(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	h := newTokenKeyHarness(t, dir)
	s := h.mustOpen("old-secret")
	key := bytes.Clone(s.tokens.key)
	e := h.insert(s)
	h.closeStore(s)
	for _, step := range []struct {
		name    string
		secrets []string
	}{
		{"Created", nil},
		{"Reopened", []string{"old-secret"}},
		{"Rotated", []string{"new-secret", "old-secret"}},
		{"OldSecretDropped", []string{"new-secret"}},
	} {
		if step.secrets != nil {
			s := h.mustOpen(step.secrets...)
			h.check(ctx, s, e, step.name)
			h.closeStore(s)
		}
		if h.fileHolds(key) {
			t.Fatalf("%s: the store file holds the release-token key in clear", step.name)
		}
	}
	if _, err := h.open("another-secret"); !errors.Is(err, ErrTokenKeySealed) {
		t.Fatalf("Open with a secret that does not open the key: %v, want ErrTokenKeySealed", err)
	}
	// Without secrets the sealed key is not used: no tokens are derived,
	// and the sealed key stays as it is.
	s = h.mustOpen()
	if got := s.ReleaseToken(e.ID); got != "" {
		t.Fatalf("ReleaseToken without secrets %q, want none", got)
	}
	h.closeStore(s)
	s = h.mustOpen("new-secret")
	h.check(ctx, s, e, "after an open without secrets")
	h.closeStore(s)
}

// TestTokenKeySealedFromClear: the key of a store an older version made
// (in clear) is sealed at the first open with secrets, and the tokens of
// its events stay theirs.
func TestTokenKeySealedFromClear(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	h := newTokenKeyHarness(t, dir)
	s := h.mustOpen()
	key := bytes.Clone(s.tokens.key)
	e := h.insert(s)
	h.closeStore(s)
	s = h.mustOpen("secret")
	h.check(ctx, s, e, "sealed")
	if err := s.db.View(func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bMeta).Get(keyTokenKey); bytes.Contains(raw, key) || !isSealedTokenKey(raw) {
			t.Fatalf("stored token key %x, want it sealed", raw)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.closeStore(s)
}

type tokenKeyHarness struct {
	t   *testing.T
	dir string
}

func newTokenKeyHarness(t *testing.T, dir string) *tokenKeyHarness {
	return &tokenKeyHarness{t: t, dir: dir}
}

func (h *tokenKeyHarness) open(secrets ...string) (*Store, error) {
	var opts Options
	for _, s := range secrets {
		opts.TokenKeySecrets = append(opts.TokenKeySecrets, []byte(s))
	}
	return Open(h.dir, opts)
}

func (h *tokenKeyHarness) mustOpen(secrets ...string) *Store {
	h.t.Helper()
	s, err := h.open(secrets...)
	if err != nil {
		h.t.Fatalf("Open with %q: %v", secrets, err)
	}
	return s
}

func (h *tokenKeyHarness) closeStore(s *Store) {
	h.t.Helper()
	if err := s.Close(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *tokenKeyHarness) fileHolds(b []byte) bool {
	h.t.Helper()
	raw, err := os.ReadFile(filepath.Join(h.dir, fileName))
	if err != nil {
		h.t.Fatal(err)
	}
	return bytes.Contains(raw, b)
}

// insert stores an event with s's token for it (a row that keeps the
// token as derived).
func (h *tokenKeyHarness) insert(s *Store) *model.Event {
	h.t.Helper()
	at := time.Date(2030, 1, 1, 3, 0, 0, 0, time.UTC)
	e := &model.Event{
		ID: model.EventID(model.FireID("sch_a", 1, at), 0), TenantID: "ten_a", ScheduleID: "sch_a",
		FireID: model.FireID("sch_a", 1, at), FireTime: at, Count: 1, LaunchAt: at,
		Target:  model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/hook"},
		Payload: json.RawMessage(`{}`), MaxAttempts: 3, Status: model.EventPending, CreatedAt: at, UpdatedAt: at,
	}
	e.ReleaseToken = s.ReleaseToken(e.ID)
	if n, err := s.EventInsertMany(h.t.Context(), []*model.Event{e}); err != nil || n != 1 {
		h.t.Fatalf("EventInsertMany: %d, %v", n, err)
	}
	return e
}

func (h *tokenKeyHarness) check(ctx context.Context, s *Store, e *model.Event, when string) {
	h.t.Helper()
	if got := s.ReleaseToken(e.ID); got != e.ReleaseToken {
		h.t.Fatalf("%s: ReleaseToken %q, want the one minted first, %q", when, got, e.ReleaseToken)
	}
	got, err := s.EventGetByID(ctx, e.ID)
	if err != nil || got.ReleaseToken != e.ReleaseToken {
		h.t.Fatalf("%s: stored event's token %v, %v; want %q", when, got, err, e.ReleaseToken)
	}
}
