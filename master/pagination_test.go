package master_test

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/storetest"
)

func newServer(st *embedded.Store, em *recEmitter, wait time.Duration) (*master.Server, error) {
	return master.New(master.Config{AdminKey: testAdminKey, Partitions: 4, IdempotencyWait: wait}, master.Deps{Store: st, Emitter: em, Tokens: countingTokens{st: st, n: new(atomic.Int64)}})
}

func startServer(t *testing.T, srv *master.Server) string {
	t.Helper()
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestPagination(t *testing.T) {
	h := newHarness(t)
	tid, c := h.tenant("acme")
	const viaAPI, total = 100, 1000
	want := map[string]bool{}
	for i := range viaAPI {
		s := h.schedule(c, client.ScheduleCreate{Name: "api-" + strconv.Itoa(i), Cron: ptr("*/10 * * * *"), Target: httpTarget()})
		want[s.Id] = true
	}
	now := time.Now().UTC()
	for i := range total - viaAPI {
		id := "sch_store" + strconv.Itoa(10000+i)
		m := &model.Schedule{
			ID: id, TenantID: tid, Name: "store-" + strconv.Itoa(i), Cron: "0 3 * * *", Timezone: "UTC", EventCount: 1,
			Target: model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/x"}, MaxAttempts: 5,
			Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow, State: model.ScheduleActive,
			Partition: model.PartitionOf(id, 4), Version: 1, CreatedAt: now, UpdatedAt: now,
		}
		if err := storetest.CreateSchedule(h.ctx, h.st, m, nil); err != nil {
			t.Fatal(err)
		}
		want[id] = true
	}
	// Another tenant's schedules must not show up.
	_, other := h.tenant("other")
	h.cronSchedule(other, "foreign")

	walk := func(t *testing.T, limit *int) []string {
		t.Helper()
		var ids []string
		params := &client.ListSchedulesParams{Limit: limit}
		for pages := 0; ; pages++ {
			if pages > total {
				t.Fatal("pagination does not end")
			}
			r, err := c.ListSchedulesWithResponse(h.ctx, params)
			mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
			for _, s := range r.JSON200.Items {
				ids = append(ids, s.Id)
			}
			if r.JSON200.NextCursor == nil {
				return ids
			}
			params.Cursor = r.JSON200.NextCursor
		}
	}
	check := func(t *testing.T, ids []string) {
		t.Helper()
		if len(ids) != total {
			t.Fatalf("%d schedules, want %d", len(ids), total)
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if !want[id] || seen[id] {
				t.Fatalf("unexpected or repeated id %s", id)
			}
			seen[id] = true
		}
		if !sort.StringsAreSorted(ids) {
			t.Fatal("not ordered by id")
		}
	}
	t.Run("DefaultPageSize", func(t *testing.T) { check(t, walk(t, nil)) })
	t.Run("PagesOf7", func(t *testing.T) { check(t, walk(t, ptr(7))) })
	t.Run("OnePageOf1000", func(t *testing.T) { check(t, walk(t, ptr(1000))) })
	t.Run("FilterByState", func(t *testing.T) {
		r, err := c.PauseScheduleWithResponse(h.ctx, "sch_store10000", client.PauseRequest{})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		l, err := c.ListSchedulesWithResponse(h.ctx, &client.ListSchedulesParams{State: ptr(client.ScheduleStatePaused)})
		mustStatus(t, err, l.StatusCode(), l.Body, http.StatusOK)
		if len(l.JSON200.Items) != 1 || l.JSON200.Items[0].Id != "sch_store10000" {
			t.Fatalf("state filter: %d items", len(l.JSON200.Items))
		}
	})
}
