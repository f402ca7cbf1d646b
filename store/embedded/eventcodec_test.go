package embedded

import (
	"encoding/binary"
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

// Version 1 rows of earlier versions that end with the event's concurrency
// key value (now read from the payload) are still read.
func TestEventCodecSkipsConcurrencyKeyTail(t *testing.T) {
	e := fullEvent()
	raw, err := encodeEventV1(e)
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

// encodeEventV1 writes an event as the first binary codec did, which the
// heads and loose rows of stores written before version 3 hold.
func encodeEventV1(e *model.Event) ([]byte, error) {
	n := 64 + len(e.ID) + len(e.TenantID) + len(e.ScheduleID) + len(e.FireID) + len(e.PolicyID) +
		len(e.Target.URL) + len(e.Target.QueueURL) + len(e.Payload) + len(e.LastError) + len(e.ReleaseToken) +
		len(e.Status) + len(e.Target.Type) + 12*9
	b := make([]byte, 0, n)
	b = append(b, eventCodecV1)
	b = putStr(b, e.ID)
	b = putStr(b, e.TenantID)
	b = putStr(b, e.ScheduleID)
	b = putStr(b, e.FireID)
	b = putTime(b, e.FireTime)
	b = binary.AppendVarint(b, int64(e.Index))
	b = binary.AppendVarint(b, int64(e.Count))
	b = putTime(b, e.LaunchAt)
	b = putTimePtr(b, e.Deadline)
	b = binary.AppendVarint(b, int64(e.Priority))
	b = putStr(b, e.PolicyID)
	b = putStr(b, string(e.Target.Type))
	b = putStr(b, e.Target.URL)
	b = putStr(b, e.Target.QueueURL)
	b = putBytes(b, e.Payload)
	b = binary.AppendVarint(b, int64(e.MaxAttempts))
	b = binary.AppendVarint(b, int64(e.Shard))
	b = putStr(b, string(e.Status))
	b = binary.AppendVarint(b, int64(e.Attempts))
	b = putStr(b, e.LastError)
	b = binary.AppendVarint(b, e.Fence)
	b = putStr(b, e.ReleaseToken)
	b = putTimePtr(b, e.TokenExpiresAt)
	b = putBool(b, e.TokenTimedOut)
	b = putTimePtr(b, e.DeliveredAt)
	b = putTimePtr(b, e.FinishedAt)
	b = putTime(b, e.CreatedAt)
	b = putTime(b, e.UpdatedAt)
	return b, nil
}

// A head as the emitter's first event of a one-off's fire makes it is
// smaller in version 3 by what it leaves out, and reads back whole; version
// 1 rows are still read.
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
	v1, err := encodeEventV1(e)
	if err != nil {
		t.Fatal(err)
	}
	// Schedule id (19 of 20 bytes), launch time (10), update time (6),
	// status (7) and target type (4), less the flags (1).
	if len(v3) > len(v1)-40 {
		t.Errorf("head: %d bytes, version 1 %d: want at least 40 fewer", len(v3), len(v1))
	}
	for name, raw := range map[string][]byte{"version 3": v3, "version 1": v1} {
		if got, err := decodeEvent(raw); err != nil || !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip\n got %+v %v\nwant %+v", name, got, err, e)
		}
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
