package embedded

import (
	"encoding/json"
	"errors"
	"reflect"
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

// Rows of earlier versions that end with the event's concurrency key value
// (now read from the payload) are still read.
func TestEventCodecSkipsConcurrencyKeyTail(t *testing.T) {
	e := fullEvent()
	raw, err := encodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeEvent(putStr(raw, "c-7"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("row with a key tail\n got %+v\nwant %+v", got, e)
	}
}

// Rows written by earlier versions (JSON) are still read.
func TestEventCodecReadsJSONRows(t *testing.T) {
	e := fullEvent()
	e.Payload = json.RawMessage(`{"k":[1,2]}`) // JSON rows hold compacted payloads
	raw, err := json.Marshal(eventRow{Event: e, ReleaseToken: e.ReleaseToken})
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("JSON row\n got %+v\nwant %+v", got, e)
	}
}

// Concurrent batched writes share commits; a write that fails gets its own
// error and does not undo or fail the others.
func TestGroupCommit(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
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
	err = s.db.View(func(tx *bolt.Tx) error {
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
