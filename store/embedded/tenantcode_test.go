package embedded

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// codeTenants are tenant ids whose ids start like each other's, and enough
// of them (300) that codes take one and two bytes.
func codeTenants() []string {
	out := []string{"t", "t1", "t10", "t-", "t\x01", ""}
	for i := len(out); i < 300; i++ {
		out = append(out, fmt.Sprintf("ten_%d", i))
	}
	return out
}

// storeCodeTenants writes, per tenant, one-offs with their fires and
// events (tenant i has i%3+1 of them), and the events of impliedEvents
// (tenant "t": groups and loose events). It returns the schedule ids and
// event ids by tenant.
func storeCodeTenants(t *testing.T, s *Store) (scheds, events map[string][]string) {
	t.Helper()
	ctx := t.Context()
	r := rand.New(rand.NewPCG(1, 2))
	scheds, events = map[string][]string{}, map[string][]string{}
	var items []store.ScheduleNew
	n := 0
	for i, tenant := range codeTenants() {
		its, fires := oneOffs(t, r, tenant, base(), n, n+i%3+1, true)
		n += len(its)
		for j := range its {
			its[j].Fires = fires[j : j+1]
			scheds[tenant] = append(scheds[tenant], its[j].Schedule.ID)
			events[tenant] = append(events[tenant], fires[j].Events[0].ID)
		}
		items = append(items, its...)
	}
	for lo := 0; lo < len(items); lo += 100 {
		errs, err := s.ScheduleCreateMany(ctx, items[lo:min(lo+100, len(items))])
		if err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
			t.Fatalf("ScheduleCreateMany: %v %v", errs, err)
		}
	}
	implied := impliedEvents()
	if _, err := s.EventInsertMany(ctx, implied); err != nil {
		t.Fatal(err)
	}
	for _, e := range implied {
		events[e.TenantID] = append(events[e.TenantID], e.ID)
	}
	return scheds, events
}

// checkTenantQueries checks every query of the tenant indexes against the
// ids each tenant was given: lists (paged by two) and counts, and none for
// a tenant that has nothing.
func checkTenantQueries(t *testing.T, s *Store, scheds, events map[string][]string) {
	t.Helper()
	ctx := t.Context()
	for _, tenant := range append(codeTenants(), "t2", "nobody") {
		wantScheds, wantEvents := slices.Sorted(slices.Values(scheds[tenant])), slices.Sorted(slices.Values(events[tenant]))
		var got []string
		for after := ""; ; {
			list, err := s.ScheduleList(ctx, &store.ScheduleListParams{TenantID: tenant, After: after, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, sc := range list {
				got = append(got, sc.ID)
			}
			if len(list) < 2 {
				break
			}
			after = list[len(list)-1].ID
		}
		if !slices.Equal(got, wantScheds) {
			t.Errorf("ScheduleList(%q) = %v, want %v", tenant, got, wantScheds)
		}
		if n, err := s.ScheduleCountByTenant(ctx, tenant, 0); err != nil || n != len(wantScheds) {
			t.Errorf("ScheduleCountByTenant(%q) = %d, %v; want %d", tenant, n, err, len(wantScheds))
		}
		if n, err := s.ScheduleCountByPolicy(ctx, tenant, ""); err != nil || n != len(wantScheds) {
			t.Errorf("ScheduleCountByPolicy(%q, none) = %d, %v; want %d", tenant, n, err, len(wantScheds))
		}
		got = nil
		for after := ""; ; {
			list, err := s.EventList(ctx, &store.EventListParams{TenantID: tenant, After: after, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range list {
				got = append(got, e.ID)
			}
			if len(list) < 2 {
				break
			}
			after = list[len(list)-1].ID
		}
		if !slices.Equal(got, wantEvents) {
			t.Errorf("EventList(%q) = %v, want %v", tenant, got, wantEvents)
		}
		if n, err := s.EventCountByTenant(ctx, tenant, 0); err != nil || n != len(wantEvents) {
			t.Errorf("EventCountByTenant(%q) = %d, %v; want %d", tenant, n, err, len(wantEvents))
		}
		counts, err := s.EventCountByStatus(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if n := counts[model.EventPending]; n != len(wantEvents) || len(counts) > 1 {
			t.Errorf("EventCountByStatus(%q) = %v, want %d pending", tenant, counts, len(wantEvents))
		}
	}
	checkChildTenants(t, s, scheds)
}

// checkChildTenants finds every child in the children bucket with
// ChildrenFind and checks that it names the tenant of its schedule, that
// every schedule of scheds has a child, and that every value is a code.
func checkChildTenants(t *testing.T, s *Store, scheds map[string][]string) {
	t.Helper()
	tenantOf := map[string]string{}
	for tenant, ids := range scheds {
		for _, id := range ids {
			tenantOf[id] = tenant
		}
	}
	var keys []model.Child
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bChildren).ForEach(func(k, v []byte) error {
			if len(v) < 2 || v[0] != 0 {
				t.Errorf("children value %q: not a tenant code", v)
			}
			c, err := decodeChild(k)
			keys = append(keys, c)
			return err
		})
	}); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, k := range keys {
		list, err := s.ChildrenFind(t.Context(), &store.ChildrenFindParams{Partition: k.Partition, Timezone: k.Timezone, Keys: []model.ChildKey{{LaunchExpression: k.LaunchExpression, Minute: k.Minute}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			found[c.ScheduleID] = true
			if want := tenantOf[c.ScheduleID]; c.TenantID != want {
				t.Errorf("ChildrenFind: child of schedule %s names tenant %q, want %q", c.ScheduleID, c.TenantID, want)
			}
		}
	}
	if len(found) != len(tenantOf) {
		t.Errorf("ChildrenFind found the children of %d schedules, want %d", len(found), len(tenantOf))
	}
}

// Tenants whose ids start like each other's, with codes of one and two
// bytes, each find exactly their own schedules and events, and the tenant
// indexes hold codes, not ids.
func TestTenantCodes(t *testing.T) {
	s := openTemp(t, Options{indexedOneOffs: true})
	scheds, events := storeCodeTenants(t, s)
	checkTenantQueries(t, s, scheds, events)
	checkEventIndexes(t, s)
	if err := s.db.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bSchedTenant).Cursor().First()
		if want := binary.AppendUvarint(nil, 1); len(k) < 1 || k[0] != want[0] {
			t.Errorf("first key of %s: %q, want it under code 1", bSchedTenant, k)
		}
		if n := tx.Bucket(bTenantCodes).Stats().KeyN; n != len(codeTenants()) {
			t.Errorf("%s: %d codes, want one for each of %d tenants", bTenantCodes, n, len(codeTenants()))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Deleting a schedule and the events deletes their coded entries.
	ctx := t.Context()
	if err := s.ScheduleDelete(ctx, "t1", scheds["t1"][0]); err != nil {
		t.Fatal(err)
	}
	scheds["t1"] = scheds["t1"][1:]
	if n, err := s.ScheduleCountByTenant(ctx, "t1", 0); err != nil || n != len(scheds["t1"]) {
		t.Errorf("ScheduleCountByTenant(t1) after a delete = %d, %v; want %d", n, err, len(scheds["t1"]))
	}
}
