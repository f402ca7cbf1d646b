package embedded

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// encodeScheduleV1 and encodeFireV1 write rows as the first binary codec
// did, which stores written before version 2 hold.
func encodeScheduleV1(sc *model.Schedule) []byte {
	b := []byte{scheduleCodecV1}
	b = putStr(b, sc.TenantID)
	b = putStr(b, sc.Name)
	b = putStr(b, sc.Cron)
	b = putTimePtr(b, sc.RunAt)
	b = putStr(b, sc.Timezone)
	b = binary.AppendVarint(b, int64(sc.EventCount))
	b = putStr(b, sc.PolicyID)
	b = putDuration(b, sc.Window)
	b = putBool(b, sc.Spread)
	b = binary.AppendVarint(b, int64(sc.Priority))
	b = putStr(b, string(sc.Target.Type))
	b = putStr(b, sc.Target.URL)
	b = putStr(b, sc.Target.QueueURL)
	b = putBytes(b, sc.Payload)
	b = binary.AppendVarint(b, int64(sc.MaxAttempts))
	b = putTimePtr(b, sc.StartAt)
	b = putTimePtr(b, sc.EndAt)
	b = putStr(b, string(sc.Misfire))
	b = putStr(b, string(sc.Overlap))
	b = putStr(b, string(sc.State))
	b = binary.AppendVarint(b, int64(sc.Partition))
	b = binary.AppendVarint(b, sc.Version)
	b = putTime(b, sc.CreatedAt)
	return putTime(b, sc.UpdatedAt)
}

// encodeScheduleV2 writes a row as codec version 2 did (layouts 4 to 8),
// with child, the fire f and the event e when not nil.
func encodeScheduleV2(sc *model.Schedule, child *model.Child, f *model.Fire, e *model.Event) []byte {
	var flags uint64
	if sameTime(sc.UpdatedAt, sc.CreatedAt) {
		flags |= schedUpdatedIsCreated
	}
	if child != nil {
		flags |= schedSoleChild
	}
	if f != nil {
		flags |= schedFire
	}
	if e != nil {
		flags |= schedEvent
	}
	b := []byte{scheduleCodecV2}
	b = binary.AppendUvarint(b, flags)
	b = putStr(b, sc.TenantID)
	b = putStr(b, sc.Name)
	b = putStr(b, sc.Cron)
	b = putTimePtr(b, sc.RunAt)
	b = putEnum(b, sc.Timezone, enumTimezone)
	b = binary.AppendVarint(b, int64(sc.EventCount))
	b = putStr(b, sc.PolicyID)
	b = putDuration(b, sc.Window)
	b = putBool(b, sc.Spread)
	b = binary.AppendVarint(b, int64(sc.Priority))
	b = putEnum(b, string(sc.Target.Type), enumTarget)
	b = putStr(b, sc.Target.URL)
	b = putStr(b, sc.Target.QueueURL)
	b = putBytes(b, sc.Payload)
	b = binary.AppendVarint(b, int64(sc.MaxAttempts))
	b = putTimePtr(b, sc.StartAt)
	b = putTimePtr(b, sc.EndAt)
	b = putEnum(b, string(sc.Misfire), enumMisfire)
	b = putEnum(b, string(sc.Overlap), enumOverlap)
	b = putEnum(b, string(sc.State), enumState)
	b = binary.AppendVarint(b, int64(sc.Partition))
	b = binary.AppendVarint(b, sc.Version)
	b = putTime(b, sc.CreatedAt)
	if flags&schedUpdatedIsCreated == 0 {
		b = putTime(b, sc.UpdatedAt)
	}
	if child != nil {
		b = putEnum(b, child.Timezone, enumTimezone)
		b = putStr(b, child.LaunchExpression)
		b = binary.AppendVarint(b, int64(child.Minute))
	}
	if f != nil {
		b = putBytes(b, encodeRowFire(sc, f))
	}
	if e != nil {
		b = putBytes(b, encodeRowEvent(sc, f, e, nil)) // layouts 4 to 8 derived no token
	}
	return b
}

