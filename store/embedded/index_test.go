package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var allEventStatuses = []model.EventStatus{
	model.EventPending, model.EventScheduled, model.EventDelivering, model.EventDelivered,
	model.EventReleased, model.EventRetrying, model.EventDead, model.EventCancelled,
}

// TestEventIndexesMatchRows starts from a data directory in layout 1 (due
// and policy keys for every event in every status), reopens it (which
// migrates it), adds events, drives them all through random transitions,
// claims and retention deletes, and checks after the migration and at the
// end that every event index holds exactly the keys derived from the rows:
// the due index only waiting events, the policy index only unfinished ones,
// by class. Set EMBEDDED_TEST_SEED to vary the run.
func TestEventIndexesMatchRows(t *testing.T) {
	seed := uint64(1)
	if v := os.Getenv("EMBEDDED_TEST_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("EMBEDDED_TEST_SEED: %v", err)
		}
	}
	t.Logf("seed %d (set EMBEDDED_TEST_SEED to change)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx := t.Context()
	dir := t.TempDir()

	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const legacy, added = 200, 100
	var events []*model.Event
	for i := range legacy + added {
		e := &model.Event{
			ID: fmt.Sprintf("s%d.1.%d", i%7, i), TenantID: fmt.Sprintf("t%d", i%3),
			ScheduleID: fmt.Sprintf("s%d", i%7), FireID: fmt.Sprintf("s%d.1", i%7),
			LaunchAt: base.Add(time.Duration(rng.IntN(600)) * time.Second),
			Shard:    rng.IntN(4), Status: model.EventPending, CreatedAt: base, UpdatedAt: base,
		}
		if rng.IntN(3) > 0 {
			e.PolicyID = fmt.Sprintf("p%d", rng.IntN(2))
		}
		if i < legacy {
			e.Status = allEventStatuses[rng.IntN(len(allEventStatuses))]
			e.Fence = int64(rng.IntN(3))
			if e.Status.Finished() {
				at := base.Add(time.Duration(rng.IntN(60)) * time.Second)
				e.FinishedAt = &at
			}
		}
		events = append(events, e)
	}
	writeLayout1(t, dir, events[:legacy])

	// Several migration transactions, the last one short.
	s, err := Open(dir, Options{migrateChunk: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	checkMigrated(t, s)
	checkEventIndexes(t, s)
	if _, err := s.EventInsertMany(ctx, events[legacy:]); err != nil {
		t.Fatal(err)
	}

	fence := int64(10)
	for step := range 3_000 {
		switch r := rng.IntN(100); {
		case r < 5:
			fence++
			if _, err := s.EventClaimDue(ctx, &store.EventClaimParams{
				Shard: rng.IntN(4), Fence: fence, DueBefore: base.Add(time.Duration(rng.IntN(700)) * time.Second), Limit: 1 + rng.IntN(20),
			}); err != nil {
				t.Fatalf("step %d: claim: %v", step, err)
			}
		case r < 7:
			if _, err := s.EventDeleteFinishedBefore(ctx, base.Add(time.Duration(rng.IntN(120))*time.Second), 1+rng.IntN(10)); err != nil {
				t.Fatalf("step %d: delete finished: %v", step, err)
			}
		default:
			e, err := s.EventGetByID(ctx, events[rng.IntN(len(events))].ID)
			if err != nil {
				continue // deleted by retention
			}
			to := allEventStatuses[rng.IntN(len(allEventStatuses))]
			tr := store.EventTransition{ID: e.ID, From: e.Status, To: to, At: base}
			if to.Finished() {
				at := base.Add(time.Duration(rng.IntN(120)) * time.Second)
				tr.FinishedAt = &at
			}
			if rng.IntN(4) == 0 {
				tr.LaunchAt = base.Add(time.Duration(rng.IntN(600)) * time.Second)
			}
			res, err := s.EventTransition(ctx, []store.EventTransition{tr})
			if err != nil || res[0] != nil {
				t.Fatalf("step %d: transition %s %s -> %s: %v %v", step, e.ID, e.Status, to, err, res)
			}
		}
	}
	checkEventIndexes(t, s)
}

// writeLayout1 creates a store in dir holding events as layout 1 wrote them:
// due and policy keys (by status) for every event.
func writeLayout1(t *testing.T, dir string, events []*model.Event) {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bMeta).Delete(keyLayout); err != nil {
			return err
		}
		if err := tx.DeleteBucket(bEvPolicy); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bEvPolicyLayout1); err != nil {
			return err
		}
		for _, e := range events {
			raw, err := encodeEvent(e)
			if err != nil {
				return err
			}
			puts := [][3][]byte{
				{bEvents, []byte(e.ID), raw},
				{bEvDue, dueKey(nil, e), fenceValue(e)},
				{bEvFire, fireKey(e), nil},
				{bEvSched, schedKey(e), nil},
				{bEvTenant, tenantKey(e), nil},
			}
			if e.PolicyID != "" {
				puts = append(puts, [3][]byte{bEvPolicyLayout1, append(appendTime(strKey(e.PolicyID, string(e.Status)), e.LaunchAt), e.ID...), nil})
			}
			if retained(e) {
				puts = append(puts, [3][]byte{bEvFinished, finishedKey(e), nil})
			}
			for _, p := range puts {
				if err := tx.Bucket(p[0]).Put(p[1], p[2]); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesNewerLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bMeta).Put(keyLayout, binary.BigEndian.AppendUint32(nil, layoutCurrent+1))
	}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	_, err = Open(dir, Options{})
	if !errors.Is(err, model.ErrUnavailable) || !strings.Contains(err.Error(), "newer schedulerd") {
		t.Fatalf("Open of a newer layout: got %v, want ErrUnavailable naming the newer version", err)
	}
}

