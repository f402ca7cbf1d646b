package embedded

import (
	"fmt"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// impliedEvents are events of schedules whose ids start like each other's
// and their fires' ("s", "s.x", "s-", "s.", "t"): groups whose fire ids
// start with their schedule's id and "." (no ev_sched entry), groups of
// other fire ids (an entry), and loose events; and fire ids with bytes that
// sort before ".".
func impliedEvents() []*model.Event {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []*model.Event
	add := func(sched, fire string, n int, loose bool) {
		for i := range n {
			e := &model.Event{
				ID: model.EventID(fire, i), TenantID: "t", ScheduleID: sched, FireID: fire, Index: i,
				LaunchAt: base.Add(time.Duration(len(out)) * time.Second), Status: model.EventPending, CreatedAt: base, UpdatedAt: base,
			}
			if loose && i == n-1 {
				e.ID = fmt.Sprintf("%s-loose%d", fire, i)
			}
			out = append(out, e)
		}
	}
	add("s", "s.1", 12, false)
	add("s", "s.1-", 3, false)    // a fire id that the one above is a prefix of, then a byte before "."
	add("s", "s.1.5", 2, false)   // a fire id that looks like an event id of s.1
	add("s", "s.", 2, false)      // the prefix itself
	add("s", "s.2", 3, true)      // with a loose event
	add("s", "other", 4, false)   // not implied: an ev_sched entry
	add("s.x", "s.x.1", 3, false) // implied for s.x, under the prefix of s
	add("s-", "s-.1", 2, false)
	add("s.", "s..1", 2, false)
	add("t", "s.9", 2, false) // under the prefix of s, of schedule t: an entry
	return out
}

// EventList by schedule finds the groups that have no ev_sched entry by
// their fire ids: paging after any string (the ids, the fire ids with and
// without their dot, strings with bytes before ".") in pages of any size
// lists exactly the schedule's events after it, in id order.
func TestEventListImpliedGroups(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{})
	events := impliedEvents()
	if _, err := s.EventInsertMany(ctx, events); err != nil {
		t.Fatal(err)
	}
	checkEventIndexes(t, s)
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, k := range []string{"s\x00s.1.\x00", "s.x\x00s.x.1.\x00"} {
			if tx.Bucket(bEvSched).Get([]byte(k)) != nil {
				t.Errorf("ev_sched holds %q: a group of a fire id that starts with its schedule's has an entry", k)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkImpliedLists(t, s, events)
}

func checkImpliedLists(t *testing.T, s *Store, events []*model.Event) {
	t.Helper()
	ctx := t.Context()
	bySched := map[string][]string{}
	afters := []string{"", "s", "s.", "s.1", "s.1.", "s.1-", "s.1.5", "s.1.5.", "s.1.1", "s.10", "s.2.", "s.x", "s.x.", "s-", "s.1-.", "s.1,", "r", "z"}
	for _, e := range events {
		bySched[e.ScheduleID] = append(bySched[e.ScheduleID], e.ID)
		afters = append(afters, e.ID, e.FireID, e.FireID+".")
	}
	for sched, ids := range bySched {
		slices.Sort(ids)
		for _, after := range afters {
			var want []string
			for _, id := range ids {
				if id > after {
					want = append(want, id)
				}
			}
			for _, limit := range []int{1, 2, 5, 1000} {
				var got []string
				p := store.EventListParams{TenantID: "t", ScheduleID: sched, After: after, Limit: limit}
				for {
					list, err := s.EventList(ctx, &p)
					if err != nil {
						t.Fatal(err)
					}
					for _, e := range list {
						got = append(got, e.ID)
					}
					if len(list) < limit {
						break
					}
					p.After = list[len(list)-1].ID
				}
				if !slices.Equal(got, want) {
					t.Errorf("EventList schedule %q after %q limit %d:\n got %v\nwant %v", sched, after, limit, got, want)
				}
			}
		}
	}
}

// EventCancelPending of a schedule cancels the events of its groups with
// and without an ev_sched entry, and none of the schedules whose ids start
// like its own.
func TestEventCancelPendingImpliedGroups(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{})
	events := impliedEvents()
	if _, err := s.EventInsertMany(ctx, events); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, e := range events {
		if e.ScheduleID == "s" {
			want++
		}
	}
	at := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	if n, err := s.EventCancelPending(ctx, "s", "", at); err != nil || n != want {
		t.Fatalf("EventCancelPending(s) = %d, %v; want %d", n, err, want)
	}
	for _, e := range events {
		got, err := s.EventGetByID(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cancelled := got.Status == model.EventCancelled; cancelled != (e.ScheduleID == "s") {
			t.Errorf("event %s of schedule %s: %s after cancelling schedule s", e.ID, e.ScheduleID, got.Status)
		}
	}
	checkEventIndexes(t, s)
}
