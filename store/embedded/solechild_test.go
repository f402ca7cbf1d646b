package embedded

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

func childOf(sc *model.Schedule, minute int) model.Child {
	return model.Child{ScheduleID: sc.ID, TenantID: sc.TenantID, ScheduleVersion: sc.Version, Partition: sc.Partition,
		Timezone: "UTC", LaunchExpression: "MM 01-01 05", Minute: minute}
}

func findChildren(t *testing.T, s *Store, sc *model.Schedule) []model.Child {
	t.Helper()
	got, err := s.ChildrenFind(t.Context(), &store.ChildrenFindParams{Partition: sc.Partition, Timezone: "UTC",
		Keys: []model.ChildKey{{LaunchExpression: "MM 01-01 05", Minute: 0}, {LaunchExpression: "MM 01-01 05", Minute: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func bySchedEntries(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bChildSched).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// A schedule's sole child is held by its row, without an entry in
// children_by_schedule, and goes, or is left for the orphan clean-up, as a
// child with an entry does.
func TestSoleChildInline(t *testing.T) {
	open := func(t *testing.T) (*Store, *model.Schedule) {
		s, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		sc, _ := typicalOneOff()
		if err := storetest.CreateSchedule(t.Context(), s, sc, []model.Child{childOf(sc, 0)}); err != nil {
			t.Fatal(err)
		}
		if n := bySchedEntries(t, s); n != 0 {
			t.Fatalf("children_by_schedule: %d entries after creating a schedule with one child, want 0", n)
		}
		if got := findChildren(t, s, sc); len(got) != 1 || got[0] != childOf(sc, 0) {
			t.Fatalf("ChildrenFind: %+v, want the child", got)
		}
		return s, sc
	}
	t.Run("delete", func(t *testing.T) {
		s, sc := open(t)
		if err := s.ScheduleDelete(t.Context(), sc.TenantID, sc.ID); err != nil {
			t.Fatal(err)
		}
		if got := findChildren(t, s, sc); len(got) != 0 {
			t.Errorf("ChildrenFind after delete: %+v, want none", got)
		}
		if tzs, err := s.ChildTimezones(t.Context()); err != nil || len(tzs) != 0 {
			t.Errorf("ChildTimezones after delete: %v, %v; want none", tzs, err)
		}
	})
	t.Run("update with children", func(t *testing.T) {
		s, sc := open(t)
		next := *sc
		next.Version = 2
		if err := s.ScheduleUpdate(t.Context(), &next, 1, []model.Child{childOf(&next, 1)}); err != nil {
			t.Fatal(err)
		}
		if got := findChildren(t, s, sc); len(got) != 1 || got[0] != childOf(&next, 1) {
			t.Errorf("ChildrenFind after update: %+v, want only the new child", got)
		}
		if n, err := s.ChildrenDeleteOrphans(t.Context()); err != nil || n != 0 {
			t.Errorf("ChildrenDeleteOrphans: %d, %v; want 0", n, err)
		}
	})
	t.Run("update without children", func(t *testing.T) {
		s, sc := open(t)
		next := *sc
		next.Version = 2
		if err := s.ScheduleUpdate(t.Context(), &next, 1, nil); err != nil {
			t.Fatal(err)
		}
		if got := findChildren(t, s, sc); len(got) != 1 || got[0] != childOf(sc, 0) {
			t.Errorf("ChildrenFind after update without children: %+v, want the old child", got)
		}
		if n, err := s.ChildrenDeleteOrphans(t.Context()); err != nil || n != 1 {
			t.Errorf("ChildrenDeleteOrphans: %d, %v; want the old child", n, err)
		}
		if got := findChildren(t, s, sc); len(got) != 0 {
			t.Errorf("ChildrenFind after the clean-up: %+v, want none", got)
		}
	})
	t.Run("not the schedule's", func(t *testing.T) {
		s := openTemp(t, Options{})
		sc, _ := typicalOneOff()
		c := childOf(sc, 0)
		c.ScheduleVersion = 9 // another version: the row cannot stand for it
		if _, err := s.ScheduleCreateMany(t.Context(), []store.ScheduleNew{{Schedule: sc, Children: []model.Child{c}}}); err != nil {
			t.Fatal(err)
		}
		if n := bySchedEntries(t, s); n != 1 {
			t.Errorf("children_by_schedule: %d entries, want 1", n)
		}
		if n, err := s.ChildrenDeleteOrphans(t.Context()); err != nil || n != 1 {
			t.Errorf("ChildrenDeleteOrphans: %d, %v; want the child of another version", n, err)
		}
	})
}

// storedHead returns the stored head of fireID's event group.
func storedHead(t *testing.T, s *Store, fireID string) []byte {
	t.Helper()
	var raw []byte
	if err := s.db.View(func(tx *bolt.Tx) error {
		g, err := newEvtx(tx, s.tokens).groupOf(fireID)
		if err != nil || g == nil {
			t.Fatalf("group of %s: %v, %v", fireID, g, err)
		}
		raw = bytes.Clone(tx.Bucket(bEvHeads).Get(seqKey(g.seq)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return raw
}

// The head of a one-off's event group leaves tenant, target, payload and
// the like to the schedule's row, and its events read back as written
// after the schedule is edited or deleted. (The store groups every event:
// these events would otherwise be held in their rows, see oneevent.go.)
func TestOneOffHeadRefersToSchedule(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{groupedOneOffs: true})
	items, fires := oneOffs(t, rand.New(rand.NewPCG(5, 5)), "ten_a", base(), 0, 3, false)
	for i := range items {
		if err := storetest.CreateSchedule(ctx, s, items[i].Schedule, items[i].Children, fires[i:i+1]...); err != nil {
			t.Fatal(err)
		}
	}
	full, err := encodeEvent(fires[0].Events[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range fires {
		raw := storedHead(t, s, fn.Fire.ID)
		if !refersToSchedule(raw) {
			t.Fatalf("head of %s does not refer to its schedule", fn.Fire.ID)
		}
		// Tenant (21 bytes), target (48), payload (59), the rest (4).
		if len(raw) > len(full)-100 {
			t.Errorf("head of %s: %d bytes, in full %d: want at least 100 fewer", fn.Fire.ID, len(raw), len(full))
		}
	}
	check := func(when string) {
		t.Helper()
		for _, fn := range fires {
			e := fn.Events[0]
			if got, err := s.EventGetByID(ctx, e.ID); err != nil || !reflect.DeepEqual(got, roundTrip(t, e)) {
				t.Errorf("%s: event %s: %v\n got %+v\nwant %+v", when, e.ID, err, got, e)
			}
		}
		checkEventIndexes(t, s)
	}
	check("created")

	edited := *items[0].Schedule
	edited.Version, edited.Target.URL, edited.Payload = 2, "https://elsewhere.example.com/", json.RawMessage(`{"edited":true}`)
	if err := s.ScheduleUpdate(ctx, &edited, 1, nil); err != nil {
		t.Fatal(err)
	}
	if refersToSchedule(storedHead(t, s, fires[0].Fire.ID)) {
		t.Error("head still refers to the schedule after an edit")
	}
	check("after an edit")

	if err := s.ScheduleDelete(ctx, items[1].Schedule.TenantID, items[1].Schedule.ID); err != nil {
		t.Fatal(err)
	}
	check("after a delete")
	if !refersToSchedule(storedHead(t, s, fires[2].Fire.ID)) {
		t.Error("head of an untouched schedule was rewritten")
	}

	// The events move on as before.
	e := fires[2].Events[0]
	if n, err := s.EventCancelPending(ctx, e.ScheduleID, "", base()); err != nil || n != 1 {
		t.Fatalf("EventCancelPending: %d, %v", n, err)
	}
	if got, err := s.EventGetByID(ctx, e.ID); err != nil || got.Status != model.EventCancelled || got.Target != e.Target {
		t.Errorf("cancelled event: %+v, %v", got, err)
	}
}

// The one-offs of a ScheduleCreateMany, which writes their first fires in
// the schedules' commit, get heads that refer to their schedules' rows as
// a single create's do; an item whose id exists writes nothing and leaves
// the stored schedule as it was. (Every event in a group, as above.)
func TestOneOffHeadRefersToScheduleInBatch(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{groupedOneOffs: true})
	items, fires := oneOffs(t, rand.New(rand.NewPCG(6, 6)), "ten_a", base(), 0, 4, false)
	if err := storetest.CreateSchedule(ctx, s, items[3].Schedule, items[3].Children); err != nil {
		t.Fatal(err)
	}
	stored, err := s.ScheduleGet(ctx, "ten_a", items[3].Schedule.ID)
	if err != nil {
		t.Fatal(err)
	}
	clash := *items[3].Schedule
	clash.Payload = json.RawMessage(`{"other":true}`)
	items[3].Schedule = &clash
	for i := range items {
		items[i].Fires = fires[i : i+1]
	}
	res, err := s.ScheduleCreateMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, rerr := range res {
		if want := i == 3; errors.Is(rerr, model.ErrConflict) != want {
			t.Fatalf("item %d: %v, want conflict %v", i, rerr, want)
		}
	}
	for _, fn := range fires[:3] {
		if !refersToSchedule(storedHead(t, s, fn.Fire.ID)) {
			t.Errorf("head of %s does not refer to its schedule", fn.Fire.ID)
		}
		e := fn.Events[0]
		if got, err := s.EventGetByID(ctx, e.ID); err != nil || !reflect.DeepEqual(got, roundTrip(t, e)) {
			t.Errorf("event %s: %v\n got %+v\nwant %+v", e.ID, err, got, e)
		}
	}
	if _, err := s.EventGetByID(ctx, fires[3].Events[0].ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("event of the conflicting item: %v, want not found", err)
	}
	if got, err := s.ScheduleGet(ctx, "ten_a", clash.ID); err != nil || !reflect.DeepEqual(got, stored) {
		t.Errorf("schedule of the conflicting item: %v\n got %+v\nwant %+v", err, got, stored)
	}
	checkEventIndexes(t, s)
}