// checkEventIndexes compares every event index with the keys (and, for the
// due index, the fence values) that the rows call for.
func checkEventIndexes(t *testing.T, s *Store) {
	t.Helper()
	want := map[string]map[string]string{}
	for _, b := range [][]byte{bEvDue, bEvFire, bEvSched, bEvTenant, bEvPolicy, bEvFinished} {
		want[string(b)] = map[string]string{}
	}
	add := func(b, k, v []byte) { want[string(b)][string(k)] = string(v) }
	err := s.db.View(func(tx *bolt.Tx) error {
		rows := 0
		if err := tx.Bucket(bEvents).ForEach(func(_, raw []byte) error {
			e, err := decodeEvent(raw)
			if err != nil {
				return err
			}
			rows++
			if dueIndexed(e.Status) {
				add(bEvDue, dueKey(nil, e), fenceValue(e))
			}
			if policyIndexed(e) {
				add(bEvPolicy, policyKey(e), nil)
			}
			if retained(e) {
				add(bEvFinished, finishedKey(e), nil)
			}
			add(bEvFire, fireKey(e), nil)
			add(bEvSched, schedKey(e), nil)
			add(bEvTenant, tenantKey(e), nil)
			return nil
		}); err != nil {
			return err
		}
		if rows == 0 {
			t.Error("no events left to check")
		}
		for name, keys := range want {
			got := 0
			if err := tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
				got++
				wv, ok := keys[string(k)]
				switch {
				case !ok:
					t.Errorf("%s: key %q has no row that calls for it", name, k)
				case name == string(bEvDue) && !bytes.Equal(v, []byte(wv)):
					t.Errorf("%s: key %q holds fence %x, want %x", name, k, v, wv)
				}
				return nil
			}); err != nil {
				return err
			}
			if got != len(keys) {
				t.Errorf("%s: %d keys, want %d", name, got, len(keys))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An empty directory of layout 1 is migrated too: its layout-1 bucket goes
// and the current version is recorded.
func TestOpenMigratesEmptyLayout1(t *testing.T) {
	dir := t.TempDir()
	writeLayout1(t, dir, nil)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	checkMigrated(t, s)
}

// checkMigrated checks that layout 1's bucket is gone and the current
// layout is recorded.
func checkMigrated(t *testing.T, s *Store) {
	t.Helper()
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bEvPolicyLayout1) != nil {
			t.Errorf("bucket %s is still there after the migration", bEvPolicyLayout1)
		}
		if raw := tx.Bucket(bMeta).Get(keyLayout); len(raw) != 4 || binary.BigEndian.Uint32(raw) != layoutCurrent {
			t.Errorf("recorded layout %x, want %d", raw, layoutCurrent)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
