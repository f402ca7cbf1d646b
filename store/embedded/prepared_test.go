package embedded

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// A head made before the transaction against one version of a one-off's
// row is not used when the transaction's reads give another: the event
// reads back as it was written, not with fields of the row it is read
// with.
func TestPreparedHeadOfAnotherRow(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	runAt := now.Add(time.Hour)
	oneOff := func(url string) *model.Schedule {
		return &model.Schedule{
			ID: "s", TenantID: "t", Name: "n", RunAt: &runAt, Timezone: "UTC", EventCount: 1,
			Target: model.Target{Type: model.TargetHTTP, URL: url}, Payload: []byte(`{"a":1}`), MaxAttempts: 3,
			State: model.ScheduleActive, Version: 1, CreatedAt: now, UpdatedAt: now,
		}
	}
	prepared, stored := oneOff("https://a.example"), oneOff("https://b.example")
	fireID := model.FireID("s", 1, runAt)
	e := &model.Event{
		ID: model.EventID(fireID, 0), TenantID: "t", ScheduleID: "s", FireID: fireID, FireTime: runAt, Count: 1,
		LaunchAt: runAt, Target: prepared.Target, Payload: prepared.Payload, MaxAttempts: 3,
		Status: model.EventPending, CreatedAt: now, UpdatedAt: now,
	}
	fs := []store.FireNew{{Fire: &model.Fire{ID: fireID, ScheduleID: "s", TenantID: "t", FireTime: runAt, Count: 1, Decision: model.FireEmitted, CreatedAt: now}, Events: []*model.Event{e}}}
	heads := map[*model.Event]preparedHead{}
	var codes memCodes
	doc, err := encodeSchedule(prepared, &codes)
	if err != nil {
		t.Fatal(err)
	}
	prepareHeads(heads, decodeWritten("s", doc, &codes)["s"], fs)
	if _, ok := heads[e]; !ok {
		t.Fatal("no head prepared for the fire's first event")
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		dict := &rowDict{tx: tx}
		doc, err := encodeSchedule(stored, dict)
		if err != nil {
			return err
		}
		if err := createSchedule(tx, stored, doc, nil); err != nil {
			return err
		}
		_, err = putFires(tx, s.tokens, fs, nil, nil, nil, make([]bool, 1), decodeWritten("s", doc, dict), heads)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.EventGet(ctx, "t", e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Target != e.Target {
		t.Errorf("event target %+v, want %+v as written", got.Target, e.Target)
	}
}

// The heads ScheduleCreateMany and ScheduleCreateWithFires make before
// their transaction give back the events as written: one-offs whose events
// take their fields from the schedule and one whose event does not.
func TestPreparedHeadsReadBack(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var items []store.ScheduleNew
	var events []*model.Event
	for i, id := range []string{"s1", "s2", "s3"} {
		runAt := now.Add(time.Duration(i+1) * time.Hour)
		sc := &model.Schedule{
			ID: id, TenantID: "t", Name: "n", RunAt: &runAt, Timezone: "UTC", EventCount: 1,
			Target: model.Target{Type: model.TargetHTTP, URL: "https://a.example"}, Payload: []byte(`{"a":1}`), MaxAttempts: 3,
			State: model.ScheduleActive, Version: 1, CreatedAt: now, UpdatedAt: now,
		}
		fireID := model.FireID(id, 1, runAt)
		e := &model.Event{
			ID: model.EventID(fireID, 0), TenantID: "t", ScheduleID: id, FireID: fireID, FireTime: runAt, Count: 1,
			LaunchAt: runAt.Add(time.Minute), Target: sc.Target, Payload: sc.Payload, MaxAttempts: 3, Shard: i,
			Status: model.EventPending, CreatedAt: now, UpdatedAt: now,
		}
		if i == 1 {
			e.Target.URL, e.Payload = "https://other.example", []byte(`{"b":2}`)
		}
		events = append(events, e)
		items = append(items, store.ScheduleNew{Schedule: sc, Fires: []store.FireNew{{
			Fire:   &model.Fire{ID: fireID, ScheduleID: id, TenantID: "t", FireTime: runAt, Count: 1, Decision: model.FireEmitted, CreatedAt: now},
			Events: []*model.Event{e},
		}}})
	}
	if res, err := s.ScheduleCreateMany(ctx, items[:2]); err != nil || res[0] != nil || res[1] != nil {
		t.Fatalf("ScheduleCreateMany: %v, %v", res, err)
	}
	if err := storetest.CreateSchedule(ctx, s, items[2].Schedule, nil, items[2].Fires...); err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		got, err := s.EventGet(ctx, "t", e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Target != e.Target || string(got.Payload) != string(e.Payload) || !got.LaunchAt.Equal(e.LaunchAt) ||
			!got.FireTime.Equal(e.FireTime) || got.Shard != e.Shard || got.FireID != e.FireID || got.MaxAttempts != e.MaxAttempts {
			t.Errorf("event %s reads back as %+v, want %+v", e.ID, got, e)
		}
	}
}

// decodeWritten returns the schedule id, whose row this transaction writes
// as doc, as a reader of the row sees it (see newEvtxWith); nil if the row
// does not decode, to be read (and fail) in the transaction.
func decodeWritten(id string, doc []byte, c rowCodes) map[string]*model.Schedule {
	sc, err := decodeSchedule([]byte(id), doc, c)
	if err != nil {
		return nil
	}
	return map[string]*model.Schedule{id: sc}
}
