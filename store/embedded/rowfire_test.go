package embedded

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// fireRoundTrip is f as the store keeps it (times in UTC).
func fireRoundTrip(t *testing.T, f *model.Fire) *model.Fire {
	t.Helper()
	out, err := decodeFire([]byte(f.ID), encodeFire(f))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fireStorage reports whether fire id has a row of its own, and whether the
// row of schedule scheduleID holds a fire.
func fireStorage(t *testing.T, s *Store, id, scheduleID string) (own, inRow bool) {
	t.Helper()
	if err := s.db.View(func(tx *bolt.Tx) error {
		own = tx.Bucket(bFires).Get([]byte(id)) != nil
		inRow = rowHasFire(tx.Bucket(bSchedules).Get(schedKey(scheduleID)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return own, inRow
}

// A one-off stored with its fire (ScheduleCreateMany with Fires, alone or
// in a batch) keeps the fire in its row: no fire row, no
// by-schedule entry; the fire reads back whole through FireGet, FireList and
// FireLatestBefore, counts as existing for FireInsert and FireInsertMany,
// and gets a row of its own when it changes or its schedule does.
func TestOneOffFireInScheduleRow(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{})
	r := rand.New(rand.NewPCG(5, 5))
	items, fires := oneOffs(t, r, "ten_a", base(), 0, 6, true)
	for i := range items[:5] {
		items[i].Fires = fires[i : i+1]
	}
	if res, err := s.ScheduleCreateMany(ctx, items[:5]); err != nil || slices.ContainsFunc(res, func(e error) bool { return e != nil }) {
		t.Fatalf("ScheduleCreateMany: %v %v", res, err)
	}
	if err := storetest.CreateSchedule(ctx, s, items[5].Schedule, items[5].Children, fires[5:6]...); err != nil {
		t.Fatalf("create one: %v", err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bFires, bFireSched} {
			if k, _ := tx.Bucket(b).Cursor().First(); k != nil {
				t.Errorf("%s holds %q: a one-off's fire written outside its schedule's row", b, k)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, fn := range fires {
		f, sc := fn.Fire, items[i].Schedule
		want := fireRoundTrip(t, f)
		if got, err := s.FireGet(ctx, f.TenantID, f.ID); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("FireGet %s: %v\n got %+v\nwant %+v", f.ID, err, got, want)
		}
		if _, err := s.FireGet(ctx, "ten_other", f.ID); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("FireGet %s of another tenant: %v, want ErrNotFound", f.ID, err)
		}
		if got, err := s.FireList(ctx, &store.FireListParams{TenantID: f.TenantID, ScheduleID: sc.ID}); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Errorf("FireList %s: %v %v", sc.ID, got, err)
		}
		if got, err := s.FireLatestBefore(ctx, sc.ID, f.FireTime.Add(time.Millisecond)); err != nil || got.ID != f.ID {
			t.Errorf("FireLatestBefore %s after its fire: %v %v", sc.ID, got, err)
		}
		if _, err := s.FireLatestBefore(ctx, sc.ID, f.FireTime); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("FireLatestBefore %s at its fire: %v, want ErrNotFound", sc.ID, err)
		}
		if ok, err := s.FireInsert(ctx, f); err != nil || ok {
			t.Errorf("FireInsert of the stored fire %s: %v %v, want not inserted", f.ID, ok, err)
		}
		if ins, n, err := s.FireInsertMany(ctx, []store.FireNew{fn}); err != nil || ins[0] || n != 0 {
			t.Errorf("FireInsertMany of the stored fire %s: %v %d %v, want not inserted", f.ID, ins, n, err)
		}
		if c, err := s.EventCountByFire(ctx, f.ID); err != nil || c[model.EventPending] != 1 {
			t.Errorf("EventCountByFire %s: %v %v", f.ID, c, err)
		}
	}

	// Other fires of the schedule page in order around the one in the row.
	sc, rf := items[0].Schedule, fires[0].Fire
	all := []*model.Fire{fireRoundTrip(t, rf)}
	for _, d := range []time.Duration{-2 * time.Hour, -time.Second, 0, 0, time.Second, time.Hour} {
		f := *rf
		f.FireTime = rf.FireTime.Add(d)
		// Versions below the one in the row: at its time, it is the newest.
		f.ID = model.FireID(sc.ID, sc.Version-int64(len(all)), f.FireTime)
		if ok, err := s.FireInsert(ctx, &f); err != nil || !ok {
			t.Fatalf("FireInsert %s: %v %v", f.ID, ok, err)
		}
		all = append(all, fireRoundTrip(t, &f))
	}
	slices.SortFunc(all, func(a, b *model.Fire) int {
		if newerFire(a, b) {
			return -1
		}
		return 1
	})
	checkFirePages(t, s, sc, all)

	// A change of the fire gives it a row of its own.
	if err := s.FireSetDecision(ctx, rf.ID, model.FireLate, "late"); err != nil {
		t.Fatal(err)
	}
	if own, inRow := fireStorage(t, s, rf.ID, sc.ID); !own || inRow {
		t.Errorf("after FireSetDecision: own row %v, in the schedule's row %v", own, inRow)
	}
	changed := *all[slices.IndexFunc(all, func(f *model.Fire) bool { return f.ID == rf.ID })]
	changed.Decision, changed.Note = model.FireLate, "late"
	if got, err := s.FireGet(ctx, rf.TenantID, rf.ID); err != nil || !reflect.DeepEqual(got, &changed) {
		t.Errorf("FireGet after FireSetDecision: %+v %v", got, err)
	}
	for i, f := range all {
		if f.ID == rf.ID {
			all[i] = &changed
		}
	}
	checkFirePages(t, s, sc, all)

	// An update and a delete of the schedule keep its fire, of the old
	// version, in a row of its own.
	up := *items[1].Schedule
	up.Version++
	up.Name = "renamed"
	if err := s.ScheduleUpdate(ctx, &up, up.Version-1, nil); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		if i == 2 {
			if err := s.ScheduleDelete(ctx, items[2].Schedule.TenantID, items[2].Schedule.ID); err != nil {
				t.Fatal(err)
			}
		}
		f := fires[i].Fire
		if own, _ := fireStorage(t, s, f.ID, f.ScheduleID); !own {
			t.Errorf("fire %s has no row of its own after its schedule changed", f.ID)
		}
		if got, err := s.FireGet(ctx, f.TenantID, f.ID); err != nil || !reflect.DeepEqual(got, fireRoundTrip(t, f)) {
			t.Errorf("FireGet %s after its schedule changed: %+v %v", f.ID, got, err)
		}
		if got, err := s.FireList(ctx, &store.FireListParams{TenantID: f.TenantID, ScheduleID: f.ScheduleID}); err != nil || len(got) != 1 || got[0].ID != f.ID {
			t.Errorf("FireList %s after its schedule changed: %v %v", f.ScheduleID, got, err)
		}
	}
}

// checkFirePages pages FireList of sc by every Before and limit and checks
// FireLatestBefore at every fire time, against all (newest first).
func checkFirePages(t *testing.T, s *Store, sc *model.Schedule, all []*model.Fire) {
	t.Helper()
	ctx := t.Context()
	for _, limit := range []int{1, 2, 3, 1000} {
		p := store.FireListParams{TenantID: sc.TenantID, ScheduleID: sc.ID, Limit: limit}
		first, err := s.FireList(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		if want := all[:min(limit, len(all))]; !reflect.DeepEqual(first, want) {
			t.Errorf("FireList limit %d:\n got %v\nwant %v", limit, fireIDs(first), fireIDs(want))
		}
	}
	// Pages of one, each before the last one's time: the newest fire of
	// each time.
	var got, want []*model.Fire
	for i, f := range all {
		if i == 0 || !f.FireTime.Equal(all[i-1].FireTime) {
			want = append(want, f)
		}
	}
	p := store.FireListParams{TenantID: sc.TenantID, ScheduleID: sc.ID, Limit: 1}
	for {
		page, err := s.FireList(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if len(page) < 1 {
			break
		}
		p.Before = page[0].FireTime
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FireList by pages of one:\n got %v\nwant %v", fireIDs(got), fireIDs(want))
	}
	for _, f := range all {
		var want *model.Fire
		for _, g := range all {
			if g.FireTime.Before(f.FireTime) {
				want = g
				break
			}
		}
		got, err := s.FireLatestBefore(ctx, sc.ID, f.FireTime)
		switch {
		case want == nil && !errors.Is(err, model.ErrNotFound):
			t.Errorf("FireLatestBefore %s: %v %v, want ErrNotFound", f.FireTime, got, err)
		case want != nil && (err != nil || !reflect.DeepEqual(got, want)):
			t.Errorf("FireLatestBefore %s: %v %v, want %s", f.FireTime, got, err, want.ID)
		}
	}
}

func fireIDs(fs []*model.Fire) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

// A new one-off whose fire id has a row already (a schedule id used again
// after a delete) leaves that row as it is and holds no fire.
func TestOneOffFireRowExists(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{})
	r := rand.New(rand.NewPCG(6, 6))
	items, fires := oneOffs(t, r, "ten_a", base(), 0, 2, true)
	for i := range items {
		old := *fires[i].Fire
		old.Decision, old.Note = model.FireSkippedOverlap, "earlier"
		if ok, err := s.FireInsert(ctx, &old); err != nil || !ok {
			t.Fatal(ok, err)
		}
		items[i].Fires = fires[i : i+1]
	}
	if res, err := s.ScheduleCreateMany(ctx, items[:1]); err != nil || res[0] != nil {
		t.Fatal(res, err)
	}
	if err := storetest.CreateSchedule(ctx, s, items[1].Schedule, items[1].Children, fires[1:2]...); err != nil {
		t.Fatalf("create over an existing fire: %v", err)
	}
	for i, fn := range fires {
		f := fn.Fire
		if _, inRow := fireStorage(t, s, f.ID, f.ScheduleID); inRow {
			t.Errorf("one-off %d: its row holds a fire whose id has a row already", i)
		}
		if got, err := s.FireGet(ctx, f.TenantID, f.ID); err != nil || got.Note != "earlier" {
			t.Errorf("one-off %d: FireGet %+v %v, want the earlier fire", i, got, err)
		}
		if got, err := s.FireList(ctx, &store.FireListParams{TenantID: f.TenantID, ScheduleID: f.ScheduleID}); err != nil || len(got) != 1 {
			t.Errorf("one-off %d: FireList %v %v, want the one fire", i, fireIDs(got), err)
		}
	}
}

// A schedule row with its fire reads back whole (the fire's id given by the
// schedule's id and version), a truncated one fails, and a fire that the
// row cannot give is not held.
func TestScheduleRowFireCodec(t *testing.T) {
	sc, f := typicalOneOff()
	child := &model.Child{ScheduleID: sc.ID, TenantID: sc.TenantID, ScheduleVersion: 1, Partition: 7,
		Timezone: "UTC", LaunchExpression: "MM 01-01 05", Minute: 0}
	if !impliesFire(sc, f) {
		t.Fatal("a one-off's fire of its id: impliesFire false")
	}
	codes := &memCodes{}
	raw := must(encodeScheduleFire(sc, child, f, codes))
	if !rowHasFire(raw) || rowHasFire(must(encodeScheduleRow(sc, child, codes))) {
		t.Error("rowHasFire does not tell a row with its fire")
	}
	gotSc, gotChild, gotFire, err := decodeScheduleFire([]byte(sc.ID), raw, codes)
	if err != nil || !reflect.DeepEqual(gotSc, sc) || !reflect.DeepEqual(gotChild, child) || !reflect.DeepEqual(gotFire, f) {
		t.Errorf("round trip: %v\n got %+v %+v %+v\nwant %+v %+v %+v", err, gotSc, gotChild, gotFire, sc, child, f)
	}
	if got, err := decodeSchedule([]byte(sc.ID), raw, codes); err != nil || !reflect.DeepEqual(got, sc) {
		t.Errorf("decodeSchedule of a row with its fire: %+v %v", got, err)
	}
	for i := range raw {
		if _, _, _, err := decodeScheduleFire([]byte(sc.ID), raw[:i], codes); err == nil {
			t.Fatalf("row truncated to %d of %d bytes: decoded without error", i, len(raw))
		}
	}
	// What the row gives is left out: the typical fire is a few bytes.
	if n := len(encodeRowFire(sc, f)); n > 12 {
		t.Errorf("typical fire in the row: %d bytes, want at most 12", n)
	}
	// What it does not give is kept.
	for name, change := range map[string]func(f *model.Fire){
		"other tenant":       func(f *model.Fire) { f.TenantID = "ten_other" },
		"local time in zone": func(f *model.Fire) { f.LocalTime = f.FireTime.In(time.FixedZone("X", 3600)).Format(localLayout) },
		"created later":      func(f *model.Fire) { f.CreatedAt = f.CreatedAt.Add(1234567 * time.Nanosecond) },
		"created zero":       func(f *model.Fire) { f.CreatedAt = time.Time{} },
		"created far":        func(f *model.Fire) { f.CreatedAt = time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC) },
		"late, noted":        func(f *model.Fire) { f.Decision, f.Note = model.FireLate, "late by 3s" },
		"new decision":       func(f *model.Fire) { f.Decision = "some_new_decision" },
		"count":              func(f *model.Fire) { f.Count = 1000 },
	} {
		_, f2 := typicalOneOff()
		change(f2)
		raw := must(encodeScheduleFire(sc, child, f2, codes))
		if _, _, got, err := decodeScheduleFire([]byte(sc.ID), raw, codes); err != nil || !reflect.DeepEqual(got, f2) {
			t.Errorf("%s: round trip %v\n got %+v\nwant %+v", name, err, got, f2)
		}
	}
	for name, change := range map[string]func(s *model.Schedule, f *model.Fire){
		"cron":         func(s *model.Schedule, f *model.Fire) { s.RunAt, s.Cron = nil, "0 5 * * *" },
		"other id":     func(s *model.Schedule, f *model.Fire) { f.ID += "x" },
		"other sched":  func(s *model.Schedule, f *model.Fire) { f.ScheduleID = "sch_other" },
		"emitting":     func(s *model.Schedule, f *model.Fire) { f.Remaining = 3 },
		"next version": func(s *model.Schedule, f *model.Fire) { s.Version++ },
	} {
		s2, f2 := typicalOneOff()
		change(s2, f2)
		if impliesFire(s2, f2) {
			t.Errorf("%s: impliesFire true", name)
		}
	}
}

// A one-off's group head names its schedule instead of its fire (whose id
// the schedule's id, version and runAt give) and its creation time from
// the schedule's, reads back whole with the schedule's row, and keeps what
// the row does not give.
func TestOneOffHeadFireFromSchedule(t *testing.T) {
	sc, f := typicalOneOff()
	event := func() *model.Event {
		return &model.Event{
			FireID: f.ID, TenantID: sc.TenantID, ScheduleID: sc.ID, FireTime: f.FireTime, Count: 1,
			LaunchAt: f.FireTime, Target: sc.Target, Payload: sc.Payload, MaxAttempts: sc.MaxAttempts,
			Shard: 3, Status: model.EventPending, CreatedAt: sc.CreatedAt.Add(1500*time.Microsecond + 7),
		}
	}
	schedule := func(id string) (*model.Schedule, error) {
		if id != sc.ID {
			return nil, model.ErrNotFound
		}
		return sc, nil
	}
	all := uint64(evFireOfSchedule | evFireAtRunAt | evCreatedFromSchedule)
	for name, tc := range map[string]struct {
		change func(e *model.Event)
		flags  uint64
	}{
		"typical":         {func(e *model.Event) { e.UpdatedAt = e.CreatedAt }, all},
		"other fire id":   {func(e *model.Event) { e.FireID = sc.ID + ".x" }, evFireAtRunAt | evCreatedFromSchedule},
		"other fire time": {func(e *model.Event) { e.FireTime = e.FireTime.Add(time.Second); e.FireID = sc.ID + ".y" }, evCreatedFromSchedule},
		"created far":     {func(e *model.Event) { e.CreatedAt = time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC) }, evFireOfSchedule | evFireAtRunAt},
	} {
		e := event()
		tc.change(e)
		if e.UpdatedAt.IsZero() {
			e.UpdatedAt = e.CreatedAt.Add(time.Second)
		}
		raw, err := encodeEventRef(e, sc)
		if err != nil {
			t.Fatal(err)
		}
		flags, _ := binary.Uvarint(raw[1:])
		if got := flags & all; got != tc.flags {
			t.Errorf("%s: flags %b, want %b", name, got, tc.flags)
		}
		if got, err := decodeEventWith(raw, schedule); err != nil || !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip %v\n got %+v\nwant %+v", name, err, got, e)
		}
		for i := range raw {
			if _, err := decodeEventWith(raw[:i], schedule); err == nil {
				t.Fatalf("%s: head truncated to %d of %d bytes: decoded without error", name, i, len(raw))
			}
		}
		if tc.flags == all && len(raw) > 45 {
			t.Errorf("%s: head of %d bytes, want at most 45", name, len(raw))
		}
	}
	later := *sc
	later.Version++
	raw, err := encodeEventRef(event(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeEventWith(raw, func(string) (*model.Schedule, error) { return &later, nil }); err == nil {
		t.Error("head decoded with another version of its schedule")
	}
}
