package embedded

import (
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

func fullEvent() *model.Event {
	at := func(s int64) *time.Time { t := time.Unix(s, 123456789).UTC(); return &t }
	return &model.Event{
		ID: "s.1.7", TenantID: "t1", ScheduleID: "s", FireID: "s.1",
		FireTime: time.Unix(1, 0).UTC(), Index: 7, Count: 10,
		LaunchAt: time.Unix(-5, 999).UTC(), Deadline: at(100), Priority: -3, PolicyID: "p",
		Target:  model.Target{Type: model.TargetSQS, URL: "http://x", QueueURL: "https://q"},
		Payload: json.RawMessage(`{ "k" : [1, 2] }`), MaxAttempts: 6, Shard: 15,
		Status: model.EventDelivered, Attempts: 3, LastError: "HTTP 500: boom", Fence: 1 << 40,
		ReleaseToken: "rt", TokenExpiresAt: at(200), TokenTimedOut: true,
		DeliveredAt: at(300), FinishedAt: at(400),
		CreatedAt: time.Unix(500, 1).UTC(), UpdatedAt: time.Unix(600, 2).UTC(),
	}
}

func TestEventCodecRoundTrip(t *testing.T) {
	for name, e := range map[string]*model.Event{
		"full":    fullEvent(),
		"minimal": {ID: "a", Status: model.EventPending},
	} {
		raw, err := encodeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeEvent(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", name, got, e)
		}
		// Truncated rows are errors, never panics or silent zero values.
		for i := 1; i < len(raw); i++ {
			if _, err := decodeEvent(raw[:i]); err == nil {
				t.Fatalf("%s: row cut at %d of %d decoded without error", name, i, len(raw))
			}
		}
	}
}

// Concurrent batched writes share commits; a write that fails gets its own
// error and does not undo or fail the others.
func TestGroupCommit(t *testing.T) {
	s := openTemp(t, Options{})
	boom := errors.New("boom")
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.batch(t.Context(), "test", func(tx *bolt.Tx) error {
				if i%8 == 3 {
					_ = tx.Bucket(bLeases).Put([]byte{'x', byte(i)}, []byte("written before failing"))
					return boom
				}
				return tx.Bucket(bLeases).Put([]byte{'k', byte(i)}, []byte("v"))
			})
		})
	}
	wg.Wait()
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bLeases)
		for i := range n {
			failed := i%8 == 3
			if failed != errors.Is(errs[i], boom) {
				t.Errorf("write %d: error %v", i, errs[i])
			}
			if failed && b.Get([]byte{'x', byte(i)}) != nil {
				t.Errorf("write %d failed but its change was committed", i)
			}
			if !failed && b.Get([]byte{'k', byte(i)}) == nil {
				t.Errorf("write %d succeeded but is missing", i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A head as the emitter's first event of a one-off's fire makes it reads
// back whole, and a cut one fails.
func TestEventCodecV3(t *testing.T) {
	sc, f := typicalOneOff()
	e := &model.Event{
		TenantID: sc.TenantID, ScheduleID: sc.ID, FireID: f.ID, FireTime: f.FireTime, Count: 1,
		LaunchAt: f.FireTime, Target: sc.Target, Payload: sc.Payload, MaxAttempts: 5, Shard: 3,
		Status: model.EventPending, CreatedAt: sc.CreatedAt, UpdatedAt: sc.CreatedAt,
	}
	v3, err := encodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeEvent(v3); err != nil || !reflect.DeepEqual(got, e) {
		t.Errorf("round trip\n got %+v %v\nwant %+v", got, err, e)
	}
	for i := range v3 {
		if _, err := decodeEvent(v3[:i]); err == nil {
			t.Fatalf("cut at %d of %d: decoded without error", i, len(v3))
		}
	}
	// A fire id that does not start with the schedule id keeps it whole.
	e.FireID = "elsewhere.1"
	if raw, err := encodeEvent(e); err != nil {
		t.Fatal(err)
	} else if got, err := decodeEvent(raw); err != nil || got.ScheduleID != sc.ID || got.FireID != e.FireID {
		t.Errorf("event of fire %q: decoded %+v, %v", e.FireID, got, err)
	}
}

// CommitStats counts the transactions committed and the writes they
// carried: the calls queued behind a commit share the next one, and a
// write that fails counts in neither.
func TestCommitStats(t *testing.T) {
	s := openTemp(t, Options{})
	before := s.Commits()
	const n = 16
	inside, release := make(chan struct{}), make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Go(func() {
		errs[0] = s.batch(t.Context(), "test", func(tx *bolt.Tx) error {
			close(inside)
			<-release
			return tx.Bucket(bLeases).Put([]byte("k0"), []byte("v"))
		})
	})
	<-inside
	boom := errors.New("boom")
	for i := 1; i < n; i++ {
		wg.Go(func() {
			errs[i] = s.batch(t.Context(), "test", func(tx *bolt.Tx) error {
				if i == 5 {
					return boom
				}
				return tx.Bucket(bLeases).Put([]byte{'k', byte(i)}, []byte("v"))
			})
		})
	}
	// The committer is held inside the first call until all the others
	// have queued behind it.
	for {
		s.group.mu.Lock()
		queued := len(s.group.pending)
		s.group.mu.Unlock()
		if queued == n-1 {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if (i == 5) != errors.Is(err, boom) {
			t.Fatalf("write %d: error %v", i, err)
		}
	}
	if err := s.update(t.Context(), "test", func(tx *bolt.Tx) error {
		return tx.Bucket(bLeases).Put([]byte("alone"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	got := s.Commits()
	got.Commits -= before.Commits
	got.Writes -= before.Writes
	// The first call alone, the n-2 that succeeded of those queued behind
	// it in one commit, the update alone.
	if want := (CommitStats{Commits: 3, Writes: 1 + n - 2 + 1}); got != want {
		t.Fatalf("commits and writes %+v, want %+v", got, want)
	}
}