func encodeFireV1(f *model.Fire) []byte {
	b := []byte{fireCodecV1}
	b = putStr(b, f.ScheduleID)
	b = putStr(b, f.TenantID)
	b = putTime(b, f.FireTime)
	b = putStr(b, f.LocalTime)
	b = binary.AppendVarint(b, int64(f.Count))
	b = putStr(b, string(f.Decision))
	b = putStr(b, f.Note)
	b = binary.AppendVarint(b, int64(f.Remaining))
	return putTime(b, f.CreatedAt)
}

// rowOfLayout10 encodes sc with its sole child child stored field by
// field after the row, as layout 10 wrote every child.
func rowOfLayout10(t *testing.T, sc *model.Schedule, child *model.Child, c rowCodes) []byte {
	t.Helper()
	raw, err := encodeScheduleRow(sc, nil, c)
	if err != nil {
		t.Fatal(err)
	}
	flags, n := binary.Uvarint(raw[1:])
	b := binary.AppendUvarint([]byte{raw[0]}, flags|schedSoleChild)
	b = append(b, raw[1+n:]...)
	b = putEnum(b, child.Timezone, enumTimezone)
	b = putStr(b, child.LaunchExpression)
	return binary.AppendVarint(b, int64(child.Minute))
}

// A one-off's sole child that its runAt gives is kept as a flag: the row
// is no longer than without a child but for the flag, and reads back
// whole, as does the row of layout 10 that holds the child's fields.
func TestRowOneOffChild(t *testing.T) {
	sc, _ := typicalOneOff()
	child := schedule.OneOffChild(sc)
	var codes memCodes
	bare := must(encodeScheduleRow(sc, nil, &codes))
	raw := must(encodeScheduleRow(sc, &child, &codes))
	if len(raw) > len(bare)+1 {
		t.Errorf("row with the one-off's child: %d bytes, without a child %d: want at most one more", len(raw), len(bare))
	}
	for name, raw := range map[string][]byte{"flag": raw, "layout 10": rowOfLayout10(t, sc, &child, &codes)} {
		got, gotChild, err := decodeScheduleRow([]byte(sc.ID), raw, &codes)
		if err != nil || !reflect.DeepEqual(got, sc) || gotChild == nil || *gotChild != child {
			t.Errorf("%s: %v\n got %+v %+v\nwant %+v %+v", name, err, got, gotChild, sc, child)
		}
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

// Rows of a typical one-off read back whole; version 2 rows are smaller
// than version 1 rows by what they leave out, version 3 rows than version
// 2 rows by the codes and runAt's delta; rows of every version are read.
func TestRowCodecVersions(t *testing.T) {
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
	// Enumerations (3+4+9+5+6 bytes), the update time (7) are left out.
	v1, v2 := len(encodeScheduleV1(sc)), len(encodeScheduleV2(sc, nil, nil, nil))
	if v2 > v1-30 {
		t.Errorf("version 2 schedule row: %d bytes, version 1 %d: want at least 30 fewer", v2, v1)
	}
	// The tenant (21 bytes) and the origin (29) by codes of a byte each,
	// runAt (13) as a delta of 7.
	v3 := must(encodeSchedule(sc, &codes))
	if len(v3) > v2-50 {
		t.Errorf("version 3 schedule row: %d bytes, version 2 %d: want at least 50 fewer", len(v3), v2)
	}
	for v, old := range map[int][]byte{1: encodeScheduleV1(sc), 2: encodeScheduleV2(sc, nil, nil, nil)} {
		if got, err := decodeSchedule([]byte(sc.ID), old, &codes); err != nil || !reflect.DeepEqual(got, sc) {
			t.Errorf("version %d schedule row: %+v, %v", v, got, err)
		}
	}
	if gotSc, gotChild, gotFire, err := decodeScheduleFire([]byte(sc.ID), encodeScheduleV2(sc, child, f, nil), &codes); err != nil ||
		!reflect.DeepEqual(gotSc, sc) || !reflect.DeepEqual(gotChild, child) || !reflect.DeepEqual(gotFire, f) {
		t.Errorf("version 2 row with its child and fire: %v\n got %+v %+v %+v\nwant %+v %+v %+v", err, gotSc, gotChild, gotFire, sc, child, f)
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
	// The schedule id (19 of 20 bytes), the local time (25) and the decision
	// (7) are left out.
	if v1, v2 := len(encodeFireV1(f)), len(rawFire); v2 > v1-45 {
		t.Errorf("fire row: %d bytes, version 1 %d: want at least 45 fewer", v2, v1)
	}
	if got, err := decodeFire([]byte(f.ID), encodeFireV1(f)); err != nil || !reflect.DeepEqual(got, f) {
		t.Errorf("version 1 fire row: %+v, %v", got, err)
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

// A store of layout 3 (schedules and fires in row codec 1, heads in event
// codec 1) opens with its rows rewritten in the current codecs, in chunks,
// and everything reads back as written.
func TestOpenMigratesLayout3Rows(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 3))
	items, fires := oneOffs(t, r, "ten_a", base(), 0, 30, false)
	if _, err := s.ScheduleCreateMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.FireInsertMany(ctx, fires); err != nil {
		t.Fatal(err)
	}
	// What layout 3 wrote: every row in the first codecs, every child with
	// its by-schedule entry.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bMeta).Put(keyLayout, binary.BigEndian.AppendUint32(nil, layoutCompactEvents)); err != nil {
			return err
		}
		for _, it := range items {
			if err := tx.Bucket(bSchedules).Put([]byte(it.Schedule.ID), encodeScheduleV1(it.Schedule)); err != nil {
				return err
			}
			if err := tx.Bucket(bChildSched).Put(childSchedKey(&it.Children[0]), nil); err != nil {
				return err
			}
		}
		for _, fn := range fires {
			if err := tx.Bucket(bFires).Put([]byte(fn.Fire.ID), encodeFireV1(fn.Fire)); err != nil {
				return err
			}
		}
		heads := tx.Bucket(bEvHeads)
		type kv struct{ k, v []byte }
		var puts []kv
		x := newEvtx(tx)
		if err := heads.ForEach(func(k, v []byte) error {
			h, err := x.decodeHead(v)
			if err != nil {
				return err
			}
			old, err := encodeEventV1(h)
			puts = append(puts, kv{bytes.Clone(k), old})
			return err
		}); err != nil {
			return err
		}
		for _, p := range puts {
			if err := heads.Put(p.k, p.v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	if s, err = Open(dir, Options{migrateChunk: 7}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	checkMigrated(t, s)
	checkEventIndexes(t, s)
	if err := s.db.View(func(tx *bolt.Tx) error {
		for name, want := range map[string]byte{string(bSchedules): scheduleCodecV3, string(bFires): fireCodecV2, string(bEvHeads): eventCodecV3} {
			if err := tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
				if v[0] != want {
					t.Errorf("%s %q: codec %d after the migration, want %d", name, k, v[0], want)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		sc := it.Schedule
		if got, err := s.ScheduleGet(ctx, sc.TenantID, sc.ID); err != nil || !reflect.DeepEqual(got, sc) {
			t.Errorf("schedule %s: %v\n got %+v\nwant %+v", sc.ID, err, got, sc)
		}
		f := fires[i].Fire
		if got, err := s.FireGet(ctx, f.TenantID, f.ID); err != nil || !reflect.DeepEqual(got, f) {
			t.Errorf("fire %s: %v\n got %+v\nwant %+v", f.ID, err, got, f)
		}
		e := fires[i].Events[0]
		if got, err := s.EventGetByID(ctx, e.ID); err != nil || !reflect.DeepEqual(got, roundTrip(t, e)) {
			t.Errorf("event %s: %v\n got %+v\nwant %+v", e.ID, err, got, e)
		}
	}
	// A migrated schedule's child keeps its by-schedule entry and goes with
	// the schedule.
	sc := items[0].Schedule
	if err := s.ScheduleDelete(ctx, sc.TenantID, sc.ID); err != nil {
		t.Fatal(err)
	}
	if n := bySchedEntries(t, s); n != len(items)-1 {
		t.Errorf("children_by_schedule: %d entries, want %d", n, len(items)-1)
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
