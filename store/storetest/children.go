package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var childrenTests = []namedTest{
	{"FindByEligibleKeys", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		h3 := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		h3m5 := model.ChildKey{LaunchExpression: "H:3", Minute: 5}
		h30 := model.ChildKey{LaunchExpression: "H:30", Minute: 0} // shares a prefix with H:3
		w1 := model.ChildKey{LaunchExpression: "W:1:3", Minute: 0}
		mm := model.ChildKey{LaunchExpression: "MM:1:15:3", Minute: 0}

		s1 := newSchedule("A", "s1") // p0 Berlin: H:3/0 and W:1:3/0
		createSchedule(t, d, s1, childrenOf(s1, h3, w1))
		s2 := newSchedule("B", "s2") // p0 Berlin, another tenant: H:3/0 and H:3/5
		createSchedule(t, d, s2, childrenOf(s2, h3, h3m5))
		s3 := newSchedule("A", "s3") // p0 Berlin: H:30/0, must not match H:3
		createSchedule(t, d, s3, childrenOf(s3, h30))
		s4 := newSchedule("A", "s4") // p0 UTC: H:3/0, other timezone
		s4.Timezone = "UTC"
		createSchedule(t, d, s4, childrenOf(s4, h3))
		s5 := newSchedule("A", "s5") // p1 Berlin: H:3/0, other partition
		s5.Partition = 1
		createSchedule(t, d, s5, childrenOf(s5, h3, mm))

		for _, tc := range []struct {
			name string
			p    store.ChildrenFindParams
			want []string
		}{
			{"OneKey", store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin", Keys: []model.ChildKey{h3}},
				[]string{"s1/v1/p0/Europe/Berlin/H:3/0", "s2/v1/p0/Europe/Berlin/H:3/0"}},
			{"MinuteMatters", store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin", Keys: []model.ChildKey{h3m5}},
				[]string{"s2/v1/p0/Europe/Berlin/H:3/5"}},
			{"SeveralKeys", store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin", Keys: []model.ChildKey{w1, h30}},
				[]string{"s1/v1/p0/Europe/Berlin/W:1:3/0", "s3/v1/p0/Europe/Berlin/H:30/0"}},
			{"OtherTimezone", store.ChildrenFindParams{Partition: 0, Timezone: "UTC", Keys: []model.ChildKey{h3, h3m5}},
				[]string{"s4/v1/p0/UTC/H:3/0"}},
			{"OtherPartition", store.ChildrenFindParams{Partition: 1, Timezone: "Europe/Berlin", Keys: []model.ChildKey{h3, mm, w1}},
				[]string{"s5/v1/p1/Europe/Berlin/H:3/0", "s5/v1/p1/Europe/Berlin/MM:1:15:3/0"}},
			{"NoMatch", store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin", Keys: []model.ChildKey{mm}},
				[]string{}},
			{"NoKeys", store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin"},
				[]string{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := d.ChildrenFind(ctx, &tc.p)
				requireNoError(t, err, "ChildrenFind")
				for _, c := range got {
					want := map[string]string{"s1": "A", "s2": "B", "s3": "A", "s4": "A", "s5": "A"}[c.ScheduleID]
					requireEqual(t, c.TenantID, want, "child TenantID")
				}
				requireIDs(t, childStrings(got), tc.want, "ChildrenFind")
			})
		}
	}},
	{"Timezones", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		tzs, err := d.ChildTimezones(ctx)
		requireNoError(t, err, "ChildTimezones empty")
		requireEqual(t, len(tzs), 0, "ChildTimezones of an empty store")

		key := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		for i, tz := range []string{"Europe/Berlin", "UTC", "Europe/Berlin", "America/New_York"} {
			s := newSchedule("A", fmt.Sprintf("s%d", i))
			s.Timezone = tz
			s.Partition = i % 2
			createSchedule(t, d, s, childrenOf(s, key))
		}
		none := newSchedule("A", "nochildren")
		none.Timezone = "Asia/Tokyo"
		createSchedule(t, d, none, nil)

		tzs, err = d.ChildTimezones(ctx)
		requireNoError(t, err, "ChildTimezones")
		requireSameIDs(t, tzs, []string{"America/New_York", "Europe/Berlin", "UTC"}, "ChildTimezones")
	}},
	{"TimezonesOfABatch", func(t *testing.T, d store.Driver) {
		// One ScheduleCreateMany adds several children to a timezone (and
		// to more timezones than a handful): each one counts, so the
		// timezone stays until its last child goes.
		ctx := t.Context()
		key := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		var items []store.ScheduleNew
		var want []string
		for i := range 20 {
			tz := fmt.Sprintf("Etc/GMT+%d", i%12)
			if i >= 12 {
				tz = fmt.Sprintf("Etc/GMT-%d", i-11)
			}
			s := newSchedule("A", fmt.Sprintf("z%02d", i))
			s.Timezone = tz
			items = append(items, store.ScheduleNew{Schedule: s, Children: childrenOf(s, key)})
			want = append(want, tz)
		}
		for i := range 3 {
			s := newSchedule("A", fmt.Sprintf("tahiti%d", i))
			s.Timezone = "Pacific/Tahiti"
			items = append(items, store.ScheduleNew{Schedule: s, Children: childrenOf(s, key)})
		}
		res, err := d.ScheduleCreateMany(ctx, items)
		requireNoError(t, err, "ScheduleCreateMany")
		for i, e := range res {
			requireNoError(t, e, fmt.Sprintf("ScheduleCreateMany item %d", i))
		}
		for i := range 3 {
			tzs, err := d.ChildTimezones(ctx)
			requireNoError(t, err, "ChildTimezones")
			requireSameIDs(t, tzs, append(slices.Clone(want), "Pacific/Tahiti"), fmt.Sprintf("ChildTimezones with %d Tahiti schedules", 3-i))
			requireNoError(t, d.ScheduleDelete(ctx, "A", fmt.Sprintf("tahiti%d", i)), "ScheduleDelete")
		}
		tzs, err := d.ChildTimezones(ctx)
		requireNoError(t, err, "ChildTimezones")
		requireSameIDs(t, tzs, want, "ChildTimezones after the Tahiti schedules went")

		// A batch of few timezones.
		items = nil
		for i := range 2 {
			s := newSchedule("A", fmt.Sprintf("kolkata%d", i))
			s.Timezone = "Asia/Kolkata"
			items = append(items, store.ScheduleNew{Schedule: s, Children: childrenOf(s, key)})
		}
		_, err = d.ScheduleCreateMany(ctx, items)
		requireNoError(t, err, "ScheduleCreateMany of two")
		requireNoError(t, d.ScheduleDelete(ctx, "A", "kolkata0"), "ScheduleDelete")
		tzs, err = d.ChildTimezones(ctx)
		requireNoError(t, err, "ChildTimezones")
		requireSameIDs(t, tzs, append(want, "Asia/Kolkata"), "ChildTimezones with one of two Kolkata schedules")
	}},
	{"OneOffsWithFires", func(t *testing.T, d store.Driver) {
		// A one-off saved with its fire (ScheduleCreateMany, alone or
		// with others) may have its child left out of ChildrenFind
		// and ChildTimezones by a driver that writes the fire with the
		// schedule atomically; found, it is as written. Other children are
		// found either way, new children of an update are, and a timezone
		// is listed exactly while it has a child found.
		ctx := t.Context()
		key := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		oneOff := func(id, tz string) store.ScheduleNew {
			s := newSchedule("A", id)
			s.Cron, s.RunAt, s.Timezone, s.EventCount = "", ptr(at(time.Hour)), tz, 1
			f := newFire("A", id, *s.RunAt)
			f.Count = 1
			return store.ScheduleNew{Schedule: s, Children: childrenOf(s, key), Fires: []store.FireNew{{Fire: f, Events: []*model.Event{newEvent("A", id, *s.RunAt, 0)}}}}
		}
		cron := newSchedule("A", "cron") // Europe/Berlin
		createSchedule(t, d, cron, childrenOf(cron, key))
		alone := oneOff("o1", "Asia/Tokyo")
		createSchedule(t, d, alone.Schedule, alone.Children, alone.Fires...)
		res, err := d.ScheduleCreateMany(ctx, []store.ScheduleNew{oneOff("o2", "Asia/Tokyo"), oneOff("o3", "Europe/Berlin")})
		requireNoError(t, err, "ScheduleCreateMany")
		for i, e := range res {
			requireNoError(t, e, fmt.Sprintf("ScheduleCreateMany item %d", i))
		}
		// check finds the children of key in tz: those of must, and of
		// may or not.
		check := func(what, tz string, must, may []string) {
			t.Helper()
			got, err := d.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: 0, Timezone: tz, Keys: []model.ChildKey{key}})
			requireNoError(t, err, "ChildrenFind")
			var want []string
			for _, c := range childStrings(got) {
				if slices.Contains(may, c) {
					continue
				}
				want = append(want, c)
			}
			requireIDs(t, want, must, what+": children in "+tz)
		}
		listed := func(what string, tzs ...string) {
			t.Helper()
			var want []string
			for _, tz := range tzs {
				got, err := d.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: 0, Timezone: tz, Keys: []model.ChildKey{key}})
				requireNoError(t, err, "ChildrenFind")
				if len(got) > 0 {
					want = append(want, tz)
				}
			}
			got, err := d.ChildTimezones(ctx)
			requireNoError(t, err, "ChildTimezones")
			requireSameIDs(t, got, want, what+": ChildTimezones")
		}
		check("created", "Europe/Berlin", []string{"cron/v1/p0/Europe/Berlin/H:3/0"}, []string{"o3/v1/p0/Europe/Berlin/H:3/0"})
		check("created", "Asia/Tokyo", nil, []string{"o1/v1/p0/Asia/Tokyo/H:3/0", "o2/v1/p0/Asia/Tokyo/H:3/0"})
		listed("created", "Europe/Berlin", "Asia/Tokyo")

		upd := *alone.Schedule
		upd.Version, upd.RunAt = 2, ptr(at(2*time.Hour))
		requireNoError(t, d.ScheduleUpdate(ctx, &upd, 1, childrenOf(&upd, key)), "ScheduleUpdate")
		check("updated", "Asia/Tokyo", []string{"o1/v2/p0/Asia/Tokyo/H:3/0"}, []string{"o2/v1/p0/Asia/Tokyo/H:3/0"})
		listed("updated", "Europe/Berlin", "Asia/Tokyo")

		requireNoError(t, d.ScheduleDelete(ctx, "A", "o2"), "ScheduleDelete o2")
		check("o2 deleted", "Asia/Tokyo", []string{"o1/v2/p0/Asia/Tokyo/H:3/0"}, nil)
		requireNoError(t, d.ScheduleDelete(ctx, "A", "o1"), "ScheduleDelete o1")
		check("o1 deleted", "Asia/Tokyo", nil, nil)
		listed("one-offs of Tokyo deleted", "Europe/Berlin", "Asia/Tokyo")
		requireNoError(t, d.ScheduleDelete(ctx, "A", "o3"), "ScheduleDelete o3")
		check("o3 deleted", "Europe/Berlin", []string{"cron/v1/p0/Europe/Berlin/H:3/0"}, nil)
		listed("o3 deleted", "Europe/Berlin")
		requireNoError(t, d.ScheduleDelete(ctx, "A", "cron"), "ScheduleDelete cron")
		listed("every schedule deleted")
	}},
	{"DeleteOrphans", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		key := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		s1 := newSchedule("A", "s1")
		createSchedule(t, d, s1, childrenOf(s1, key))
		s2 := newSchedule("A", "s2")
		createSchedule(t, d, s2, childrenOf(s2, key))

		// Updating s1 without children leaves its version-1 child stale.
		upd := newSchedule("A", "s1")
		upd.Version = 2
		requireNoError(t, d.ScheduleUpdate(ctx, upd, 1, nil), "ScheduleUpdate")

		n, err := d.ChildrenDeleteOrphans(ctx)
		requireNoError(t, err, "ChildrenDeleteOrphans")
		requireEqual(t, n, 1, "ChildrenDeleteOrphans deleted")

		got, err := d.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin", Keys: []model.ChildKey{key}})
		requireNoError(t, err, "ChildrenFind")
		requireIDs(t, childStrings(got), []string{"s2/v1/p0/Europe/Berlin/H:3/0"}, "children after orphan removal")

		n, err = d.ChildrenDeleteOrphans(ctx)
		requireNoError(t, err, "ChildrenDeleteOrphans again")
		requireEqual(t, n, 0, "ChildrenDeleteOrphans again")
	}},
}
