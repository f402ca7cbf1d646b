package embedded

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// ScheduleCreateMany takes an id, a fire or an event that sorts after every
// key of its bucket to be absent without a search (above). A batch gets
// the same answers, and leaves the same store, as its items created one by
// one (a create of one item each): with ids in creation
// order, an id twice in a batch, ids that exist (the last one and older
// ones), and a fire or an event stored before its one-off.
// SCHEDULERD_ONERECORD_SEED sets the seed.
func TestCreateManyAbsentAbove(t *testing.T) {
	ctx := t.Context()
	seed := oneSeed(t)
	many := openTemp(t, Options{})
	single := openTemp(t, Options{})
	r := rand.New(rand.NewPCG(seed, 9))
	w := &oneWorld{r: rand.New(rand.NewPCG(seed, 10)), sorted: true}
	renamed := func(it store.ScheduleNew, name string) store.ScheduleNew {
		sc := *it.Schedule
		sc.Name = name
		it.Schedule = &sc
		return it
	}
	cases := map[string]int{}
	for round := range 60 {
		before := slices.Clone(w.scheds)
		var items []store.ScheduleNew
		for range 1 + r.IntN(4) {
			items = append(items, w.oneOff([]string{"ta", "tb"}[r.IntN(2)], ""))
		}
		k := r.IntN(len(items))
		switch c := r.IntN(6); {
		case c == 0: // an id twice in the batch
			items = append(items, renamed(items[k], "again"))
			cases["twice"]++
		case c == 1 && len(before) > 0: // the last id stored
			last := before[len(before)-1]
			items = append(items, renamed(store.ScheduleNew{Schedule: last}, "last"))
			cases["last"]++
		case c == 2 && len(before) > 0: // an older id
			items = append(items, renamed(store.ScheduleNew{Schedule: before[r.IntN(len(before))]}, "older"))
			cases["older"]++
		case c == 3: // the fire of a one-off, stored before it
			fn := []store.FireNew{{Fire: items[k].Fires[0].Fire}}
			for _, s := range []*Store{many, single} {
				if _, _, err := s.FireInsertMany(ctx, fn); err != nil {
					t.Fatal(err)
				}
			}
			cases["fire"]++
		case c == 4: // the event of a one-off, stored before it
			for _, s := range []*Store{many, single} {
				if _, err := s.EventInsertMany(ctx, items[k].Fires[0].Events); err != nil {
					t.Fatal(err)
				}
			}
			cases["event"]++
		}
		res, err := many.ScheduleCreateMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]error, len(items))
		for i, it := range items {
			want[i] = storetest.CreateSchedule(ctx, single, it.Schedule, it.Children, it.Fires...)
		}
		if a, b := errClasses(res), errClasses(want); !reflect.DeepEqual(a, b) {
			t.Fatalf("round %d: ScheduleCreateMany %v, one by one %v", round, a, b)
		}
	}
	if len(cases) < 5 {
		t.Fatalf("cases met: %v", cases)
	}
	for _, sc := range w.scheds {
		a, aerr := many.ScheduleGet(ctx, sc.TenantID, sc.ID)
		b, berr := single.ScheduleGet(ctx, sc.TenantID, sc.ID)
		if errClass(aerr) != errClass(berr) || !reflect.DeepEqual(a, b) {
			t.Fatalf("ScheduleGet %s:\n many:   %+v %v\n single: %+v %v", sc.ID, a, aerr, b, berr)
		}
	}
	compareStores(t, many, single, w, r)
}
