package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var tenantTests = []namedTest{
	{"ListPages", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, id := range []string{"t3", "t1", "t2"} {
			requireNoError(t, d.TenantCreate(ctx, &model.Tenant{ID: id, Name: "name " + id, CreatedAt: base}), "TenantCreate "+id)
		}
		ids := func(ts []*model.Tenant) []string {
			out := make([]string, len(ts))
			for i, x := range ts {
				out[i] = x.ID
			}
			return out
		}
		page, err := d.TenantList(ctx, &store.TenantListParams{Limit: 2})
		requireNoError(t, err, "TenantList first page")
		requireEqual(t, fmt.Sprint(ids(page)), "[t1 t2]", "first page")
		requireEqual(t, page[1].Name, "name t2", "Name")
		page, err = d.TenantList(ctx, &store.TenantListParams{After: "t2", Limit: 2})
		requireNoError(t, err, "TenantList second page")
		requireEqual(t, fmt.Sprint(ids(page)), "[t3]", "second page")
		page, err = d.TenantList(ctx, &store.TenantListParams{After: "t3", Limit: 2})
		requireNoError(t, err, "TenantList past the end")
		requireEqual(t, len(page), 0, "page past the end")
	}},
	{"CreateGet", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		want := &model.Tenant{ID: "t1", Name: "Tenant One", CreatedAt: base}
		requireNoError(t, d.TenantCreate(ctx, want), "TenantCreate")

		got, err := d.TenantGet(ctx, "t1")
		requireNoError(t, err, "TenantGet")
		requireEqual(t, got.ID, want.ID, "ID")
		requireEqual(t, got.Name, want.Name, "Name")
		requireTime(t, got.CreatedAt, want.CreatedAt, "CreatedAt")

		requireIs(t, d.TenantCreate(ctx, &model.Tenant{ID: "t1", Name: "again"}), model.ErrConflict, "duplicate TenantCreate")
		got, err = d.TenantGet(ctx, "t1")
		requireNoError(t, err, "TenantGet after duplicate")
		requireEqual(t, got.Name, want.Name, "Name after duplicate")

		_, err = d.TenantGet(ctx, "nope")
		requireIs(t, err, model.ErrNotFound, "TenantGet unknown")
	}}, {"UpdateKeepsQuotasAndTargets", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		requireNoError(t, d.TenantCreate(ctx, &model.Tenant{ID: "t1", Name: "one", CreatedAt: base}), "TenantCreate")
		want := &model.Tenant{
			ID: "t1", Name: "renamed", Weight: 3, Version: 1, CreatedAt: base,
			Quotas: model.TenantQuotas{MaxSchedules: 7, MaxEventsPerFire: 11, MaxEventsPerMinute: 13, MaxEventsStored: 17},
			Targets: &model.TenantTargets{
				Hosts: []string{"*.example.com"}, CIDRs: []string{"203.0.113.0/24"},
				QueueURLPrefixes: []string{"https://sqs.eu-west-1.amazonaws.com/123456789012/"},
			},
			Notify: []model.Notify{{URL: "https://ops.example.com/hook", On: []model.NotifyKind{model.NotifyHasDead, model.NotifyEventDead}}},
		}
		requireNoError(t, d.TenantUpdate(ctx, want, 0), "TenantUpdate")
		got, err := d.TenantGet(ctx, "t1")
		requireNoError(t, err, "TenantGet")
		requireEqual(t, got.Name, "renamed", "Name")
		requireEqual(t, got.Weight, 3, "Weight")
		requireEqual(t, got.Quotas, want.Quotas, "Quotas")
		requireEqual(t, got.Version, int64(1), "Version")
		requireTime(t, got.CreatedAt, base, "CreatedAt")
		if got.Targets == nil || !slices.Equal(got.Targets.Hosts, want.Targets.Hosts) ||
			!slices.Equal(got.Targets.CIDRs, want.Targets.CIDRs) ||
			!slices.Equal(got.Targets.QueueURLPrefixes, want.Targets.QueueURLPrefixes) {
			t.Fatalf("Targets: got %+v, want %+v", got.Targets, want.Targets)
		}
		if len(got.Notify) != 1 || got.Notify[0].URL != want.Notify[0].URL || !slices.Equal(got.Notify[0].On, want.Notify[0].On) {
			t.Fatalf("Notify: got %+v, want %+v", got.Notify, want.Notify)
		}

		stale := *want
		stale.Version, stale.Name = 2, "stale"
		requireIs(t, d.TenantUpdate(ctx, &stale, 0), model.ErrConflict, "TenantUpdate with an old version")
		got, err = d.TenantGet(ctx, "t1")
		requireNoError(t, err, "TenantGet after conflict")
		requireEqual(t, got.Name, "renamed", "Name after conflict")

		cleared := *got
		cleared.Targets, cleared.Quotas, cleared.Version = nil, model.TenantQuotas{}, 2
		requireNoError(t, d.TenantUpdate(ctx, &cleared, 1), "TenantUpdate clearing")
		got, err = d.TenantGet(ctx, "t1")
		requireNoError(t, err, "TenantGet after clearing")
		if got.Targets != nil || got.Quotas != (model.TenantQuotas{}) {
			t.Fatalf("after clearing: targets %+v quotas %+v, want none", got.Targets, got.Quotas)
		}

		requireIs(t, d.TenantUpdate(ctx, &model.Tenant{ID: "nope", Version: 1}, 0), model.ErrNotFound, "TenantUpdate unknown")
	}},
	{"ScheduleCountByTenant", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, id := range []string{"s1", "s2", "s3"} {
			createSchedule(t, d, newSchedule("t1", id), nil)
		}
		createSchedule(t, d, newSchedule("t2", "s4"), nil)
		// "t" is a prefix of both tenant ids: it must count nothing.
		for _, c := range []struct {
			tenant string
			max    int
			want   int
		}{{"t1", 0, 3}, {"t1", 2, 2}, {"t1", 5, 3}, {"t2", 0, 1}, {"t", 0, 0}, {"t3", 0, 0}} {
			n, err := d.ScheduleCountByTenant(ctx, c.tenant, c.max)
			requireNoError(t, err, "ScheduleCountByTenant")
			requireEqual(t, n, c.want, fmt.Sprintf("ScheduleCountByTenant(%s, %d)", c.tenant, c.max))
		}
		requireNoError(t, d.ScheduleDelete(ctx, "t1", "s2"), "ScheduleDelete")
		n, err := d.ScheduleCountByTenant(ctx, "t1", 0)
		requireNoError(t, err, "ScheduleCountByTenant after delete")
		requireEqual(t, n, 2, "ScheduleCountByTenant after delete")
	}},
	{"EventCountByTenant", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		var es []*model.Event
		for i := range 4 {
			es = append(es, newEvent("t1", "s1", base, i))
		}
		es = append(es, newEvent("t2", "s2", base, 0))
		insertEvents(t, d, es...)
		// Finished events count while they are retained.
		requireNoError(t, transition(t, d, store.EventTransition{ID: es[0].ID, From: model.EventPending, To: model.EventCancelled, FinishedAt: ptr(base), At: base}), "cancel")
		for _, c := range []struct {
			tenant string
			max    int
			want   int
		}{{"t1", 0, 4}, {"t1", 3, 3}, {"t1", 9, 4}, {"t2", 0, 1}, {"t", 0, 0}} {
			n, err := d.EventCountByTenant(ctx, c.tenant, c.max)
			requireNoError(t, err, "EventCountByTenant")
			requireEqual(t, n, c.want, fmt.Sprintf("EventCountByTenant(%s, %d)", c.tenant, c.max))
		}
		// Retention removes the finished one.
		_, err := d.EventDeleteFinishedBefore(ctx, base.Add(time.Second), 100)
		requireNoError(t, err, "EventDeleteFinishedBefore")
		n, err := d.EventCountByTenant(ctx, "t1", 0)
		requireNoError(t, err, "EventCountByTenant after retention")
		requireEqual(t, n, 3, "EventCountByTenant after retention")
	}},
}
