package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/internal/testkit/smallfs"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// reserveEvents returns n pending events of shard 0, due at base.
func reserveEvents(fire string, n int, base time.Time) []*model.Event {
	es := make([]*model.Event, n)
	for i := range es {
		es[i] = &model.Event{
			ID: model.EventID(fire, i), TenantID: "t", ScheduleID: "s", FireID: fire,
			FireTime: base, Index: i, Count: n, LaunchAt: base,
			Target:  model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/hook"},
			Payload: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":"%0200d"}`, i, i)), MaxAttempts: 3,
			Status: model.EventPending, CreatedAt: base, UpdatedAt: base,
		}
	}
	return es
}

// deliverAll claims the due events of shard 0 under fence, 20 at a time,
// and takes each through a throttled delivery and its release, one write
// per step as the handler and the master make them. It returns how many
// were released and the first error.
func deliverAll(t *testing.T, s *Store, fence int64, now time.Time) (int, error) {
	t.Helper()
	ctx := t.Context()
	released := 0
	for {
		got, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: fence, DueBefore: now.Add(time.Minute), Limit: 20})
		if err != nil || len(got) == 0 {
			return released, err
		}
		for _, e := range got {
			for _, tr := range []store.EventTransition{
				store.StartDelivery(e.ID, fence, now.Add(time.Minute), now),
				store.Delivered(e.ID, fence, 1, now),
				store.Release(e.ID, model.EventDelivered, fence, 1, now),
			} {
				errs, err := s.EventTransition(ctx, []store.EventTransition{tr})
				if err != nil {
					return released, err
				}
				if errs[0] != nil {
					t.Fatalf("%s to %s: %v", e.ID, tr.To, errs[0])
				}
			}
			released++
		}
	}
}

// On a real file system filled to the last byte, events are claimed,
// delivered and released in the store's reserve; writes that grow the
// store past it fail with ENOSPC and Space says so; once space is freed
// the next write goes through and the reserve is back.
func TestReserveFullDisk(t *testing.T) {
	mnt := smallfs.Mount(t, 32<<20)
	const reserveSize = 2 << 20
	s, err := Open(filepath.Join(mnt, "data"), Options{ReserveBytes: reserveSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	const n = 2000
	if _, err := s.EventInsertMany(ctx, reserveEvents("fire1", n, now)); err != nil {
		t.Fatal(err)
	}
	filler := smallfs.Fill(t, mnt)

	before := s.Space().Reserved
	released, err := deliverAll(t, s, 1, now)
	if err != nil || released != n {
		t.Fatalf("on a full disk %d of %d events were delivered and released (%v)", released, n, err)
	}
	st := s.Space()
	if st.Full || st.Reserved <= 0 {
		t.Fatalf("after the deliveries: %+v, want not full with some reserve left", st)
	}
	t.Logf("%d events claimed, delivered and released on the full disk took %d bytes of the reserve", n, before-st.Reserved)

	// Events are the store's largest growth: writing more of them uses the
	// reserve up.
	var grow error
	pending := 0
	for i := 0; grow == nil; i++ {
		if i == 1000 {
			t.Fatal("1000 inserts of 100 events went through on a full disk")
		}
		var k int
		k, grow = s.EventInsertMany(ctx, reserveEvents(fmt.Sprintf("grow%d", i), 100, now))
		pending += k
	}
	if !errors.Is(grow, syscall.ENOSPC) || !errors.Is(grow, model.ErrUnavailable) {
		t.Fatalf("a write past the reserve failed with %v, want ENOSPC and ErrUnavailable", grow)
	}
	if st := s.Space(); !st.Full || !errors.Is(st.Err, syscall.ENOSPC) {
		t.Fatalf("after a write failed for lack of space: %+v, want full with its error", st)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventInsertMany(ctx, reserveEvents("after", 100, now)); err != nil {
		t.Fatalf("the first write after space was freed: %v", err)
	}
	if st := s.Space(); st.Full || st.Err != nil || st.Reserved < reserveSize/2 {
		t.Fatalf("after space was freed: %+v, want not full with the reserve back", st)
	}
	if released, err := deliverAll(t, s, 2, now); err != nil || released != pending+100 {
		t.Fatalf("after space was freed %d of %d events were delivered (%v)", released, pending+100, err)
	}
}

// The reserve is allocated before a commit when less than half of it is
// left, and, once a commit failed for lack of space, before every commit
// until an allocation works again.
func TestReserveTopUp(t *testing.T) {
	s, err := Open(t.TempDir(), Options{ReserveBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.reserve
	if r.f == nil {
		t.Skip("no reserve on this platform")
	}
	type call struct{ off, n int64 }
	var calls []call
	var fail error
	r.allocate = func(_ *os.File, off, n int64) error {
		calls = append(calls, call{off, n})
		return fail
	}
	write := func() error {
		return s.update(t.Context(), "test", func(tx *bolt.Tx) error {
			return tx.Bucket(bMeta).Put([]byte("reserve-test"), make([]byte, 100))
		})
	}

	if err := write(); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].n != 1<<20 {
		t.Fatalf("first commit: allocations %v, want one of the reserve's size", calls)
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 {
		t.Fatalf("a commit with the reserve left allocated again: %v", calls)
	}
	if st := s.Space(); st.Full || st.Reserved < 1<<19 {
		t.Fatalf("%+v, want not full, at least half of the reserve left", st)
	}

	// A commit fails for lack of space (as bbolt reports a failed write).
	r.committed(&os.PathError{Op: "write", Path: "schedulerd.db", Err: syscall.ENOSPC})
	if st := s.Space(); !st.Full || !errors.Is(st.Err, syscall.ENOSPC) {
		t.Fatalf("after ENOSPC: %+v, want full", st)
	}
	fail = syscall.ENOSPC
	for range 2 {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	if len(calls) != 3 {
		t.Fatalf("while full: %d allocations, want one per commit", len(calls)-1)
	}
	if st := s.Space(); !st.Full || !errors.Is(st.Err, syscall.ENOSPC) {
		t.Fatalf("with the reserve failing: %+v, want still full", st)
	}
	fail = nil
	if err := write(); err != nil {
		t.Fatal(err)
	}
	if st := s.Space(); st.Full || st.Err != nil {
		t.Fatalf("after the reserve was allocated again: %+v, want not full", st)
	}
}

// On a file system without fallocate the store goes on without a reserve.
func TestReserveUnsupported(t *testing.T) {
	s, err := Open(t.TempDir(), Options{ReserveBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.reserve.f == nil {
		t.Skip("no reserve on this platform")
	}
	calls := 0
	s.reserve.allocate = func(*os.File, int64, int64) error {
		calls++
		return syscall.EOPNOTSUPP
	}
	for range 3 {
		if err := s.update(t.Context(), "test", func(tx *bolt.Tx) error {
			return tx.Bucket(bMeta).Put([]byte("reserve-test"), make([]byte, 100))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("fallocate tried %d times, want once", calls)
	}
	if st := s.Space(); st.Reserved != 0 || st.Full {
		t.Fatalf("%+v, want no reserve, not full", st)
	}
}
