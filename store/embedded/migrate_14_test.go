package embedded

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// layout14Store writes a store of layout 14: one-offs whose rows hold
// their events, and fires' events of several tenants, policies,
// priorities and statuses, with the due entries of waiting events keyed
// without their lanes (shard, status, launch time, row key).
func layout14Store(t *testing.T) string {
	return waitingStore(t, 14, func(k []byte, n int, rk []byte) []byte {
		return append(append(append([]byte(nil), k[:5]...), k[5+n:5+n+timeLen]...), rk...)
	})
}

// waitingStore writes a store of layout from, with the keys of the due
// entries of waiting events made by old of their keys in layout 16 (the
// current ones without a schedule after a policy's lane), the length of
// their lanes and their row keys, and without ev_due_heads.
func waitingStore(t *testing.T, from int, old func(k []byte, n int, rk []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	w := &oneWorld{r: rand.New(rand.NewPCG(1, 1))}
	var items []store.ScheduleNew
	for i := range 12 {
		items = append(items, w.oneOff(fmt.Sprintf("t%d", i%3), []string{"", "p1"}[i%2]))
	}
	if errs, err := s.ScheduleCreateMany(ctx, items); err != nil || firstErr(nil, errs) != nil {
		t.Fatalf("ScheduleCreateMany: %v %v", err, errs)
	}
	var events []*model.Event
	prios := []int{0, 5, -3, 1000, -500, 1 << 40}
	for _, size := range []int{20, 7, 30} {
		fn := w.fanOut(fmt.Sprintf("t%d", size%4), size)
		for i, e := range fn.Events {
			e.PolicyID = []string{"", "p1", "p2"}[i%3]
			e.Priority = prios[i%len(prios)]
			if i%4 == 1 {
				e.Status, e.Attempts = model.EventRetrying, 1
			}
		}
		events = append(events, fn.Events...)
	}
	// Loose events (ids not of their fire's form), whose index is in
	// their rows only.
	for i, e := range w.fanOut("t1", 4).Events {
		e.ID = fmt.Sprintf("loose-%d", i)
		e.Index = 3 + i
		events = append(events, e)
	}
	if _, err := s.EventInsertMany(ctx, events); err != nil {
		t.Fatal(err)
	}
	// Some scheduled under a fence, whose entries keep their layout.
	if _, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: 1, Fence: 1, DueBefore: base().Add(24 * time.Hour), Limit: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waiting := 0
	editFile(t, dir, func(tx *bolt.Tx) error {
		due := tx.Bucket(bEvDue)
		var keys [][]byte
		if err := due.ForEach(func(k, _ []byte) error {
			if k[4] != statusCodes[model.EventScheduled] {
				keys = append(keys, k)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, k := range keys {
			lane, sched, err := dueSplit(k)
			if err != nil {
				return err
			}
			rk, err := dueRowKey(k)
			if err != nil {
				return err
			}
			v := due.Get(k)
			ok := old(append(k[:lane:lane], k[sched:]...), lane-5, rk)
			if err := due.Delete(k); err != nil {
				return err
			}
			if err := due.Put(ok, v); err != nil {
				return err
			}
			waiting++
		}
		if err := tx.DeleteBucket(bEvDueHeads); err != nil {
			return err
		}
		return putLayout(tx, from)
	})
	if waiting < 40 {
		t.Fatalf("%d waiting due entries written, want more", waiting)
	}
	return dir
}

// A directory of layout 14 opens as the current layout with the due
// entries of its waiting events keyed by lane, also when an earlier run of
// the migration stopped in either pass.
func TestMigrateDueLanes(t *testing.T) {
	testDueRewrite(t, dueLanes, 14, layout14Store)
}

// testDueRewrite opens a store that makeStore writes in layout from, after
// no earlier run of m, one that stopped collecting and one that stopped
// moving, and checks that it ends in the current layout with every index
// entry as the current layout makes it and every waiting event claimable.
func testDueRewrite(t *testing.T, m dueRewrite, from int, makeStore func(*testing.T) string) {
	crash := errors.New("crash")
	for _, tc := range []struct {
		name string
		// run is the earlier run, which fails.
		run func(db *bolt.DB, keys *tokenKey) error
	}{
		{"Whole", nil},
		{"StoppedCollecting", func(db *bolt.DB, _ *tokenKey) error {
			if err := db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket(m.scratch)
				if err != nil {
					return err
				}
				return b.Put([]byte("left over"), []byte{0})
			}); err != nil {
				return err
			}
			return crash
		}},
		{"StoppedMoving", func(db *bolt.DB, keys *tokenKey) error {
			if err := m.collectAll(db, keys, 7); err != nil {
				return err
			}
			for range 3 {
				if _, err := m.moveChunk(db, 5); err != nil {
					return err
				}
			}
			return crash
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := makeStore(t)
			if tc.run != nil {
				if _, err := open(dir, Options{}, from+1, []migration{{from: from, run: tc.run}}); !errors.Is(err, crash) {
					t.Fatalf("the earlier run: %v, want the crash", err)
				}
				if got := recordedLayout(t, dir); got != from {
					t.Fatalf("recorded layout %d after the crash, want %d", got, from)
				}
			}
			s, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkEventIndexes(t, s)
			if err := CheckOneRecords(s); err != nil {
				t.Error(err)
			}
			if err := s.db.View(func(tx *bolt.Tx) error {
				if tx.Bucket(m.scratch) != nil || tx.Bucket(bMeta).Get(m.scratch) != nil {
					t.Error("the migration's bucket or mark is left")
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			// Every waiting event is claimable from its lane.
			claimed := 0
			for shard := range 3 {
				got, err := s.EventClaimDue(t.Context(), &store.EventClaimParams{Shard: shard, Fence: 2, DueBefore: base().Add(24 * time.Hour), Limit: 1000})
				if err != nil {
					t.Fatal(err)
				}
				claimed += len(got)
			}
			if want := 12 + 20 + 7 + 30 + 4; claimed != want {
				t.Errorf("claimed %d events after the migration, want %d", claimed, want)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if got := recordedLayout(t, dir); got != layoutCurrent {
				t.Errorf("recorded layout %d, want %d", got, layoutCurrent)
			}
		})
	}
}
