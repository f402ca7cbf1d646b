package embedded

import (
	"encoding/binary"
	"fmt"
	"maps"
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

// childIndex is what a store's children bucket holds, by key, and the
// sole children its rows hold marked (schedChildImplied), by key.
type childIndex struct {
	entries, implied map[string]model.Child
}

// readChildIndex reads the children of s and checks the index: the
// timezone counts are those of the children bucket, and a row's sole child
// has an entry exactly when the row is not marked.
func readChildIndex(t *testing.T, s *Store) childIndex {
	t.Helper()
	ci := childIndex{entries: map[string]model.Child{}, implied: map[string]model.Child{}}
	if err := s.db.View(func(tx *bolt.Tx) error {
		counts, stored := map[string]int64{}, map[string]int64{}
		if err := tx.Bucket(bChildren).ForEach(func(k, _ []byte) error {
			c, err := decodeChild(k)
			ci.entries[string(k)] = c
			counts[c.Timezone]++
			return err
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bChildTZ).ForEach(func(k, v []byte) error {
			stored[string(k)] = int64(binary.BigEndian.Uint64(v))
			return nil
		}); err != nil {
			return err
		}
		if !maps.Equal(counts, stored) {
			t.Errorf("child_timezones %v, the children bucket has %v", stored, counts)
		}
		return tx.Bucket(bSchedules).ForEach(func(key, v []byte) error {
			k := schedKeyID(key)
			_, child, err := decodeScheduleRow([]byte(k), v, s.dict(tx))
			if err != nil {
				return err
			}
			marked := rowChildImplied(v)
			if child == nil {
				if marked {
					t.Errorf("schedule %s: marked, without a sole child", k)
				}
				return nil
			}
			ck := string(childKey(child))
			if _, ok := ci.entries[ck]; ok == marked {
				t.Errorf("schedule %s: marked %v, children entry %v", k, marked, ok)
			}
			if marked {
				ci.implied[ck] = *child
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return ci
}

// timezones returns the distinct timezones of the children of m, sorted.
func timezones(m map[string]model.Child) []string {
	var out []string
	for _, c := range m {
		out = append(out, c.Timezone)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sameChildren checks that lean, a store that leaves one-offs' children
// to their rows, has the children of indexed, which indexes every one
// (Options.indexedOneOffs), but those lean's rows hold marked and orphans
// that lean never had (a marked row updated without children leaves
// none); that ChildTimezones and ChildrenFind of every key of indexed's
// children answer so; and that both keep their counts. It returns lean's
// index.
func sameChildren(t *testing.T, lean, indexed *Store) childIndex {
	t.Helper()
	ctx := t.Context()
	l, x := readChildIndex(t, lean), readChildIndex(t, indexed)
	if len(x.implied) != 0 {
		t.Fatalf("a store that indexes every child has %d rows marked", len(x.implied))
	}
	for k, c := range l.entries {
		if _, ok := x.entries[k]; !ok {
			t.Errorf("child %+v: in the lean store only", c)
		}
	}
	for k, c := range l.implied {
		if _, ok := x.entries[k]; !ok {
			t.Errorf("child %+v: marked in a row, not a child of the indexed store", c)
		}
	}
	for k, c := range x.entries {
		_, entry := l.entries[k]
		_, implied := l.implied[k]
		if !entry && !implied && !orphan(t, indexed, c) {
			t.Errorf("child %+v: not in the lean store", c)
		}
	}
	for _, st := range []struct {
		s    *Store
		want []string
	}{{lean, timezones(l.entries)}, {indexed, timezones(x.entries)}} {
		if tzs, err := st.s.ChildTimezones(ctx); err != nil || !slices.Equal(tzs, st.want) {
			t.Errorf("ChildTimezones %v, %v; want %v", tzs, err, st.want)
		}
	}
	for _, c := range x.entries {
		p := &store.ChildrenFindParams{Partition: c.Partition, Timezone: c.Timezone, Keys: []model.ChildKey{{LaunchExpression: c.LaunchExpression, Minute: c.Minute}}}
		a, aerr := lean.ChildrenFind(ctx, p)
		b, berr := indexed.ChildrenFind(ctx, p)
		if aerr != nil || berr != nil {
			t.Fatal(aerr, berr)
		}
		b = slices.DeleteFunc(b, func(c model.Child) bool { _, ok := l.entries[string(childKey(&c))]; return !ok })
		if !reflect.DeepEqual(a, b) && len(a)+len(b) > 0 {
			t.Errorf("ChildrenFind %+v:\n lean:    %v\n indexed: %v (the lean store's children)", *p, a, b)
		}
	}
	return l
}

// orphan reports whether c is not of its schedule's version in s.
func orphan(t *testing.T, s *Store, c model.Child) bool {
	t.Helper()
	var sc model.Schedule
	switch err := s.db.View(func(tx *bolt.Tx) error { return getScheduleInto(s.dict(tx), []byte(c.ScheduleID), &sc) }); err {
	case nil:
		return sc.Version != c.ScheduleVersion
	case model.ErrNotFound:
		return true
	default:
		t.Fatal(err)
		return false
	}
}

// oneOffIn is w.oneOff in timezone tz.
func oneOffIn(w *oneWorld, tenant, tz string) store.ScheduleNew {
	it := w.oneOff(tenant, "")
	it.Schedule.Timezone, it.Children[0].Timezone = tz, tz
	return it
}

// cronIn returns a schedule of tenant without runAt with children of
// minutes in tz.
func cronIn(w *oneWorld, tenant, tz string, minutes ...int) store.ScheduleNew {
	n, _ := w.next()
	sc := &model.Schedule{ID: fmt.Sprintf("c%d", n), TenantID: tenant, Name: "cron", Cron: "0 3 * * *", Timezone: tz, EventCount: 1,
		Target: model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/"}, MaxAttempts: 3, Misfire: model.MisfireFireOnce,
		Overlap: model.OverlapAllow, State: model.ScheduleActive, Version: 1, Partition: n % 4, CreatedAt: base(), UpdatedAt: base()}
	it := store.ScheduleNew{Schedule: sc}
	for _, m := range minutes {
		it.Children = append(it.Children, model.Child{ScheduleID: sc.ID, TenantID: tenant, ScheduleVersion: 1, Partition: sc.Partition,
			Timezone: tz, LaunchExpression: "H:3", Minute: m})
	}
	w.scheds = append(w.scheds, sc)
	return it
}

// edited returns sc at its next version, and children for it: for a
// one-off, at a runAt moved by an hour.
func edited(sc *model.Schedule, now time.Time) (*model.Schedule, []model.Child) {
	next := *sc
	next.Version, next.Name, next.UpdatedAt = sc.Version+1, "edited", now
	c := model.Child{ScheduleID: sc.ID, TenantID: sc.TenantID, ScheduleVersion: next.Version, Partition: sc.Partition,
		Timezone: sc.Timezone, LaunchExpression: "H:4", Minute: 7}
	if sc.RunAt != nil {
		runAt := sc.RunAt.Add(time.Hour)
		next.RunAt = &runAt
		c.LaunchExpression, c.Minute = "D:"+runAt.Format("2006-01-02"), runAt.Hour()*60+runAt.Minute()
	}
	return &next, []model.Child{c}
}

// One-offs created with their fire in their row (ScheduleCreateMany, alone
// or in a batch) have no children entry and leave the timezone
// counts as they were; their rows keep the mark when the fire or the event
// leaves them; an update with new children indexes those, and updates and
// deletes keep every count exact.
func TestImpliedChild(t *testing.T) {
	ctx := t.Context()
	lean, indexed := openTemp(t, Options{}), openTemp(t, Options{indexedOneOffs: true})
	w := &oneWorld{r: rand.New(rand.NewPCG(5, 5))}
	cron := cronIn(w, "ta", "UTC", 0, 30)
	items := []store.ScheduleNew{oneOffIn(w, "ta", "UTC"), oneOffIn(w, "tb", "Pacific/Tahiti"), oneOffIn(w, "ta", "Pacific/Tahiti")}
	alone := oneOffIn(w, "tb", "Pacific/Tahiti")
	for _, s := range []*Store{lean, indexed} {
		if err := storetest.CreateSchedule(ctx, s, cron.Schedule, cron.Children); err != nil {
			t.Fatal(err)
		}
		if res, err := s.ScheduleCreateMany(ctx, items); firstErr(err, res) != nil {
			t.Fatal(firstErr(err, res))
		}
		if err := storetest.CreateSchedule(ctx, s, alone.Schedule, alone.Children, alone.Fires...); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, wantTZ []string, wantImplied int) {
		t.Helper()
		l := sameChildren(t, lean, indexed)
		if got := timezones(l.entries); !slices.Equal(got, wantTZ) {
			t.Errorf("%s: children in %v, want %v", what, got, wantTZ)
		}
		if len(l.implied) != wantImplied {
			t.Errorf("%s: %d rows hold their child unindexed, want %d", what, len(l.implied), wantImplied)
		}
	}
	check("created", []string{"UTC"}, 4)
	if l := readChildIndex(t, lean); len(l.entries) != len(cron.Children) {
		t.Errorf("%d children entries, want the cron schedule's %d", len(l.entries), len(cron.Children))
	}
	// The fire leaves the row of items[2], the event that of items[1]: the
	// marks stay.
	fence := int64(1)
	for _, s := range []*Store{lean, indexed} {
		if err := s.FireSetDecision(ctx, items[2].Fires[0].Fire.ID, model.FireSkippedOverlap, "note"); err != nil {
			t.Fatal(err)
		}
		claimed, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: items[1].Fires[0].Events[0].Shard, Fence: fence,
			DueBefore: items[1].Fires[0].Events[0].LaunchAt.Add(time.Millisecond), Limit: 10})
		if err != nil || !slices.ContainsFunc(claimed, func(e *model.Event) bool { return e.ID == items[1].Fires[0].Events[0].ID }) {
			t.Fatalf("EventClaimDue: %v %v", claimed, err)
		}
	}
	check("fire and event out of their rows", []string{"UTC"}, 4)
	// New children for a moved runAt are indexed; an update without
	// children leaves none.
	for i, it := range []store.ScheduleNew{items[1], items[0]} {
		next, children := edited(it.Schedule, base())
		if i == 1 {
			children = nil
		}
		for _, s := range []*Store{lean, indexed} {
			if err := s.ScheduleUpdate(ctx, next, it.Schedule.Version, children); err != nil {
				t.Fatal(err)
			}
		}
	}
	check("updated", []string{"Pacific/Tahiti", "UTC"}, 2)
	for _, s := range []*Store{lean, indexed} {
		if _, err := s.ChildrenDeleteOrphans(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("orphans removed", []string{"Pacific/Tahiti", "UTC"}, 2)
	for _, it := range []store.ScheduleNew{alone, items[2]} {
		for _, s := range []*Store{lean, indexed} {
			if err := s.ScheduleDelete(ctx, it.Schedule.TenantID, it.Schedule.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	check("marked one-offs deleted", []string{"Pacific/Tahiti", "UTC"}, 0)
	for _, it := range []store.ScheduleNew{items[1], cron} {
		for _, s := range []*Store{lean, indexed} {
			if err := s.ScheduleDelete(ctx, it.Schedule.TenantID, it.Schedule.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	check("indexed ones deleted", nil, 0)
}

// A random mix of creates (one-offs with their fires, alone and in
// batches, one-offs without, schedules with children, in timezones that
// both have and timezones only one-offs have), updates with and without
// children, deletes, fires and events leaving rows, and orphan clean-ups
// leaves a store that holds one-offs' children in their rows with the
// children of a store that indexes every child but those, and exact
// timezone counts, after every operation. SCHEDULERD_ONERECORD_SEED sets
// the seed.
func TestImpliedChildRandomOps(t *testing.T) {
	ctx := t.Context()
	seed := oneSeed(t)
	lean, indexed := openTemp(t, Options{}), openTemp(t, Options{indexedOneOffs: true})
	both := []*Store{lean, indexed}
	r := rand.New(rand.NewPCG(seed, 11))
	w := &oneWorld{r: rand.New(rand.NewPCG(seed, 12))}
	tenants := []string{"ta", "tb"}
	oneOffTZ := []string{"UTC", "Europe/Berlin", "Pacific/Tahiti"} // Tahiti: one-offs only
	cronTZ := []string{"UTC", "Europe/Berlin"}
	same := func(what string, a, b any, aerr, berr error) {
		t.Helper()
		if errClass(aerr) != errClass(berr) || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s:\n lean:    %v %s\n indexed: %v %s", what, a, errClass(aerr), b, errClass(berr))
		}
	}
	fence := int64(1)
	var marked, markedLeft, markedUpdated, markedDeleted int // marked rows at most; and those whose fire or event left, updated, deleted
	for op := range 250 {
		now := base().Add(time.Duration(op) * time.Second)
		before := readChildIndex(t, lean).implied
		switch k := r.IntN(100); {
		case k < 30 || len(w.scheds) == 0: // a batch
			var items []store.ScheduleNew
			for range 1 + r.IntN(4) {
				switch r.IntN(6) {
				case 0:
					items = append(items, cronIn(w, tenants[r.IntN(2)], cronTZ[r.IntN(2)], r.IntN(3), 10+r.IntN(3)))
				case 1:
					items = append(items, cronIn(w, tenants[r.IntN(2)], cronTZ[r.IntN(2)], r.IntN(3)))
				case 2: // saved without its fire
					it := oneOffIn(w, tenants[r.IntN(2)], oneOffTZ[r.IntN(3)])
					it.Fires = nil
					items = append(items, it)
				default:
					items = append(items, oneOffIn(w, tenants[r.IntN(2)], oneOffTZ[r.IntN(3)]))
				}
			}
			if r.IntN(6) == 0 { // an id that exists: a conflict
				dup := oneOffIn(w, tenants[0], "Pacific/Tahiti")
				w.scheds = w.scheds[:len(w.scheds)-1]
				dup.Schedule.ID = w.scheds[r.IntN(len(w.scheds))].ID
				for i := range dup.Children {
					dup.Children[i].ScheduleID = dup.Schedule.ID
				}
				items = append(items, dup)
			}
			a, aerr := lean.ScheduleCreateMany(ctx, items)
			b, berr := indexed.ScheduleCreateMany(ctx, items)
			same("ScheduleCreateMany", errClasses(a), errClasses(b), aerr, berr)
		case k < 40:
			it := oneOffIn(w, tenants[r.IntN(2)], oneOffTZ[r.IntN(3)])
			aerr := storetest.CreateSchedule(ctx, lean, it.Schedule, it.Children, it.Fires...)
			berr := storetest.CreateSchedule(ctx, indexed, it.Schedule, it.Children, it.Fires...)
			same("create one", nil, nil, aerr, berr)
		case k < 60:
			sc := w.scheds[r.IntN(len(w.scheds))]
			cur, err := lean.ScheduleGet(ctx, sc.TenantID, sc.ID)
			if err != nil {
				continue
			}
			next, children := edited(cur, now)
			switch r.IntN(3) {
			case 0:
				children = nil
			case 1: // more than one: none inline
				c := children[0]
				c.Minute++
				children = append(children, c)
			}
			aerr := lean.ScheduleUpdate(ctx, next, cur.Version, children)
			berr := indexed.ScheduleUpdate(ctx, next, cur.Version, children)
			same("ScheduleUpdate "+sc.ID, nil, nil, aerr, berr)
			if hasChildOf(before, sc.ID) {
				markedUpdated++
			}
		case k < 70:
			sc := w.scheds[r.IntN(len(w.scheds))]
			aerr := lean.ScheduleDelete(ctx, sc.TenantID, sc.ID)
			berr := indexed.ScheduleDelete(ctx, sc.TenantID, sc.ID)
			same("ScheduleDelete "+sc.ID, nil, nil, aerr, berr)
			if hasChildOf(before, sc.ID) {
				markedDeleted++
			}
		case k < 80:
			f := w.fires[r.IntN(len(w.fires))]
			aerr := lean.FireSetDecision(ctx, f, model.FireSkippedOverlap, "note")
			berr := indexed.FireSetDecision(ctx, f, model.FireSkippedOverlap, "note")
			same("FireSetDecision "+f, nil, nil, aerr, berr)
		case k < 92:
			fence++
			p := &store.EventClaimParams{Shard: r.IntN(3), Fence: fence, DueBefore: base().Add(time.Duration(r.IntN(w.n+10)) * time.Second), Limit: 1 + r.IntN(4)}
			a, aerr := lean.EventClaimDue(ctx, p)
			b, berr := indexed.EventClaimDue(ctx, p)
			same(fmt.Sprintf("EventClaimDue %+v", *p), a, b, aerr, berr)
		default:
			for _, s := range both {
				if _, err := s.ChildrenDeleteOrphans(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		l := sameChildren(t, lean, indexed)
		if t.Failed() {
			t.Fatalf("after operation %d", op)
		}
		marked = max(marked, len(l.implied))
		markedLeft = countLeft(t, lean, l.implied)
	}
	if marked < 10 || markedLeft < 3 || markedUpdated < 3 || markedDeleted < 3 {
		t.Errorf("at most %d rows held their child unindexed, %d of them without their fire or event at the end, %d updated, %d deleted: the test did not exercise them",
			marked, markedLeft, markedUpdated, markedDeleted)
	}
	t.Logf("%d schedules; at most %d rows held their child unindexed, %d without their fire or event at the end, %d updated, %d deleted",
		len(w.scheds), marked, markedLeft, markedUpdated, markedDeleted)
}

// hasChildOf reports whether m holds a child of schedule id.
func hasChildOf(m map[string]model.Child, id string) bool {
	for _, c := range m {
		if c.ScheduleID == id {
			return true
		}
	}
	return false
}

// rowOf returns a copy of the row of schedule id.
func rowOf(t *testing.T, s *Store, id string) []byte {
	t.Helper()
	var raw []byte
	if err := s.db.View(func(tx *bolt.Tx) error {
		raw = slices.Clone(tx.Bucket(bSchedules).Get(schedKey(id)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return raw
}

// countLeft returns how many of the marked rows of implied no longer hold
// their fire or their event.
func countLeft(t *testing.T, s *Store, implied map[string]model.Child) int {
	t.Helper()
	n := 0
	for _, c := range implied {
		if raw := rowOf(t, s, c.ScheduleID); !rowHasFire(raw) || !rowHasEvent(raw) {
			n++
		}
	}
	return n
}
