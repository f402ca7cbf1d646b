package embedded

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// ScheduleCreateMany writes the children of a batch in key order, all at
// once: exactly those of the schedules it stores, none of those in
// conflict (an id stored before, or earlier in the batch).
func TestScheduleCreateManyChildrenOfStoredOnly(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	sched := func(id string) *model.Schedule {
		return &model.Schedule{ID: id, TenantID: "t", Name: id, Cron: "* * * * *", Timezone: "UTC", State: model.ScheduleActive, Version: 1, CreatedAt: now, UpdatedAt: now}
	}
	child := func(id, tz string, minute int) model.Child {
		return model.Child{ScheduleID: id, TenantID: "t", ScheduleVersion: 1, Timezone: tz, LaunchExpression: "0", Minute: minute}
	}
	if err := storetest.CreateSchedule(ctx, s, sched("x"), []model.Child{child("x", "Europe/Paris", 7)}); err != nil {
		t.Fatal(err)
	}
	items := []store.ScheduleNew{
		{Schedule: sched("b"), Children: []model.Child{child("b", "UTC", 50), child("b", "UTC", 3)}},
		{Schedule: sched("x"), Children: []model.Child{child("x", "Asia/Tokyo", 1)}},
		{Schedule: sched("a"), Children: []model.Child{child("a", "UTC", 20)}},
		{Schedule: sched("b"), Children: []model.Child{child("b", "America/Lima", 9)}},
	}
	res, err := s.ScheduleCreateMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, model.ErrConflict, nil, model.ErrConflict} {
		if !errors.Is(res[i], want) || (want == nil && res[i] != nil) {
			t.Errorf("item %d: %v, want %v", i, res[i], want)
		}
	}
	tzs, err := s.ChildTimezones(ctx)
	if err != nil || !slices.Equal(tzs, []string{"Europe/Paris", "UTC"}) {
		t.Errorf("ChildTimezones: %q, %v; want Europe/Paris and UTC", tzs, err)
	}
	var keys []model.ChildKey
	for m := range 60 {
		keys = append(keys, model.ChildKey{LaunchExpression: "0", Minute: m})
	}
	got, err := s.ChildrenFind(ctx, &store.ChildrenFindParams{Timezone: "UTC", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, c := range got {
		found = append(found, fmt.Sprintf("%s/%02d", c.ScheduleID, c.Minute))
	}
	slices.Sort(found)
	if want := []string{"a/20", "b/03", "b/50"}; !slices.Equal(found, want) {
		t.Errorf("children in UTC: %q, want %q", found, want)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		// b's two children are listed by schedule; a's and x's sole ones
		// are in their rows.
		if n := tx.Bucket(bChildSched).Stats().KeyN; n != 2 {
			t.Errorf("children_by_schedule holds %d entries, want 2", n)
		}
		if n := tx.Bucket(bChildren).Stats().KeyN; n != 4 {
			t.Errorf("children holds %d entries, want 4", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
