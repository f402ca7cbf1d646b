package embedded

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// A one-off's sole child that its runAt gives is kept as a flag: the row
// is no longer than without a child but for the flag, and reads back
// whole.
func TestRowOneOffChild(t *testing.T) {
	sc, _ := typicalOneOff()
	child := model.OneOffChild(sc)
	var codes memCodes
	bare := must(encodeScheduleRow(sc, nil, &codes))
	raw := must(encodeScheduleRow(sc, &child, &codes))
	if len(raw) > len(bare)+1 {
		t.Errorf("row with the one-off's child: %d bytes, without a child %d: want at most one more", len(raw), len(bare))
	}
	if got, gotChild, err := decodeScheduleRow([]byte(sc.ID), raw, &codes); err != nil || !reflect.DeepEqual(got, sc) || gotChild == nil || *gotChild != child {
		t.Errorf("%v\n got %+v %+v\nwant %+v %+v", err, got, gotChild, sc, child)
	}
	// Another child of the one-off is stored.
	other := child
	other.Minute = (child.Minute + 1) % 60
	got, gotChild, err := decodeScheduleRow([]byte(sc.ID), must(encodeScheduleRow(sc, &other, &codes)), &codes)
	if err != nil || !reflect.DeepEqual(got, sc) || gotChild == nil || *gotChild != other {
		t.Errorf("another child: %v\n got %+v\nwant %+v", err, gotChild, other)
	}
}

// A one-off as the master stores it, and its fire.
func typicalOneOff() (*model.Schedule, *model.Fire) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	runAt := now.Add(5*time.Hour + 1234*time.Millisecond)
	sc := &model.Schedule{
		ID: "sch_2222222aqxkfmzpe", TenantID: "ten_abcdefghijklmnop", Name: "report", RunAt: &runAt, Timezone: "UTC",
		EventCount: 1, Target: model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hooks/nightly"},
		Payload: json.RawMessage(`{"job":"nightly-report"}`), MaxAttempts: 5, Misfire: model.MisfireFireOnce,
		Overlap: model.OverlapAllow, State: model.ScheduleActive, Partition: 7, Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	f := &model.Fire{
		ID: model.FireID(sc.ID, 1, runAt), ScheduleID: sc.ID, TenantID: sc.TenantID, FireTime: runAt,
		LocalTime: runAt.Format(localLayout), Count: 1, Decision: model.FireEmitted, CreatedAt: now,
	}
	return sc, f
}

// Rows of a typical one-off read back whole, and cut ones fail.
func TestRowCodecs(t *testing.T) {
	sc, f := typicalOneOff()
	child := &model.Child{ScheduleID: sc.ID, TenantID: sc.TenantID, ScheduleVersion: 1, Partition: 7,
		Timezone: "UTC", LaunchExpression: "MM 01-01 05", Minute: 0}

	var codes memCodes
	raw, err := encodeScheduleRow(sc, child, &codes)
	if err != nil {
		t.Fatal(err)
	}
	if raw[0] != scheduleCodecV3 {
		t.Fatalf("row of codec %d, want %d", raw[0], scheduleCodecV3)
	}
	got, gotChild, err := decodeScheduleRow([]byte(sc.ID), raw, &codes)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sc) || !reflect.DeepEqual(gotChild, child) {
		t.Errorf("schedule round trip\n got %+v %+v\nwant %+v %+v", got, gotChild, sc, child)
	}
	for i := range raw {
		if _, _, err := decodeScheduleRow([]byte(sc.ID), raw[:i], &codes); err == nil {
			t.Fatalf("schedule truncated to %d of %d bytes: decoded without error", i, len(raw))
		}
	}
	if gotSc, gotChild, gotFire, err := decodeScheduleFire([]byte(sc.ID), must(encodeScheduleFire(sc, child, f, &codes)), &codes); err != nil ||
		!reflect.DeepEqual(gotSc, sc) || !reflect.DeepEqual(gotChild, child) || !reflect.DeepEqual(gotFire, f) {
		t.Errorf("row with its child and fire: %v\n got %+v %+v %+v\nwant %+v %+v %+v", err, gotSc, gotChild, gotFire, sc, child, f)
	}

	rawFire := encodeFire(f)
	gotFire, err := decodeFire([]byte(f.ID), rawFire)
	if err != nil || !reflect.DeepEqual(gotFire, f) {
		t.Errorf("fire round trip\n got %+v %v\nwant %+v", gotFire, err, f)
	}
	for i := range rawFire {
		if _, err := decodeFire([]byte(f.ID), rawFire[:i]); err == nil {
			t.Fatalf("fire truncated to %d of %d bytes: decoded without error", i, len(rawFire))
		}
	}
	// What the row cannot leave out is kept: a fire id that does not start
	// with its schedule's, a local time in another zone.
	odd := *f
	odd.ID, odd.LocalTime, odd.Decision = "other-id", "2030-01-01T06:00:01.234+01:00", "some_new_decision"
	if got, err := decodeFire([]byte(odd.ID), encodeFire(&odd)); err != nil || !reflect.DeepEqual(got, &odd) {
		t.Errorf("fire round trip\n got %+v %v\nwant %+v", got, err, &odd)
	}
	if _, err := decodeFire([]byte("sch"), encodeFire(f)); err == nil {
		t.Error("fire row whose schedule id is longer than the key: decoded without error")
	}
}

// The event a one-off's row holds keeps the store's token for its id as a
// flag: no longer than without a token, and read back only with the key.
func TestRowEventDerivedToken(t *testing.T) {
	sc, f := typicalOneOff()
	key := newTokenKey(bytes.Repeat([]byte{3}, tokenKeyLen))
	e := &model.Event{
		ID: model.EventID(f.ID, 0), TenantID: sc.TenantID, ScheduleID: sc.ID, FireID: f.ID, FireTime: f.FireTime,
		Count: 1, LaunchAt: f.FireTime, Target: sc.Target, Payload: sc.Payload, MaxAttempts: sc.MaxAttempts,
		Shard: 3, Status: model.EventPending, CreatedAt: sc.CreatedAt, UpdatedAt: sc.CreatedAt,
	}
	bare := encodeRowEvent(sc, f, e, key)
	e.ReleaseToken = must(key.token(e.ID))
	raw := encodeRowEvent(sc, f, e, key)
	if len(raw) != len(bare) {
		t.Errorf("event with the store's token: %d bytes, without a token %d", len(raw), len(bare))
	}
	got, err := decodeRowEvent(sc, f, raw, key)
	if err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, e)
	}
	if _, err := decodeRowEvent(sc, f, raw, nil); err == nil {
		t.Error("a derived token read without the key: no error")
	}
	// A token of another key is stored.
	e.ReleaseToken = must(newTokenKey(bytes.Repeat([]byte{4}, tokenKeyLen)).token(e.ID))
	if raw := encodeRowEvent(sc, f, e, key); len(raw) != len(bare)+17 {
		t.Errorf("event with another token: %d bytes, want %d", len(raw), len(bare)+17)
	}
}
