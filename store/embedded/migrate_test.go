package embedded

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// storeWithTenant makes a store of the current layout in a new directory
// holding one tenant, closed, and returns the directory.
func storeWithTenant(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.TenantCreate(t.Context(), &model.Tenant{ID: "t1", Name: "one"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editFile runs fn on the store file of dir in a write transaction.
func editFile(t *testing.T, dir string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, fileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// setLayout records layout in dir's store.
func setLayout(t *testing.T, dir string, layout int) {
	t.Helper()
	editFile(t, dir, func(tx *bolt.Tx) error { return putLayout(tx, layout) })
}

// recordedLayout returns the layout dir's store records, -1 if none.
func recordedLayout(t *testing.T, dir string) int {
	t.Helper()
	layout := -1
	editFile(t, dir, func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bMeta).Get(keyLayout); len(raw) == 4 {
			layout = int(binary.BigEndian.Uint32(raw))
		}
		return nil
	})
	return layout
}

// stepLog makes migrations that record their runs in ran, each writing a
// key of its own to the meta bucket; failAt's fails.
type stepLog struct {
	ran    []int
	failAt int
}

func (l *stepLog) steps(from ...int) []migration {
	var out []migration
	for _, f := range from {
		out = append(out, migration{from: f, run: func(db *bolt.DB, _ *tokenKey) error {
			l.ran = append(l.ran, f)
			if f == l.failAt {
				return errors.New("boom")
			}
			return db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bMeta).Put([]byte{'m', byte(f)}, []byte{1})
			})
		}})
	}
	return out
}

// A directory of a layout that migrations lead from is brought to the
// current one by them, in order, and keeps its data; the next Open runs
// none.
func TestOpenRunsMigrations(t *testing.T) {
	dir := storeWithTenant(t)
	var log stepLog
	s, err := open(dir, Options{}, layoutCurrent+2, log.steps(layoutCurrent, layoutCurrent+1))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{layoutCurrent, layoutCurrent + 1}; !slices.Equal(log.ran, want) {
		t.Errorf("migrations run: %v, want %v", log.ran, want)
	}
	if tn, err := s.TenantGet(t.Context(), "t1"); err != nil || tn.Name != "one" {
		t.Errorf("tenant after the migrations: %+v, %v", tn, err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, f := range log.ran {
			if tx.Bucket(bMeta).Get([]byte{'m', byte(f)}) == nil {
				t.Errorf("migration from %d: its write is not in the store", f)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := recordedLayout(t, dir); got != layoutCurrent+2 {
		t.Errorf("recorded layout %d, want %d", got, layoutCurrent+2)
	}
	log.ran = nil
	s, err = open(dir, Options{}, layoutCurrent+2, log.steps(layoutCurrent, layoutCurrent+1))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if len(log.ran) != 0 {
		t.Errorf("migrations run again on a migrated directory: %v", log.ran)
	}
}

// A migration that fails fails Open with the layouts before it recorded;
// the next Open resumes at it.
func TestOpenResumesFailedMigration(t *testing.T) {
	dir := storeWithTenant(t)
	log := stepLog{failAt: layoutCurrent + 1}
	_, err := open(dir, Options{}, layoutCurrent+2, log.steps(layoutCurrent, layoutCurrent+1))
	if !errors.Is(err, model.ErrUnavailable) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Open with a failing migration: %v, want ErrUnavailable and its error", err)
	}
	if got := recordedLayout(t, dir); got != layoutCurrent+1 {
		t.Errorf("recorded layout %d after the failure, want %d", got, layoutCurrent+1)
	}
	log = stepLog{}
	s, err := open(dir, Options{}, layoutCurrent+2, log.steps(layoutCurrent, layoutCurrent+1))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if want := []int{layoutCurrent + 1}; !slices.Equal(log.ran, want) {
		t.Errorf("migrations run on resuming: %v, want %v", log.ran, want)
	}
}

// A new directory records the current layout and runs no migration.
func TestOpenNewRecordsLayout(t *testing.T) {
	dir := t.TempDir()
	var log stepLog
	s, err := open(dir, Options{}, layoutCurrent+1, log.steps(layoutCurrent))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if len(log.ran) != 0 {
		t.Errorf("migrations run on a new directory: %v", log.ran)
	}
	if got := recordedLayout(t, dir); got != layoutCurrent+1 {
		t.Errorf("recorded layout %d, want %d", got, layoutCurrent+1)
	}
}

// A directory of an earlier layout that no migration leads from is
// refused, saying what to do, and left as it was; so is one with data and
// no recorded layout (the first layouts recorded none).
func TestOpenRefusesOlderLayout(t *testing.T) {
	for _, c := range []struct {
		name            string
		layout, current int
		from            []int // the migrations' layouts
	}{
		{name: "PreviousLayout", layout: layoutCurrent - 1, current: layoutCurrent},
		{name: "FirstLayout", layout: -1, current: layoutCurrent},
		{name: "GapInMigrations", layout: layoutCurrent, current: layoutCurrent + 2, from: []int{layoutCurrent + 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := storeWithTenant(t)
			if c.layout < 0 {
				editFile(t, dir, func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Delete(keyLayout) })
			} else {
				setLayout(t, dir, c.layout)
			}
			var log stepLog
			_, err := open(dir, Options{}, c.current, log.steps(c.from...))
			if !errors.Is(err, model.ErrUnavailable) {
				t.Fatalf("Open: %v, want ErrUnavailable", err)
			}
			for _, want := range []string{dir, "older schedulerd", "-data-dir"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open: %q does not say %q", err, want)
				}
			}
			if len(log.ran) != 0 {
				t.Errorf("migrations run: %v", log.ran)
			}
			if got := recordedLayout(t, dir); got != c.layout {
				t.Errorf("recorded layout %d after the refusal, want %d", got, c.layout)
			}
		})
	}
}

// Rows of codecs the store does not write (the JSON and earlier binary
// forms of schedules, fires and events) are not read.
func TestDecodersRefuseOtherCodecs(t *testing.T) {
	var codes memCodes
	jsonRow := []byte(`{"id":"x","tenantId":"t"}`) // a whole row of the JSON form
	for _, raw := range [][]byte{jsonRow, nil, {0x01, 0, 0}, {0x02, 0, 0}} {
		if sc, err := decodeSchedule([]byte("x"), raw, &codes); err == nil {
			t.Errorf("schedule row %q: decoded %+v", raw, sc)
		}
	}
	for _, raw := range [][]byte{jsonRow, nil, {0x01, 0, 0}} {
		if f, err := decodeFire([]byte("x"), raw); err == nil {
			t.Errorf("fire row %q: decoded %+v", raw, f)
		}
		if e, err := decodeEvent(raw); err == nil {
			t.Errorf("event row %q: decoded %+v", raw, e)
		}
	}
}
