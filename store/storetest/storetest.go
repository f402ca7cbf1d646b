// Package storetest is the conformance suite of store.Driver.
//
// Every driver's tests call Exercise with a constructor of fresh, empty
// drivers. New behaviour of the contract is added here, never to one
// driver's own tests, so that the embedded and the MongoDB drivers cannot
// drift apart.
//
// The suite is deliberately small in data: the MongoDB driver is tested
// against FerretDB, where one update costs about 150 ms, so the whole suite
// stays at a few hundred store operations. Times are derived from a fixed
// base with whole-second offsets because MongoDB keeps milliseconds only.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// base is the fixed instant every fixture is derived from.
var base = time.Date(2030, time.January, 2, 3, 0, 0, 0, time.UTC)

// Exercise runs the conformance suite. newDriver must return a fresh, empty
// driver for every call; it is called once per leaf subtest and should
// register its own clean-up with t.Cleanup.
func Exercise(t *testing.T, newDriver func(t *testing.T) store.Driver) {
	t.Helper()

	for _, group := range []struct {
		name  string
		tests []namedTest
	}{
		{"Tenant", tenantTests},
		{"APIKey", apiKeyTests},
		{"Idempotency", idempotencyTests},
		{"Schedule", scheduleTests},
		{"Children", childrenTests},
		{"Watermark", watermarkTests},
		{"Fire", fireTests},
		{"Event", eventTests},
		{"Policy", policyTests},
		{"Lease", leaseTests},
		{"Lifecycle", lifecycleTests},
	} {
		t.Run(group.name, func(t *testing.T) {
			for _, tt := range group.tests {
				t.Run(tt.name, func(t *testing.T) {
					tt.fn(t, newDriver(t))
				})
			}
		})
	}
}

type namedTest struct {
	name string
	fn   func(t *testing.T, d store.Driver)
}

// ---------------------------------------------------------------- helpers

func requireNoError(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", what, err)
	}
}

func requireIs(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func requireEqual[T comparable](t *testing.T, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func requireTime(t *testing.T, got, want time.Time, what string) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func requireTimePtr(t *testing.T, got, want *time.Time, what string) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Fatalf("%s: got %v, want %v", what, got, want)
	default:
		requireTime(t, *got, *want, what)
	}
}

func requireJSON(t *testing.T, got, want json.RawMessage, what string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: stored payload %q is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want payload %q is not JSON: %v", what, want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("%s: got payload %s, want %s", what, gb, wb)
	}
}

func requireIDs(t *testing.T, got, want []string, what string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got ids %v, want %v", what, got, want)
	}
}

func requireSameIDs(t *testing.T, got, want []string, what string) {
	t.Helper()
	g := slices.Clone(got)
	w := slices.Clone(want)
	sort.Strings(g)
	sort.Strings(w)
	requireIDs(t, g, w, what)
}

func ptr[T any](v T) *T { return &v }

func at(d time.Duration) time.Time { return base.Add(d) }

func scheduleIDs(ss []*model.Schedule) []string {
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	return ids
}

func eventIDs(es []*model.Event) []string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return ids
}

func fireIDs(fs []*model.Fire) []string {
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.ID
	}
	return ids
}

func policyIDs(ps []*model.Policy) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids
}

func childStrings(cs []model.Child) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%s/v%d/p%d/%s/%s/%d", c.ScheduleID, c.ScheduleVersion, c.Partition, c.Timezone, c.LaunchExpression, c.Minute)
	}
	sort.Strings(out)
	return out
}

func newSchedule(tenantID, id string) *model.Schedule {
	return &model.Schedule{
		ID:          id,
		TenantID:    tenantID,
		Name:        "name-" + id,
		Cron:        "0 3 * * *",
		Timezone:    "Europe/Berlin",
		EventCount:  2,
		Window:      time.Hour,
		Target:      model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/hook"},
		Payload:     json.RawMessage(`{"k":"v"}`),
		MaxAttempts: 3,
		Misfire:     model.MisfireFireOnce,
		Overlap:     model.OverlapAllow,
		State:       model.ScheduleActive,
		Partition:   0,
		Version:     1,
		CreatedAt:   base,
		UpdatedAt:   base,
	}
}

func childrenOf(s *model.Schedule, keys ...model.ChildKey) []model.Child {
	cs := make([]model.Child, len(keys))
	for i, k := range keys {
		cs[i] = model.Child{
			ScheduleID:       s.ID,
			TenantID:         s.TenantID,
			ScheduleVersion:  s.Version,
			Partition:        s.Partition,
			Timezone:         s.Timezone,
			LaunchExpression: k.LaunchExpression,
			Minute:           k.Minute,
		}
	}
	return cs
}

func newFire(tenantID, scheduleID string, fireTime time.Time) *model.Fire {
	return &model.Fire{
		ID:         model.FireID(scheduleID, 1, fireTime),
		ScheduleID: scheduleID,
		TenantID:   tenantID,
		FireTime:   fireTime,
		LocalTime:  fireTime.Format(time.RFC3339),
		Count:      2,
		Decision:   model.FireEmitted,
		CreatedAt:  base,
	}
}

// newEvent returns a pending event of shard 0 launching at fireTime.
func newEvent(tenantID, scheduleID string, fireTime time.Time, index int) *model.Event {
	return &model.Event{
		ID:          model.EventID(model.FireID(scheduleID, 1, fireTime), index),
		TenantID:    tenantID,
		ScheduleID:  scheduleID,
		FireID:      model.FireID(scheduleID, 1, fireTime),
		FireTime:    fireTime,
		Index:       index,
		Count:       index + 1,
		LaunchAt:    fireTime,
		Deadline:    ptr(fireTime.Add(time.Hour)),
		Target:      model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/hook"},
		Payload:     json.RawMessage(fmt.Sprintf(`{"i":%d}`, index)),
		MaxAttempts: 3,
		Status:      model.EventPending,
		CreatedAt:   base,
		UpdatedAt:   base,
	}
}

func newPolicy(tenantID, id string, maxInFlight int) *model.Policy {
	return &model.Policy{
		ID:           id,
		TenantID:     tenantID,
		Name:         "name-" + id,
		MaxInFlight:  maxInFlight,
		TokenTimeout: time.Minute,
		Version:      1,
		CreatedAt:    base,
		UpdatedAt:    base,
	}
}

func insertEvents(t *testing.T, d store.Driver, es ...*model.Event) {
	t.Helper()
	n, err := d.EventInsertMany(t.Context(), es)
	requireNoError(t, err, "EventInsertMany")
	requireEqual(t, n, len(es), "EventInsertMany inserted")
}

func getEvent(t *testing.T, d store.Driver, id string) *model.Event {
	t.Helper()
	e, err := d.EventGetByID(t.Context(), id)
	requireNoError(t, err, "EventGetByID "+id)
	return e
}

func transition(t *testing.T, d store.Driver, tr store.EventTransition) error {
	t.Helper()
	errs, err := d.EventTransition(t.Context(), []store.EventTransition{tr})
	requireNoError(t, err, "EventTransition")
	requireEqual(t, len(errs), 1, "EventTransition results")
	return errs[0]
}

func createPolicy(t *testing.T, d store.Driver, p *model.Policy) {
	t.Helper()
	requireNoError(t, d.PolicyCreate(t.Context(), p), "PolicyCreate "+p.ID)
}

func createSchedule(t *testing.T, d store.Driver, s *model.Schedule, cs []model.Child) {
	t.Helper()
	requireNoError(t, d.ScheduleCreate(t.Context(), s, cs), "ScheduleCreate "+s.ID)
}

// --------------------------------------------------------------- tenants

var tenantTests = []namedTest{
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
	}},
}

// -------------------------------------------------------------- API keys

var apiKeyTests = []namedTest{
	{"CreateGetList", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		// Inserted newest first to check that APIKeyList orders by age.
		keys := []*model.APIKey{
			{ID: "k2", TenantID: "A", Hash: model.HashAPIKey("clear2"), Prefix: "cle2", CreatedAt: at(2 * time.Second)},
			{ID: "k1", TenantID: "A", Hash: model.HashAPIKey("clear1"), Prefix: "cle1", CreatedAt: at(time.Second)},
			{ID: "k3", TenantID: "B", Hash: model.HashAPIKey("clear3"), Prefix: "cle3", CreatedAt: at(0)},
		}
		for _, k := range keys {
			requireNoError(t, d.APIKeyCreate(ctx, k), "APIKeyCreate "+k.ID)
		}

		got, err := d.APIKeyGetByHash(ctx, model.HashAPIKey("clear1"))
		requireNoError(t, err, "APIKeyGetByHash")
		requireEqual(t, got.ID, "k1", "ID")
		requireEqual(t, got.TenantID, "A", "TenantID")
		requireEqual(t, got.Prefix, "cle1", "Prefix")
		requireTime(t, got.CreatedAt, at(time.Second), "CreatedAt")
		if got.RevokedAt != nil {
			t.Fatalf("RevokedAt: got %v, want nil", got.RevokedAt)
		}

		_, err = d.APIKeyGetByHash(ctx, model.HashAPIKey("unknown"))
		requireIs(t, err, model.ErrNotFound, "APIKeyGetByHash unknown")

		listA, err := d.APIKeyList(ctx, "A")
		requireNoError(t, err, "APIKeyList A")
		ids := make([]string, len(listA))
		for i, k := range listA {
			ids[i] = k.ID
		}
		requireIDs(t, ids, []string{"k1", "k2"}, "APIKeyList A")

		listB, err := d.APIKeyList(ctx, "B")
		requireNoError(t, err, "APIKeyList B")
		requireEqual(t, len(listB), 1, "APIKeyList B length")
		requireEqual(t, listB[0].ID, "k3", "APIKeyList B")

		listC, err := d.APIKeyList(ctx, "C")
		requireNoError(t, err, "APIKeyList C")
		requireEqual(t, len(listC), 0, "APIKeyList of a tenant without keys")
	}},
	{"CreateConflicts", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		requireNoError(t, d.APIKeyCreate(ctx, &model.APIKey{ID: "k1", TenantID: "A", Hash: "h1", CreatedAt: base}), "APIKeyCreate")
		requireIs(t, d.APIKeyCreate(ctx, &model.APIKey{ID: "k1", TenantID: "A", Hash: "h2", CreatedAt: base}), model.ErrConflict, "same id")
		requireIs(t, d.APIKeyCreate(ctx, &model.APIKey{ID: "k2", TenantID: "B", Hash: "h1", CreatedAt: base}), model.ErrConflict, "same hash")
		_, err := d.APIKeyGetByHash(ctx, "h2")
		requireIs(t, err, model.ErrNotFound, "rejected key must not be stored")
	}},
	{"Revoke", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		requireNoError(t, d.APIKeyCreate(ctx, &model.APIKey{ID: "k1", TenantID: "A", Hash: "h1", CreatedAt: base}), "APIKeyCreate")

		requireIs(t, d.APIKeyRevoke(ctx, "B", "k1", at(time.Second)), model.ErrNotFound, "revoke by another tenant")
		got, err := d.APIKeyGetByHash(ctx, "h1")
		requireNoError(t, err, "APIKeyGetByHash")
		if got.RevokedAt != nil {
			t.Fatalf("another tenant revoked the key")
		}

		requireNoError(t, d.APIKeyRevoke(ctx, "A", "k1", at(2*time.Second)), "APIKeyRevoke")
		requireNoError(t, d.APIKeyRevoke(ctx, "A", "k1", at(3*time.Second)), "APIKeyRevoke twice")
		got, err = d.APIKeyGetByHash(ctx, "h1")
		requireNoError(t, err, "APIKeyGetByHash revoked")
		requireTimePtr(t, got.RevokedAt, ptr(at(2*time.Second)), "RevokedAt keeps the first time")

		requireIs(t, d.APIKeyRevoke(ctx, "A", "nope", base), model.ErrNotFound, "revoke unknown")
	}},
}

// ----------------------------------------------------------- idempotency

var idempotencyTests = []namedTest{
	{"PutGetDelete", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		first := &model.IdempotencyRecord{TenantID: "A", Key: "k", RequestHash: "rh1", Status: 201, Body: []byte(`{"id":"s1"}`), CreatedAt: base}
		_, err := d.IdempotencyPut(ctx, first)
		requireNoError(t, err, "IdempotencyPut")

		second := &model.IdempotencyRecord{TenantID: "A", Key: "k", RequestHash: "rh2", Status: 400, Body: []byte(`{}`), CreatedAt: at(time.Second)}
		prev, err := d.IdempotencyPut(ctx, second)
		requireIs(t, err, model.ErrConflict, "IdempotencyPut twice")
		if prev == nil {
			t.Fatalf("IdempotencyPut twice: want the existing record")
		}
		requireEqual(t, prev.RequestHash, "rh1", "existing RequestHash")
		requireEqual(t, prev.Status, 201, "existing Status")

		got, err := d.IdempotencyGet(ctx, "A", "k")
		requireNoError(t, err, "IdempotencyGet")
		requireEqual(t, got.RequestHash, "rh1", "RequestHash")
		requireEqual(t, got.Status, 201, "Status")
		requireEqual(t, string(got.Body), `{"id":"s1"}`, "Body")
		requireTime(t, got.CreatedAt, base, "CreatedAt")

		_, err = d.IdempotencyGet(ctx, "B", "k")
		requireIs(t, err, model.ErrNotFound, "IdempotencyGet of another tenant")

		// The same key in another tenant is a different record.
		_, err = d.IdempotencyPut(ctx, &model.IdempotencyRecord{TenantID: "B", Key: "k", RequestHash: "rhB", Status: 201, CreatedAt: at(time.Hour)})
		requireNoError(t, err, "IdempotencyPut same key other tenant")

		n, err := d.IdempotencyDeleteBefore(ctx, at(time.Minute))
		requireNoError(t, err, "IdempotencyDeleteBefore")
		requireEqual(t, n, 1, "IdempotencyDeleteBefore deleted")
		_, err = d.IdempotencyGet(ctx, "A", "k")
		requireIs(t, err, model.ErrNotFound, "IdempotencyGet after delete")
		_, err = d.IdempotencyGet(ctx, "B", "k")
		requireNoError(t, err, "IdempotencyGet of the newer record")
	}},
}

// ------------------------------------------------------------- schedules

var scheduleTests = []namedTest{
	{"CreateGet", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		s := newSchedule("A", "s1")
		s.PolicyID = "p1"
		s.StartAt = ptr(at(time.Hour))
		s.Spread = true
		s.Priority = 7
		createSchedule(t, d, s, childrenOf(s, model.ChildKey{LaunchExpression: "H:3", Minute: 0}))

		got, err := d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, got.ID, s.ID, "ID")
		requireEqual(t, got.TenantID, s.TenantID, "TenantID")
		requireEqual(t, got.Name, s.Name, "Name")
		requireEqual(t, got.Cron, s.Cron, "Cron")
		requireEqual(t, got.Timezone, s.Timezone, "Timezone")
		requireEqual(t, got.EventCount, s.EventCount, "EventCount")
		requireEqual(t, got.PolicyID, s.PolicyID, "PolicyID")
		requireEqual(t, got.Window, s.Window, "Window")
		requireEqual(t, got.Spread, s.Spread, "Spread")
		requireEqual(t, got.Priority, s.Priority, "Priority")
		requireEqual(t, got.Target, s.Target, "Target")
		requireJSON(t, got.Payload, s.Payload, "Payload")
		requireEqual(t, got.MaxAttempts, s.MaxAttempts, "MaxAttempts")
		requireTimePtr(t, got.StartAt, s.StartAt, "StartAt")
		requireTimePtr(t, got.EndAt, nil, "EndAt")
		requireTimePtr(t, got.RunAt, nil, "RunAt")
		requireEqual(t, got.State, s.State, "State")
		requireEqual(t, got.Version, s.Version, "Version")
		requireTime(t, got.CreatedAt, s.CreatedAt, "CreatedAt")

		dup := newSchedule("A", "s1")
		dup.Name = "dup"
		requireIs(t, d.ScheduleCreate(ctx, dup, nil), model.ErrConflict, "duplicate ScheduleCreate")
		got, err = d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet after duplicate")
		requireEqual(t, got.Name, s.Name, "Name after duplicate")

		_, err = d.ScheduleGet(ctx, "B", "s1")
		requireIs(t, err, model.ErrNotFound, "ScheduleGet of another tenant")
		_, err = d.ScheduleGet(ctx, "A", "nope")
		requireIs(t, err, model.ErrNotFound, "ScheduleGet unknown")
	}},
	{"CreateOneOff", func(t *testing.T, d store.Driver) {
		s := newSchedule("A", "once")
		s.Cron = ""
		s.RunAt = ptr(at(90 * time.Second))
		createSchedule(t, d, s, nil)
		got, err := d.ScheduleGet(t.Context(), "A", "once")
		requireNoError(t, err, "ScheduleGet")
		if !got.IsOneOff() {
			t.Fatalf("one-off schedule lost RunAt")
		}
		requireTimePtr(t, got.RunAt, s.RunAt, "RunAt")
		requireEqual(t, got.Cron, "", "Cron")
	}},
	{"GetMany", func(t *testing.T, d store.Driver) {
		createSchedule(t, d, newSchedule("A", "s1"), nil)
		createSchedule(t, d, newSchedule("B", "s2"), nil)
		createSchedule(t, d, newSchedule("A", "s3"), nil)
		got, err := d.ScheduleGetMany(t.Context(), []string{"s1", "s2", "missing"})
		requireNoError(t, err, "ScheduleGetMany")
		requireSameIDs(t, scheduleIDs(got), []string{"s1", "s2"}, "ScheduleGetMany")

		got, err = d.ScheduleGetMany(t.Context(), nil)
		requireNoError(t, err, "ScheduleGetMany empty")
		requireEqual(t, len(got), 0, "ScheduleGetMany empty")
	}},
	{"List", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, id := range []string{"s4", "s2", "s1", "s3", "s5"} {
			s := newSchedule("A", id)
			switch id {
			case "s2":
				s.State = model.SchedulePaused
			case "s3", "s4":
				s.PolicyID = "p1"
			}
			if id == "s5" {
				s.Name = "report-daily"
			}
			createSchedule(t, d, s, nil)
		}
		createSchedule(t, d, newSchedule("B", "s0"), nil)
		createSchedule(t, d, newSchedule("B", "s9"), nil)

		for _, tc := range []struct {
			name string
			p    store.ScheduleListParams
			want []string
		}{
			{"All", store.ScheduleListParams{TenantID: "A", Limit: 100}, []string{"s1", "s2", "s3", "s4", "s5"}},
			{"FirstPage", store.ScheduleListParams{TenantID: "A", Limit: 2}, []string{"s1", "s2"}},
			{"NextPage", store.ScheduleListParams{TenantID: "A", Limit: 2, After: "s2"}, []string{"s3", "s4"}},
			{"LastPage", store.ScheduleListParams{TenantID: "A", Limit: 2, After: "s4"}, []string{"s5"}},
			{"State", store.ScheduleListParams{TenantID: "A", Limit: 100, State: model.SchedulePaused}, []string{"s2"}},
			{"Policy", store.ScheduleListParams{TenantID: "A", Limit: 100, PolicyID: "p1"}, []string{"s3", "s4"}},
			{"NamePrefix", store.ScheduleListParams{TenantID: "A", Limit: 100, NamePrefix: "report-"}, []string{"s5"}},
			{"OtherTenant", store.ScheduleListParams{TenantID: "B", Limit: 100}, []string{"s0", "s9"}},
			{"UnknownTenant", store.ScheduleListParams{TenantID: "C", Limit: 100}, []string{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := d.ScheduleList(ctx, &tc.p)
				requireNoError(t, err, "ScheduleList")
				requireIDs(t, scheduleIDs(got), tc.want, "ScheduleList")
			})
		}
	}},
	{"Update", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		s := newSchedule("A", "s1")
		createSchedule(t, d, s, childrenOf(s, model.ChildKey{LaunchExpression: "H:3", Minute: 0}))

		upd := newSchedule("A", "s1")
		upd.Name = "renamed"
		upd.Version = 2
		upd.UpdatedAt = at(time.Minute)
		requireNoError(t, d.ScheduleUpdate(ctx, upd, 1, nil), "ScheduleUpdate")
		got, err := d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, got.Name, "renamed", "Name")
		requireEqual(t, got.Version, int64(2), "Version")
		requireTime(t, got.UpdatedAt, at(time.Minute), "UpdatedAt")

		stale := newSchedule("A", "s1")
		stale.Name = "stale"
		stale.Version = 2
		requireIs(t, d.ScheduleUpdate(ctx, stale, 1, nil), model.ErrConflict, "ScheduleUpdate with a stale version")

		other := newSchedule("B", "s1")
		other.Name = "hijack"
		other.Version = 3
		requireIs(t, d.ScheduleUpdate(ctx, other, 2, nil), model.ErrNotFound, "ScheduleUpdate by another tenant")

		missing := newSchedule("A", "nope")
		missing.Version = 2
		requireIs(t, d.ScheduleUpdate(ctx, missing, 1, nil), model.ErrNotFound, "ScheduleUpdate unknown")

		got, err = d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, got.Name, "renamed", "Name after rejected updates")
	}},
	{"UpdateReplacesChildren", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		oldKey := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		newKey := model.ChildKey{LaunchExpression: "H:4", Minute: 30}
		s := newSchedule("A", "s1")
		createSchedule(t, d, s, childrenOf(s, oldKey))

		upd := newSchedule("A", "s1")
		upd.Cron = "30 4 * * *"
		upd.Version = 2
		requireNoError(t, d.ScheduleUpdate(ctx, upd, 1, childrenOf(upd, newKey)), "ScheduleUpdate")

		got, err := d.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin", Keys: []model.ChildKey{oldKey, newKey}})
		requireNoError(t, err, "ChildrenFind")
		requireIDs(t, childStrings(got), []string{"s1/v2/p0/Europe/Berlin/H:4/30"}, "children after update")
	}},
	{"Delete", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		key := model.ChildKey{LaunchExpression: "H:3", Minute: 0}
		s := newSchedule("A", "s1")
		createSchedule(t, d, s, childrenOf(s, key))

		requireIs(t, d.ScheduleDelete(ctx, "B", "s1"), model.ErrNotFound, "ScheduleDelete by another tenant")
		_, err := d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "schedule survives another tenant's delete")

		requireNoError(t, d.ScheduleDelete(ctx, "A", "s1"), "ScheduleDelete")
		_, err = d.ScheduleGet(ctx, "A", "s1")
		requireIs(t, err, model.ErrNotFound, "ScheduleGet after delete")
		requireIs(t, d.ScheduleDelete(ctx, "A", "s1"), model.ErrNotFound, "ScheduleDelete twice")

		got, err := d.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: 0, Timezone: "Europe/Berlin", Keys: []model.ChildKey{key}})
		requireNoError(t, err, "ChildrenFind")
		requireEqual(t, len(got), 0, "children left after ScheduleDelete")
	}},
	{"CountByPolicy", func(t *testing.T, d store.Driver) {
		for _, s := range []*model.Schedule{newSchedule("A", "s1"), newSchedule("A", "s2"), newSchedule("A", "s3"), newSchedule("B", "s4")} {
			if s.ID != "s3" {
				s.PolicyID = "p1"
			}
			createSchedule(t, d, s, nil)
		}
		n, err := d.ScheduleCountByPolicy(t.Context(), "A", "p1")
		requireNoError(t, err, "ScheduleCountByPolicy")
		requireEqual(t, n, 2, "ScheduleCountByPolicy A")
		n, err = d.ScheduleCountByPolicy(t.Context(), "B", "p1")
		requireNoError(t, err, "ScheduleCountByPolicy")
		requireEqual(t, n, 1, "ScheduleCountByPolicy B")
		n, err = d.ScheduleCountByPolicy(t.Context(), "C", "p1")
		requireNoError(t, err, "ScheduleCountByPolicy")
		requireEqual(t, n, 0, "ScheduleCountByPolicy C")
	}},
}

// -------------------------------------------------------------- children

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

// ------------------------------------------------------------- watermark

var watermarkTests = []namedTest{
	{"Advance", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		w, err := d.WatermarkGet(ctx, 3)
		requireNoError(t, err, "WatermarkGet unset")
		if !w.Until.IsZero() || w.Fence != 0 {
			t.Fatalf("WatermarkGet unset: got %+v, want zero", w)
		}

		requireNoError(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(time.Minute), Fence: 5}), "WatermarkAdvance")
		requireNoError(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(2 * time.Minute), Fence: 5}), "WatermarkAdvance same fence")
		requireIs(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(time.Minute), Fence: 5}), model.ErrConflict, "WatermarkAdvance backwards")
		requireIs(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(5 * time.Minute), Fence: 4}), model.ErrConflict, "WatermarkAdvance stale fence")

		w, err = d.WatermarkGet(ctx, 3)
		requireNoError(t, err, "WatermarkGet")
		requireTime(t, w.Until, at(2*time.Minute), "Until")
		requireEqual(t, w.Fence, int64(5), "Fence")
		requireEqual(t, w.Partition, 3, "Partition")

		// A new owner with a larger fence moves on; the old owner then loses.
		requireNoError(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(3 * time.Minute), Fence: 6}), "WatermarkAdvance new fence")
		requireIs(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(4 * time.Minute), Fence: 5}), model.ErrConflict, "WatermarkAdvance old owner")
		w, err = d.WatermarkGet(ctx, 3)
		requireNoError(t, err, "WatermarkGet")
		requireTime(t, w.Until, at(3*time.Minute), "Until")
		requireEqual(t, w.Fence, int64(6), "Fence")

		w, err = d.WatermarkGet(ctx, 4)
		requireNoError(t, err, "WatermarkGet other partition")
		if !w.Until.IsZero() {
			t.Fatalf("watermark leaked to another partition: %+v", w)
		}
	}},
}

// ----------------------------------------------------------------- fires

var fireTests = []namedTest{
	{"InsertGet", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		f := newFire("A", "s1", at(time.Hour))
		ok, err := d.FireInsert(ctx, f)
		requireNoError(t, err, "FireInsert")
		requireEqual(t, ok, true, "FireInsert inserted")

		again := newFire("A", "s1", at(time.Hour))
		again.Count = 99
		again.Decision = model.FireTriggered
		ok, err = d.FireInsert(ctx, again)
		requireNoError(t, err, "FireInsert again")
		requireEqual(t, ok, false, "FireInsert again inserted")

		got, err := d.FireGet(ctx, "A", f.ID)
		requireNoError(t, err, "FireGet")
		requireEqual(t, got.ScheduleID, "s1", "ScheduleID")
		requireEqual(t, got.Count, 2, "Count keeps the first version")
		requireEqual(t, got.Decision, model.FireEmitted, "Decision keeps the first version")
		requireTime(t, got.FireTime, at(time.Hour), "FireTime")
		requireEqual(t, got.LocalTime, f.LocalTime, "LocalTime")

		_, err = d.FireGet(ctx, "B", f.ID)
		requireIs(t, err, model.ErrNotFound, "FireGet of another tenant")
		_, err = d.FireGet(ctx, "A", "nope")
		requireIs(t, err, model.ErrNotFound, "FireGet unknown")
	}},
	{"List", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		var want []string
		for i := range 4 {
			f := newFire("A", "s1", at(time.Duration(i)*time.Hour))
			_, err := d.FireInsert(ctx, f)
			requireNoError(t, err, "FireInsert")
			want = append([]string{f.ID}, want...)
		}
		_, err := d.FireInsert(ctx, newFire("A", "s2", at(0)))
		requireNoError(t, err, "FireInsert s2")

		got, err := d.FireList(ctx, &store.FireListParams{TenantID: "A", ScheduleID: "s1", Limit: 100})
		requireNoError(t, err, "FireList")
		requireIDs(t, fireIDs(got), want, "FireList newest first")

		got, err = d.FireList(ctx, &store.FireListParams{TenantID: "A", ScheduleID: "s1", Limit: 2})
		requireNoError(t, err, "FireList page 1")
		requireIDs(t, fireIDs(got), want[:2], "FireList page 1")
		got, err = d.FireList(ctx, &store.FireListParams{TenantID: "A", ScheduleID: "s1", Limit: 2, Before: got[1].FireTime})
		requireNoError(t, err, "FireList page 2")
		requireIDs(t, fireIDs(got), want[2:], "FireList page 2")

		got, err = d.FireList(ctx, &store.FireListParams{TenantID: "B", ScheduleID: "s1", Limit: 100})
		requireNoError(t, err, "FireList other tenant")
		requireEqual(t, len(got), 0, "FireList of another tenant's schedule")
	}},
	{"LatestBefore", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, h := range []int{1, 2, 4} {
			_, err := d.FireInsert(ctx, newFire("A", "s1", at(time.Duration(h)*time.Hour)))
			requireNoError(t, err, "FireInsert")
		}
		_, err := d.FireInsert(ctx, newFire("A", "s2", at(3*time.Hour)))
		requireNoError(t, err, "FireInsert s2")

		got, err := d.FireLatestBefore(ctx, "s1", at(4*time.Hour))
		requireNoError(t, err, "FireLatestBefore")
		requireTime(t, got.FireTime, at(2*time.Hour), "FireLatestBefore is strictly before")
		requireEqual(t, got.ScheduleID, "s1", "ScheduleID")

		_, err = d.FireLatestBefore(ctx, "s1", at(time.Hour))
		requireIs(t, err, model.ErrNotFound, "FireLatestBefore none")
	}},
	{"SetDecision", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		f := newFire("A", "s1", at(time.Hour))
		_, err := d.FireInsert(ctx, f)
		requireNoError(t, err, "FireInsert")
		requireNoError(t, d.FireSetDecision(ctx, f.ID, model.FireSkippedOverlap, "previous fire still running"), "FireSetDecision")
		got, err := d.FireGet(ctx, "A", f.ID)
		requireNoError(t, err, "FireGet")
		requireEqual(t, got.Decision, model.FireSkippedOverlap, "Decision")
		requireEqual(t, got.Note, "previous fire still running", "Note")
		requireEqual(t, got.Count, f.Count, "Count kept")
		requireIs(t, d.FireSetDecision(ctx, "nope", model.FireLate, ""), model.ErrNotFound, "FireSetDecision unknown")
	}},
}

// ---------------------------------------------------------------- events

var eventTests = []namedTest{
	{"InsertIsIdempotent", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		e0 := newEvent("A", "s1", at(time.Hour), 0)
		e1 := newEvent("A", "s1", at(time.Hour), 1)
		insertEvents(t, d, e0)

		dup := newEvent("A", "s1", at(time.Hour), 0)
		dup.Payload = json.RawMessage(`{"second":true}`)
		dup.LaunchAt = at(2 * time.Hour)
		dup.Status = model.EventDead
		n, err := d.EventInsertMany(ctx, []*model.Event{dup, e1, e1})
		requireNoError(t, err, "EventInsertMany with duplicates")
		requireEqual(t, n, 1, "EventInsertMany inserted only the new event")

		got := getEvent(t, d, e0.ID)
		requireJSON(t, got.Payload, e0.Payload, "Payload keeps the first version")
		requireTime(t, got.LaunchAt, e0.LaunchAt, "LaunchAt keeps the first version")
		requireEqual(t, got.Status, model.EventPending, "Status keeps the first version")

		list, err := d.EventList(ctx, &store.EventListParams{TenantID: "A", Limit: 100})
		requireNoError(t, err, "EventList")
		requireIDs(t, eventIDs(list), []string{e0.ID, e1.ID}, "one event per id")

		n, err = d.EventInsertMany(ctx, nil)
		requireNoError(t, err, "EventInsertMany empty")
		requireEqual(t, n, 0, "EventInsertMany empty")
	}},
	{"GetRoundTripAndTenantScope", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		e := newEvent("A", "s1", at(time.Hour), 0)
		e.PolicyID = "p1"
		e.Priority = 3
		e.Shard = 5
		e.ReleaseToken = "secret-token"
		insertEvents(t, d, e)

		got, err := d.EventGet(ctx, "A", e.ID)
		requireNoError(t, err, "EventGet")
		requireEqual(t, got.TenantID, "A", "TenantID")
		requireEqual(t, got.ScheduleID, e.ScheduleID, "ScheduleID")
		requireEqual(t, got.FireID, e.FireID, "FireID")
		requireTime(t, got.FireTime, e.FireTime, "FireTime")
		requireEqual(t, got.Index, e.Index, "Index")
		requireEqual(t, got.Count, e.Count, "Count")
		requireTime(t, got.LaunchAt, e.LaunchAt, "LaunchAt")
		requireTimePtr(t, got.Deadline, e.Deadline, "Deadline")
		requireEqual(t, got.Priority, 3, "Priority")
		requireEqual(t, got.PolicyID, "p1", "PolicyID")
		requireEqual(t, got.Target, e.Target, "Target")
		requireJSON(t, got.Payload, e.Payload, "Payload")
		requireEqual(t, got.MaxAttempts, e.MaxAttempts, "MaxAttempts")
		requireEqual(t, got.Shard, 5, "Shard")
		requireEqual(t, got.Status, model.EventPending, "Status")
		// The release token is hidden from the API's JSON but must be stored.
		requireEqual(t, got.ReleaseToken, "secret-token", "ReleaseToken")

		_, err = d.EventGet(ctx, "B", e.ID)
		requireIs(t, err, model.ErrNotFound, "EventGet of another tenant")
		_, err = d.EventGet(ctx, "A", "nope")
		requireIs(t, err, model.ErrNotFound, "EventGet unknown")
		got, err = d.EventGetByID(ctx, e.ID)
		requireNoError(t, err, "EventGetByID")
		requireEqual(t, got.TenantID, "A", "EventGetByID TenantID")
		_, err = d.EventGetByID(ctx, "nope")
		requireIs(t, err, model.ErrNotFound, "EventGetByID unknown")
	}},
	{"List", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		f1, f2 := at(time.Hour), at(2*time.Hour)
		a0 := newEvent("A", "s1", f1, 0)
		a1 := newEvent("A", "s1", f1, 1)
		a2 := newEvent("A", "s1", f2, 0)
		a3 := newEvent("A", "s2", f1, 0)
		b0 := newEvent("B", "s9", f1, 0)
		insertEvents(t, d, a0, a1, a2, a3, b0)
		requireNoError(t, transition(t, d, store.EventTransition{ID: a1.ID, From: model.EventPending, To: model.EventCancelled, FinishedAt: ptr(base), At: base}), "cancel a1")

		all := []string{a0.ID, a1.ID, a2.ID, a3.ID}
		sort.Strings(all)
		for _, tc := range []struct {
			name string
			p    store.EventListParams
			want []string
		}{
			{"All", store.EventListParams{TenantID: "A", Limit: 100}, all},
			{"Page1", store.EventListParams{TenantID: "A", Limit: 3}, all[:3]},
			{"Page2", store.EventListParams{TenantID: "A", Limit: 3, After: all[2]}, all[3:]},
			{"Schedule", store.EventListParams{TenantID: "A", ScheduleID: "s1", Limit: 100}, []string{a0.ID, a1.ID, a2.ID}},
			{"Fire", store.EventListParams{TenantID: "A", FireID: a0.FireID, Limit: 100}, []string{a0.ID, a1.ID}},
			{"Status", store.EventListParams{TenantID: "A", Status: model.EventCancelled, Limit: 100}, []string{a1.ID}},
			{"LaunchRange", store.EventListParams{TenantID: "A", ScheduleID: "s1", From: f2, To: f2.Add(time.Second), Limit: 100}, []string{a2.ID}},
			{"LaunchRangeExcludesTo", store.EventListParams{TenantID: "A", ScheduleID: "s1", From: f1, To: f2, Limit: 100}, []string{a0.ID, a1.ID}},
			{"OtherTenantScheduleFilter", store.EventListParams{TenantID: "B", ScheduleID: "s1", Limit: 100}, []string{}},
			{"OtherTenantFireFilter", store.EventListParams{TenantID: "B", FireID: a0.FireID, Limit: 100}, []string{}},
			{"OtherTenant", store.EventListParams{TenantID: "B", Limit: 100}, []string{b0.ID}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := d.EventList(ctx, &tc.p)
				requireNoError(t, err, "EventList")
				requireIDs(t, eventIDs(got), tc.want, "EventList")
			})
		}
	}},
	{"ClaimDue", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		mk := func(i int, shard int, launch time.Duration) *model.Event {
			e := newEvent("A", "s1", base, i)
			e.Shard = shard
			e.LaunchAt = at(launch)
			return e
		}
		late := mk(0, 1, 30*time.Second)
		early := mk(1, 1, 10*time.Second)
		mid := mk(2, 1, 20*time.Second)
		notDue := mk(3, 1, 60*time.Second)   // LaunchAt == DueBefore: not due
		otherShard := mk(4, 2, 0)            // another shard
		retrying := mk(5, 1, 40*time.Second) // retrying counts as claimable
		delivered := mk(6, 1, 0)             // holds a token: not claimable
		insertEvents(t, d, late, early, mid, notDue, otherShard, retrying, delivered)
		requireNoError(t, transition(t, d, store.EventTransition{ID: retrying.ID, From: model.EventPending, To: model.EventRetrying, At: base}), "to retrying")
		requireNoError(t, transition(t, d, store.EventTransition{ID: delivered.ID, From: model.EventPending, To: model.EventDelivered, At: base}), "to delivered")

		got, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 1, Fence: 7, DueBefore: at(time.Minute), Limit: 2})
		requireNoError(t, err, "EventClaimDue")
		requireIDs(t, eventIDs(got), []string{early.ID, mid.ID}, "first claim: earliest first, limited")
		for _, e := range got {
			requireEqual(t, e.Status, model.EventScheduled, "returned Status")
			requireEqual(t, e.Fence, int64(7), "returned Fence")
			stored := getEvent(t, d, e.ID)
			requireEqual(t, stored.Status, model.EventScheduled, "stored Status")
			requireEqual(t, stored.Fence, int64(7), "stored Fence")
		}

		got, err = d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 1, Fence: 7, DueBefore: at(time.Minute), Limit: 10})
		requireNoError(t, err, "EventClaimDue again")
		requireIDs(t, eventIDs(got), []string{late.ID, retrying.ID}, "second claim: the rest that is due")

		got, err = d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 1, Fence: 7, DueBefore: at(time.Minute), Limit: 10})
		requireNoError(t, err, "EventClaimDue third")
		requireEqual(t, len(got), 0, "nothing left to claim under the same fence")

		requireEqual(t, getEvent(t, d, notDue.ID).Status, model.EventPending, "not-due event untouched")
		requireEqual(t, getEvent(t, d, otherShard.ID).Status, model.EventPending, "other shard untouched")
		requireEqual(t, getEvent(t, d, delivered.ID).Status, model.EventDelivered, "delivered event untouched")
	}},
	{"ClaimDueReclaimsOlderFence", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		e0 := newEvent("A", "s1", at(time.Second), 0)
		e1 := newEvent("A", "s1", at(2*time.Second), 1)
		insertEvents(t, d, e0, e1)
		got, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Minute), Limit: 10})
		requireNoError(t, err, "claim with fence 1")
		requireIDs(t, eventIDs(got), []string{e0.ID, e1.ID}, "claim with fence 1")
		for _, e := range got {
			requireEqual(t, e.TakenOver, false, "TakenOver of a first claim")
		}

		// The shard changed owner: the new owner takes over what the old one
		// had loaded, and learns that it was taken over.
		e2 := newEvent("A", "s1", at(3*time.Second), 2)
		insertEvents(t, d, e2)
		got, err = d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 2, DueBefore: at(time.Minute), Limit: 10})
		requireNoError(t, err, "claim with fence 2")
		requireIDs(t, eventIDs(got), []string{e0.ID, e1.ID, e2.ID}, "re-claim under a newer fence")
		for _, e := range got {
			requireEqual(t, e.TakenOver, e.ID != e2.ID, "TakenOver of "+e.ID)
		}
		requireEqual(t, getEvent(t, d, e0.ID).Fence, int64(2), "stored Fence")
		requireEqual(t, getEvent(t, d, e0.ID).TakenOver, false, "TakenOver is not stored")
		many, err := d.EventGetMany(ctx, []string{e0.ID, "no-such-event", e2.ID})
		requireNoError(t, err, "EventGetMany")
		requireEqual(t, len(many), 2, "EventGetMany finds the two that exist")
		requireEqual(t, many[e0.ID].Fence, int64(2), "EventGetMany e0 fence")
		requireEqual(t, many[e2.ID].Status, model.EventScheduled, "EventGetMany e2 status")

		// The old owner can neither re-claim nor transition them.
		got, err = d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Minute), Limit: 10})
		requireNoError(t, err, "claim with fence 1 again")
		requireEqual(t, len(got), 0, "old fence re-claims nothing")
		requireIs(t, transition(t, d, store.EventTransition{ID: e0.ID, From: model.EventScheduled, Fence: 1, To: model.EventDelivering, At: base}),
			model.ErrConflict, "transition with a stale fence")
		requireNoError(t, transition(t, d, store.EventTransition{ID: e0.ID, From: model.EventScheduled, Fence: 2, To: model.EventDelivering, At: base}),
			"transition with the current fence")
	}},
	{"ClaimDueConcurrent", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		var all []string
		var es []*model.Event
		for i := range 6 {
			e := newEvent("A", "s1", at(time.Duration(i)*time.Second), i)
			es = append(es, e)
			all = append(all, e.ID)
		}
		insertEvents(t, d, es...)

		const claimers = 3
		results := make([][]*model.Event, claimers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range claimers {
			wg.Go(func() {
				<-start
				got, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 4, DueBefore: at(time.Minute), Limit: 10})
				if err != nil {
					t.Errorf("claimer %d: %v", c, err)
				}
				results[c] = got
			})
		}
		close(start)
		wg.Wait()

		var claimed []string
		for _, r := range results {
			claimed = append(claimed, eventIDs(r)...)
		}
		requireSameIDs(t, claimed, all, "every event claimed exactly once")
	}},
	{"TransitionCompareAndSet", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		e := newEvent("A", "s1", base, 0)
		insertEvents(t, d, e)
		_, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 3, DueBefore: at(time.Minute), Limit: 1})
		requireNoError(t, err, "EventClaimDue")

		errs, err := d.EventTransition(ctx, []store.EventTransition{
			{ID: e.ID, From: model.EventPending, To: model.EventDelivering, At: base},             // wrong status
			{ID: e.ID, From: model.EventScheduled, Fence: 2, To: model.EventDelivering, At: base}, // stale fence
			{ID: "nope", From: model.EventScheduled, To: model.EventDelivering, At: base},         // unknown
			{ID: e.ID, From: model.EventScheduled, Fence: 3, To: model.EventDelivering, At: at(time.Second),
				Attempts: 1, TokenExpiresAt: ptr(at(time.Minute))}, // wins
			{ID: e.ID, From: model.EventScheduled, Fence: 3, To: model.EventDelivering, At: base}, // already moved
		})
		requireNoError(t, err, "EventTransition")
		requireEqual(t, len(errs), 5, "results")
		requireIs(t, errs[0], model.ErrConflict, "wrong From")
		requireIs(t, errs[1], model.ErrConflict, "stale fence")
		requireIs(t, errs[2], model.ErrNotFound, "unknown event")
		requireNoError(t, errs[3], "matching transition")
		requireIs(t, errs[4], model.ErrConflict, "second transition from the old status")

		got := getEvent(t, d, e.ID)
		requireEqual(t, got.Status, model.EventDelivering, "Status")
		requireEqual(t, got.Attempts, 1, "Attempts")
		requireEqual(t, got.Fence, int64(3), "Fence unchanged by transitions")
		requireTimePtr(t, got.TokenExpiresAt, ptr(at(time.Minute)), "TokenExpiresAt")
		requireTime(t, got.UpdatedAt, at(time.Second), "UpdatedAt")
		requireTime(t, got.LaunchAt, e.LaunchAt, "LaunchAt unchanged when not set")
	}},
	{"TransitionRequiresPrevious", func(t *testing.T, d store.Driver) {
		// A release hands its token to the next waiting event in the same
		// call: e2 starts only if e1's release won.
		ctx := t.Context()
		e1 := newEvent("A", "s1", base, 0)
		e2 := newEvent("A", "s1", at(time.Second), 1)
		e3 := newEvent("A", "s1", at(2*time.Second), 2)
		insertEvents(t, d, e1, e2, e3)
		_, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 5, DueBefore: at(time.Minute), Limit: 10})
		requireNoError(t, err, "EventClaimDue")
		requireNoError(t, transition(t, d, store.EventTransition{ID: e1.ID, From: model.EventScheduled, Fence: 5, To: model.EventDelivering, TokenExpiresAt: ptr(at(time.Minute)), At: base}), "e1 delivering")

		release := func(id string) store.EventTransition {
			return store.EventTransition{ID: id, From: model.EventDelivering, To: model.EventReleased, FinishedAt: ptr(base), ClearToken: true, At: base}
		}
		start := func(id string) store.EventTransition {
			return store.EventTransition{ID: id, From: model.EventScheduled, Fence: 5, To: model.EventDelivering, TokenExpiresAt: ptr(at(2 * time.Minute)), At: base, RequiresPrevious: true}
		}

		// The first release wins: the next event starts.
		errs, err := d.EventTransition(ctx, []store.EventTransition{release(e1.ID), start(e2.ID)})
		requireNoError(t, err, "EventTransition")
		requireEqual(t, len(errs), 2, "results")
		requireNoError(t, errs[0], "release e1")
		requireNoError(t, errs[1], "start e2 after the release won")
		requireEqual(t, getEvent(t, d, e1.ID).Status, model.EventReleased, "e1 Status")
		got := getEvent(t, d, e2.ID)
		requireEqual(t, got.Status, model.EventDelivering, "e2 Status")
		requireTimePtr(t, got.TokenExpiresAt, ptr(at(2*time.Minute)), "e2 TokenExpiresAt")

		// Releasing e1 again loses: e3 is not started, and neither is the
		// one after a skipped transition (the skip chains).
		errs, err = d.EventTransition(ctx, []store.EventTransition{release(e1.ID), start(e3.ID), release(e2.ID)})
		requireNoError(t, err, "EventTransition")
		requireEqual(t, len(errs), 3, "results")
		requireIs(t, errs[0], model.ErrConflict, "second release of e1")
		requireIs(t, errs[1], model.ErrConflict, "e3 skipped")
		requireNoError(t, errs[2], "release e2 (no RequiresPrevious)")
		requireEqual(t, getEvent(t, d, e3.ID).Status, model.EventScheduled, "e3 untouched")
		requireTimePtr(t, getEvent(t, d, e3.ID).TokenExpiresAt, nil, "e3 TokenExpiresAt untouched")

		// A skipped transition makes the next RequiresPrevious one skip too.
		r3 := start(e3.ID)
		r3.ID, r3.From, r3.RequiresPrevious = "nope", model.EventDelivering, false
		errs, err = d.EventTransition(ctx, []store.EventTransition{r3, start(e3.ID), start(e3.ID)})
		requireNoError(t, err, "EventTransition")
		requireIs(t, errs[0], model.ErrNotFound, "unknown event")
		requireIs(t, errs[1], model.ErrConflict, "skipped after a failure")
		requireIs(t, errs[2], model.ErrConflict, "skipped after a skip")
		requireEqual(t, getEvent(t, d, e3.ID).Status, model.EventScheduled, "e3 still untouched")

		// On the first transition of a call it is never applied.
		errs, err = d.EventTransition(ctx, []store.EventTransition{start(e3.ID)})
		requireNoError(t, err, "EventTransition")
		requireIs(t, errs[0], model.ErrConflict, "RequiresPrevious first")
		requireEqual(t, getEvent(t, d, e3.ID).Status, model.EventScheduled, "e3 still scheduled")
	}},
	{"TransitionConcurrent", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		e := newEvent("A", "s1", base, 0)
		insertEvents(t, d, e)
		_, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Minute), Limit: 1})
		requireNoError(t, err, "EventClaimDue")

		const racers = 4
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for r := range racers {
			wg.Go(func() {
				<-start
				res, err := d.EventTransition(ctx, []store.EventTransition{{ID: e.ID, From: model.EventScheduled, Fence: 1, To: model.EventDelivering, Attempts: r + 1, At: base}})
				if err != nil {
					errs[r] = err
					return
				}
				errs[r] = res[0]
			})
		}
		close(start)
		wg.Wait()

		winners := 0
		for r, err := range errs {
			switch {
			case err == nil:
				winners++
			case errors.Is(err, model.ErrConflict):
			default:
				t.Fatalf("racer %d: unexpected error %v", r, err)
			}
		}
		requireEqual(t, winners, 1, "exactly one transition wins")
	}},
	{"Lifecycle", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		done := newEvent("A", "s1", base, 0)
		retry := newEvent("A", "s1", base, 1)
		insertEvents(t, d, done, retry)
		_, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Minute), Limit: 10})
		requireNoError(t, err, "EventClaimDue")

		t.Run("Complete", func(t *testing.T) {
			for _, tr := range []store.EventTransition{
				{ID: done.ID, From: model.EventScheduled, Fence: 1, To: model.EventDelivering, Attempts: 1, At: at(time.Second)},
				{ID: done.ID, From: model.EventDelivering, Fence: 1, To: model.EventDelivered, DeliveredAt: ptr(at(2 * time.Second)), TokenExpiresAt: ptr(at(time.Minute)), At: at(2 * time.Second)},
				{ID: done.ID, From: model.EventDelivered, To: model.EventReleased, ClearToken: true, FinishedAt: ptr(at(3 * time.Second)), At: at(3 * time.Second)},
			} {
				requireNoError(t, transition(t, d, tr), fmt.Sprintf("%s -> %s", tr.From, tr.To))
			}
			got := getEvent(t, d, done.ID)
			requireEqual(t, got.Status, model.EventReleased, "Status")
			requireEqual(t, got.Attempts, 1, "Attempts")
			requireTimePtr(t, got.DeliveredAt, ptr(at(2*time.Second)), "DeliveredAt")
			requireTimePtr(t, got.FinishedAt, ptr(at(3*time.Second)), "FinishedAt")
			requireTimePtr(t, got.TokenExpiresAt, nil, "TokenExpiresAt cleared")
		})

		t.Run("RetryThenDeadThenRedrive", func(t *testing.T) {
			requireNoError(t, transition(t, d, store.EventTransition{ID: retry.ID, From: model.EventScheduled, Fence: 1, To: model.EventDelivering, Attempts: 1, At: at(time.Second)}), "deliver")
			requireNoError(t, transition(t, d, store.EventTransition{ID: retry.ID, From: model.EventDelivering, Fence: 1, To: model.EventRetrying,
				LaunchAt: at(2 * time.Minute), LastError: "HTTP 503", At: at(2 * time.Second)}), "retry")
			got := getEvent(t, d, retry.ID)
			requireEqual(t, got.Status, model.EventRetrying, "Status")
			requireTime(t, got.LaunchAt, at(2*time.Minute), "LaunchAt of the retry")
			requireEqual(t, got.LastError, "HTTP 503", "LastError")
			requireEqual(t, got.Attempts, 1, "Attempts kept")

			claimed, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Minute), Limit: 10})
			requireNoError(t, err, "EventClaimDue before the retry is due")
			requireEqual(t, len(claimed), 0, "retry claimed before it is due")
			claimed, err = d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(3 * time.Minute), Limit: 10})
			requireNoError(t, err, "EventClaimDue when the retry is due")
			requireIDs(t, eventIDs(claimed), []string{retry.ID}, "retry claimed when due")
			requireEqual(t, claimed[0].Attempts, 1, "claimed Attempts")

			requireNoError(t, transition(t, d, store.EventTransition{ID: retry.ID, From: model.EventScheduled, Fence: 1, To: model.EventDelivering, Attempts: 2, At: at(3 * time.Minute)}), "deliver again")
			requireNoError(t, transition(t, d, store.EventTransition{ID: retry.ID, From: model.EventDelivering, Fence: 1, To: model.EventDead,
				LastError: "HTTP 500", FinishedAt: ptr(at(4 * time.Minute)), At: at(4 * time.Minute)}), "dead")
			got = getEvent(t, d, retry.ID)
			requireEqual(t, got.Status, model.EventDead, "Status")
			requireEqual(t, got.Attempts, 2, "Attempts")
			requireEqual(t, got.LastError, "HTTP 500", "LastError")

			requireNoError(t, transition(t, d, store.EventTransition{ID: retry.ID, From: model.EventDead, To: model.EventPending,
				ResetAttempts: true, LaunchAt: at(5 * time.Minute), At: at(5 * time.Minute)}), "redrive")
			got = getEvent(t, d, retry.ID)
			requireEqual(t, got.Status, model.EventPending, "Status after redrive")
			requireEqual(t, got.Attempts, 0, "Attempts after redrive")
			requireTime(t, got.LaunchAt, at(5*time.Minute), "LaunchAt after redrive")
		})
	}},
	{"CancelPending", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		f1, f2 := at(time.Hour), at(2*time.Hour)
		p0 := newEvent("A", "s1", f1, 0) // pending
		s1 := newEvent("A", "s1", f1, 1) // scheduled
		r2 := newEvent("A", "s1", f1, 2) // retrying
		d3 := newEvent("A", "s1", f1, 3) // delivered: kept
		q0 := newEvent("A", "s1", f2, 0) // pending, other fire
		o0 := newEvent("A", "s2", f1, 0) // other schedule
		s1.Shard = 1
		insertEvents(t, d, p0, s1, r2, d3, q0, o0)
		_, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 1, Fence: 1, DueBefore: f2, Limit: 10})
		requireNoError(t, err, "EventClaimDue")
		requireNoError(t, transition(t, d, store.EventTransition{ID: r2.ID, From: model.EventPending, To: model.EventRetrying, At: base}), "to retrying")
		requireNoError(t, transition(t, d, store.EventTransition{ID: d3.ID, From: model.EventPending, To: model.EventDelivered, At: base}), "to delivered")

		n, err := d.EventCancelPending(ctx, "s1", p0.FireID, at(time.Minute))
		requireNoError(t, err, "EventCancelPending fire")
		requireEqual(t, n, 3, "EventCancelPending fire cancelled")
		for _, id := range []string{p0.ID, s1.ID, r2.ID} {
			got := getEvent(t, d, id)
			requireEqual(t, got.Status, model.EventCancelled, "Status of "+id)
		}
		requireEqual(t, getEvent(t, d, d3.ID).Status, model.EventDelivered, "delivered event kept")
		requireEqual(t, getEvent(t, d, q0.ID).Status, model.EventPending, "other fire kept")

		n, err = d.EventCancelPending(ctx, "s1", "", at(time.Minute))
		requireNoError(t, err, "EventCancelPending schedule")
		requireEqual(t, n, 1, "EventCancelPending schedule cancelled")
		requireEqual(t, getEvent(t, d, q0.ID).Status, model.EventCancelled, "other fire cancelled with the schedule")
		requireEqual(t, getEvent(t, d, o0.ID).Status, model.EventPending, "other schedule kept")

		// Cancelled events are finished and therefore subject to retention.
		n, err = d.EventDeleteFinishedBefore(ctx, at(time.Hour), 100)
		requireNoError(t, err, "EventDeleteFinishedBefore")
		requireEqual(t, n, 4, "cancelled events deleted by retention")
	}},
	{"CountsByFire", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		e0 := newEvent("A", "s1", base, 0)
		e1 := newEvent("A", "s1", base, 1)
		e2 := newEvent("A", "s1", base, 2)
		other := newEvent("A", "s1", at(time.Hour), 0)
		insertEvents(t, d, e0, e1, e2, other)

		last, err := d.EventLastFinished(ctx, e0.FireID)
		requireNoError(t, err, "EventLastFinished")
		requireTimePtr(t, last, nil, "EventLastFinished with nothing finished")

		requireNoError(t, transition(t, d, store.EventTransition{ID: e1.ID, From: model.EventPending, To: model.EventReleased, FinishedAt: ptr(at(2 * time.Second)), At: base}), "release e1")
		requireNoError(t, transition(t, d, store.EventTransition{ID: e2.ID, From: model.EventPending, To: model.EventDead, FinishedAt: ptr(at(5 * time.Second)), At: base}), "dead e2")

		counts, err := d.EventCountByFire(ctx, e0.FireID)
		requireNoError(t, err, "EventCountByFire")
		want := store.EventCounts{model.EventPending: 1, model.EventReleased: 1, model.EventDead: 1}
		for _, st := range []model.EventStatus{model.EventPending, model.EventScheduled, model.EventDelivering, model.EventDelivered,
			model.EventReleased, model.EventRetrying, model.EventDead, model.EventCancelled} {
			requireEqual(t, counts[st], want[st], "count of "+string(st))
		}

		last, err = d.EventLastFinished(ctx, e0.FireID)
		requireNoError(t, err, "EventLastFinished")
		requireTimePtr(t, last, ptr(at(5*time.Second)), "EventLastFinished")

		counts, err = d.EventCountByFire(ctx, "nope")
		requireNoError(t, err, "EventCountByFire unknown")
		requireEqual(t, counts[model.EventPending], 0, "count of an unknown fire")
	}},
	{"TokenQueries", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		mk := func(i int, policy string, launch time.Duration) *model.Event {
			e := newEvent("A", "s1", base, i)
			e.PolicyID = policy
			e.LaunchAt = at(launch)
			return e
		}
		delivering := mk(0, "p1", 0)
		deliveredExpired := mk(1, "p1", 0)
		deliveredFresh := mk(2, "p1", 0)
		otherPolicy := mk(3, "p2", 0)
		pendingDue := mk(4, "p1", 10*time.Second)
		pendingLater := mk(5, "p1", 10*time.Minute)
		retryingDue := mk(6, "p1", 20*time.Second)
		released := mk(7, "p1", 0)
		insertEvents(t, d, delivering, deliveredExpired, deliveredFresh, otherPolicy, pendingDue, pendingLater, retryingDue, released)
		for _, tr := range []store.EventTransition{
			{ID: delivering.ID, From: model.EventPending, To: model.EventDelivering, TokenExpiresAt: ptr(at(2 * time.Second)), At: base},
			{ID: deliveredExpired.ID, From: model.EventPending, To: model.EventDelivered, TokenExpiresAt: ptr(at(time.Second)), At: base},
			{ID: deliveredFresh.ID, From: model.EventPending, To: model.EventDelivered, TokenExpiresAt: ptr(at(time.Hour)), At: base},
			{ID: otherPolicy.ID, From: model.EventPending, To: model.EventDelivered, TokenExpiresAt: ptr(at(time.Second)), At: base},
			{ID: retryingDue.ID, From: model.EventPending, To: model.EventRetrying, At: base},
			{ID: released.ID, From: model.EventPending, To: model.EventReleased, FinishedAt: ptr(base), At: base},
		} {
			requireNoError(t, transition(t, d, tr), "setup "+tr.ID)
		}

		expired, err := d.EventFindTokenExpired(ctx, "p1", at(time.Minute), 10)
		requireNoError(t, err, "EventFindTokenExpired")
		requireSameIDs(t, eventIDs(expired), []string{delivering.ID, deliveredExpired.ID}, "EventFindTokenExpired")
		requireIDs(t, eventIDs(expired), []string{deliveredExpired.ID, delivering.ID}, "EventFindTokenExpired: oldest expiry first, whatever the status")
		expired, err = d.EventFindTokenExpired(ctx, "p1", at(time.Minute), 1)
		requireNoError(t, err, "EventFindTokenExpired limited")
		requireIDs(t, eventIDs(expired), []string{deliveredExpired.ID}, "EventFindTokenExpired limit keeps the oldest expiry")
		// The latest instant the contract's times can carry lists every
		// holder (the throttle's reconciliation reads them so).
		expired, err = d.EventFindTokenExpired(ctx, "p1", time.Unix(0, math.MaxInt64), 10)
		requireNoError(t, err, "EventFindTokenExpired at the last instant")
		requireSameIDs(t, eventIDs(expired), []string{delivering.ID, deliveredExpired.ID, deliveredFresh.ID}, "EventFindTokenExpired at the last instant")

		n, err := d.EventCountHoldingTokens(ctx, "p1")
		requireNoError(t, err, "EventCountHoldingTokens")
		requireEqual(t, n, 3, "EventCountHoldingTokens")

		// TokenExpiredBy: a token renewed after it was read expired is
		// not reclaimed; one still expired is; one without a token never.
		requireNoError(t, transition(t, d, store.EventTransition{ID: delivering.ID, From: model.EventDelivering,
			To: model.EventDelivering, TokenExpiresAt: ptr(at(2 * time.Minute)), At: base}), "renew")
		requireIs(t, transition(t, d, store.EventTransition{ID: delivering.ID, From: model.EventDelivering,
			To: model.EventRetrying, ClearToken: true, TokenExpiredBy: ptr(at(time.Minute)), At: base}), model.ErrConflict, "reclaim of a renewed token")
		requireTimePtr(t, getEvent(t, d, delivering.ID).TokenExpiresAt, ptr(at(2*time.Minute)), "renewed token untouched")
		requireIs(t, transition(t, d, store.EventTransition{ID: deliveredExpired.ID, From: model.EventDelivered,
			To: model.EventReleased, ClearToken: true, TokenExpiredBy: ptr(at(time.Second / 2)), At: base}), model.ErrConflict, "reclaim before the expiry")
		requireNoError(t, transition(t, d, store.EventTransition{ID: deliveredExpired.ID, From: model.EventDelivered,
			To: model.EventReleased, ClearToken: true, TokenExpiredBy: ptr(at(time.Second)), At: base}), "reclaim at the expiry")
		requireIs(t, transition(t, d, store.EventTransition{ID: retryingDue.ID, From: model.EventRetrying,
			To: model.EventRetrying, TokenExpiredBy: ptr(at(time.Hour)), At: base}), model.ErrConflict, "an event without a token")

		n, err = d.EventCountWaiting(ctx, "p1", at(20*time.Second))
		requireNoError(t, err, "EventCountWaiting")
		requireEqual(t, n, 2, "EventCountWaiting counts due pending and retrying, LaunchAt <= t")
		n, err = d.EventCountWaiting(ctx, "p2", at(time.Hour))
		requireNoError(t, err, "EventCountWaiting p2")
		requireEqual(t, n, 0, "EventCountWaiting p2")
	}},
	{"DeleteFinishedBefore", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		var es []*model.Event
		for i := range 5 {
			es = append(es, newEvent("A", "s1", base, i))
		}
		insertEvents(t, d, es...)
		for _, tr := range []store.EventTransition{
			{ID: es[0].ID, From: model.EventPending, To: model.EventReleased, FinishedAt: ptr(at(time.Second)), At: base},
			{ID: es[1].ID, From: model.EventPending, To: model.EventReleased, FinishedAt: ptr(at(2 * time.Second)), At: base},
			{ID: es[2].ID, From: model.EventPending, To: model.EventDead, FinishedAt: ptr(at(time.Second)), At: base},   // dead: kept for redrive
			{ID: es[3].ID, From: model.EventPending, To: model.EventReleased, FinishedAt: ptr(at(time.Hour)), At: base}, // too recent
		} {
			requireNoError(t, transition(t, d, tr), "setup "+tr.ID)
		}

		n, err := d.EventDeleteFinishedBefore(ctx, at(time.Minute), 1)
		requireNoError(t, err, "EventDeleteFinishedBefore limited")
		requireEqual(t, n, 1, "EventDeleteFinishedBefore limit")
		n, err = d.EventDeleteFinishedBefore(ctx, at(time.Minute), 10)
		requireNoError(t, err, "EventDeleteFinishedBefore")
		requireEqual(t, n, 1, "EventDeleteFinishedBefore rest")

		for _, id := range []string{es[0].ID, es[1].ID} {
			_, err := d.EventGetByID(ctx, id)
			requireIs(t, err, model.ErrNotFound, "deleted "+id)
		}
		for _, id := range []string{es[2].ID, es[3].ID, es[4].ID} {
			getEvent(t, d, id)
		}
	}},
}

// -------------------------------------------------------------- policies

var policyTests = []namedTest{
	{"CreateGet", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		p := newPolicy("A", "p1", 5)
		p.AutoRelease = true
		createPolicy(t, d, p)

		got, err := d.PolicyGet(ctx, "A", "p1")
		requireNoError(t, err, "PolicyGet")
		requireEqual(t, got.Name, p.Name, "Name")
		requireEqual(t, got.MaxInFlight, 5, "MaxInFlight")
		requireEqual(t, got.TokenTimeout, time.Minute, "TokenTimeout")
		requireEqual(t, got.AutoRelease, true, "AutoRelease")
		requireEqual(t, got.InUse, 0, "InUse")
		requireEqual(t, got.Version, int64(1), "Version")

		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.TenantID, "A", "PolicyGetByID TenantID")

		_, err = d.PolicyGet(ctx, "B", "p1")
		requireIs(t, err, model.ErrNotFound, "PolicyGet of another tenant")
		_, err = d.PolicyGetByID(ctx, "nope")
		requireIs(t, err, model.ErrNotFound, "PolicyGetByID unknown")

		requireIs(t, d.PolicyCreate(ctx, newPolicy("B", "p1", 1)), model.ErrConflict, "same id")
		sameName := newPolicy("A", "p2", 1)
		sameName.Name = p.Name
		requireIs(t, d.PolicyCreate(ctx, sameName), model.ErrConflict, "same (tenant, name)")
		_, err = d.PolicyGetByID(ctx, "p2")
		requireIs(t, err, model.ErrNotFound, "rejected policy must not be stored")

		otherTenant := newPolicy("B", "p3", 1)
		otherTenant.Name = p.Name
		createPolicy(t, d, otherTenant)
	}},
	{"List", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, p := range []*model.Policy{newPolicy("A", "p3", 1), newPolicy("A", "p1", 1), newPolicy("B", "p2", 1)} {
			createPolicy(t, d, p)
		}
		got, err := d.PolicyList(ctx, "A")
		requireNoError(t, err, "PolicyList A")
		requireIDs(t, policyIDs(got), []string{"p1", "p3"}, "PolicyList A")
		got, err = d.PolicyList(ctx, "B")
		requireNoError(t, err, "PolicyList B")
		requireIDs(t, policyIDs(got), []string{"p2"}, "PolicyList B")
		got, err = d.PolicyListAll(ctx)
		requireNoError(t, err, "PolicyListAll")
		requireSameIDs(t, policyIDs(got), []string{"p1", "p2", "p3"}, "PolicyListAll")
	}},
	{"Update", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		createPolicy(t, d, newPolicy("A", "p1", 5))
		n, err := d.PolicyAcquireTokens(ctx, "p1", 2)
		requireNoError(t, err, "PolicyAcquireTokens")
		requireEqual(t, n, 2, "acquired")
		cur, err := d.PolicyGet(ctx, "A", "p1")
		requireNoError(t, err, "PolicyGet")

		upd := newPolicy("A", "p1", 10)
		upd.Name = "renamed"
		upd.TokenTimeout = 2 * time.Minute
		upd.AutoRelease = true
		upd.Version = cur.Version + 1
		upd.UpdatedAt = at(time.Minute)
		requireNoError(t, d.PolicyUpdate(ctx, upd, cur.Version), "PolicyUpdate")

		got, err := d.PolicyGet(ctx, "A", "p1")
		requireNoError(t, err, "PolicyGet")
		requireEqual(t, got.Name, "renamed", "Name")
		requireEqual(t, got.MaxInFlight, 10, "MaxInFlight")
		requireEqual(t, got.TokenTimeout, 2*time.Minute, "TokenTimeout")
		requireEqual(t, got.AutoRelease, true, "AutoRelease")
		requireEqual(t, got.InUse, 2, "InUse kept")
		requireEqual(t, got.Version, cur.Version+1, "Version")

		stale := newPolicy("A", "p1", 1)
		stale.Version = cur.Version + 1
		requireIs(t, d.PolicyUpdate(ctx, stale, cur.Version), model.ErrConflict, "PolicyUpdate with a stale version")
		other := newPolicy("B", "p1", 1)
		other.Version = got.Version + 1
		requireIs(t, d.PolicyUpdate(ctx, other, got.Version), model.ErrNotFound, "PolicyUpdate by another tenant")
		missing := newPolicy("A", "nope", 1)
		requireIs(t, d.PolicyUpdate(ctx, missing, 1), model.ErrNotFound, "PolicyUpdate unknown")

		got, err = d.PolicyGet(ctx, "A", "p1")
		requireNoError(t, err, "PolicyGet")
		requireEqual(t, got.MaxInFlight, 10, "MaxInFlight after rejected updates")
	}},
	{"Delete", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		createPolicy(t, d, newPolicy("A", "p1", 5))
		requireIs(t, d.PolicyDelete(ctx, "B", "p1"), model.ErrNotFound, "PolicyDelete by another tenant")
		_, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "policy survives another tenant's delete")
		requireNoError(t, d.PolicyDelete(ctx, "A", "p1"), "PolicyDelete")
		_, err = d.PolicyGetByID(ctx, "p1")
		requireIs(t, err, model.ErrNotFound, "PolicyGetByID after delete")
		requireIs(t, d.PolicyDelete(ctx, "A", "p1"), model.ErrNotFound, "PolicyDelete twice")
		// The name is free again.
		createPolicy(t, d, newPolicy("A", "p1", 5))
	}},
	{"AcquireRelease", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		createPolicy(t, d, newPolicy("A", "p1", 5))
		for _, step := range []struct {
			want, got int
		}{{3, 3}, {3, 2}, {1, 0}} {
			n, err := d.PolicyAcquireTokens(ctx, "p1", step.want)
			requireNoError(t, err, "PolicyAcquireTokens")
			requireEqual(t, n, step.got, fmt.Sprintf("PolicyAcquireTokens(%d)", step.want))
		}
		got, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 5, "InUse at the limit")

		requireNoError(t, d.PolicyReleaseTokens(ctx, "p1", 2, 1), "PolicyReleaseTokens")
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 3, "InUse after release")
		requireEqual(t, got.TimedOut, int64(1), "TimedOut")

		requireNoError(t, d.PolicyReleaseTokens(ctx, "p1", 10, 2), "PolicyReleaseTokens too many")
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 0, "InUse never below zero")
		requireEqual(t, got.TimedOut, int64(3), "TimedOut accumulates")

		_, err = d.PolicyAcquireTokens(ctx, "nope", 1)
		requireIs(t, err, model.ErrNotFound, "PolicyAcquireTokens unknown")
		requireIs(t, d.PolicyReleaseTokens(ctx, "nope", 1, 0), model.ErrNotFound, "PolicyReleaseTokens unknown")
	}},
	{"AcquireConcurrentAllAtOnce", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		const maxInFlight, goroutines = 5, 50
		createPolicy(t, d, newPolicy("A", "p1", maxInFlight))

		var granted atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				<-start
				n, err := d.PolicyAcquireTokens(ctx, "p1", 1)
				if err != nil {
					t.Errorf("acquirer %d: %v", g, err)
					return
				}
				granted.Add(int64(n))
			})
		}
		close(start)
		wg.Wait()
		requireEqual(t, granted.Load(), int64(maxInFlight), "tokens granted when all try at once")
		got, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, maxInFlight, "InUse")
	}},
	{"AcquireConcurrentNeverExceeds", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		const maxInFlight, goroutines, attempts = 5, 50, 10
		createPolicy(t, d, newPolicy("A", "p1", maxInFlight))

		// held counts tokens granted and not yet handed back. It is decreased
		// before the release call, so it never overstates what the store
		// holds, and must therefore never exceed maxInFlight. Each goroutine
		// keeps its token across its next acquire attempt so that the bucket
		// is often full while others are trying.
		var held, peak, total atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				<-start
				holding := 0
				release := func() bool {
					held.Add(-1)
					holding--
					if err := d.PolicyReleaseTokens(ctx, "p1", 1, 0); err != nil {
						t.Errorf("releaser %d: %v", g, err)
						return false
					}
					return true
				}
				for range attempts {
					n, err := d.PolicyAcquireTokens(ctx, "p1", 1)
					if err != nil {
						t.Errorf("acquirer %d: %v", g, err)
						return
					}
					if n > 0 {
						total.Add(int64(n))
						holding += n
						h := held.Add(int64(n))
						for {
							p := peak.Load()
							if h <= p || peak.CompareAndSwap(p, h) {
								break
							}
						}
						if h > maxInFlight {
							t.Errorf("%d tokens held at once, max %d", h, maxInFlight)
						}
					}
					// Give back the older token (or the only one after a
					// failed attempt).
					if holding > 1 || (n == 0 && holding > 0) {
						if !release() {
							return
						}
					}
				}
				for holding > 0 {
					if !release() {
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if total.Load() < maxInFlight {
			t.Fatalf("only %d tokens granted over %d attempts", total.Load(), goroutines*attempts)
		}
		t.Logf("granted %d tokens, peak %d held", total.Load(), peak.Load())
		got, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 0, "InUse after every token was released")
	}},
	{"SetInUse", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		createPolicy(t, d, newPolicy("A", "p1", 5))
		cur, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")

		requireNoError(t, d.PolicySetInUse(ctx, "p1", cur.Version, 4), "PolicySetInUse")
		got, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 4, "InUse")
		requireEqual(t, got.MaxInFlight, 5, "MaxInFlight kept")

		requireIs(t, d.PolicySetInUse(ctx, "p1", got.Version+1, 0), model.ErrConflict, "PolicySetInUse with a wrong version")

		upd := newPolicy("A", "p1", 6)
		upd.Version = got.Version + 1
		requireNoError(t, d.PolicyUpdate(ctx, upd, got.Version), "PolicyUpdate")
		requireIs(t, d.PolicySetInUse(ctx, "p1", got.Version, 0), model.ErrConflict, "PolicySetInUse after the policy changed")
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 4, "InUse after rejected PolicySetInUse")

		err = d.PolicySetInUse(ctx, "nope", 1, 0)
		if !errors.Is(err, model.ErrNotFound) && !errors.Is(err, model.ErrConflict) {
			t.Fatalf("PolicySetInUse unknown: got %v, want ErrNotFound or ErrConflict", err)
		}
	}},
}

// ---------------------------------------------------------------- leases

var leaseTests = []namedTest{
	{"AcquireRenewRelease", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		l, err := d.LeaseAcquire(ctx, "shard/1", "a", base, time.Minute)
		requireNoError(t, err, "LeaseAcquire")
		requireEqual(t, l.Owner, "a", "Owner")
		requireEqual(t, l.Name, "shard/1", "Name")
		requireTime(t, l.ExpiresAt, at(time.Minute), "ExpiresAt")
		if l.Fence <= 0 {
			t.Fatalf("Fence: got %d, want > 0", l.Fence)
		}
		fence := l.Fence

		_, err = d.LeaseAcquire(ctx, "shard/1", "b", at(30*time.Second), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseAcquire held by another owner")

		again, err := d.LeaseAcquire(ctx, "shard/1", "a", at(30*time.Second), time.Minute)
		requireNoError(t, err, "LeaseAcquire by the owner")
		requireEqual(t, again.Fence, fence, "re-acquire keeps the fence")
		requireTime(t, again.ExpiresAt, at(90*time.Second), "re-acquire extends")

		r, err := d.LeaseRenew(ctx, "shard/1", "a", fence, at(40*time.Second), time.Minute)
		requireNoError(t, err, "LeaseRenew")
		requireEqual(t, r.Fence, fence, "renew keeps the fence")
		requireTime(t, r.ExpiresAt, at(100*time.Second), "renew extends")

		_, err = d.LeaseRenew(ctx, "shard/1", "b", fence, at(40*time.Second), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseRenew by a non-owner")
		_, err = d.LeaseRenew(ctx, "shard/1", "a", fence-1, at(40*time.Second), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseRenew with a wrong fence")
		_, err = d.LeaseRenew(ctx, "shard/none", "a", 1, at(40*time.Second), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseRenew of a lease never taken")

		// Expired but not taken: the owner may still renew.
		r, err = d.LeaseRenew(ctx, "shard/1", "a", fence, at(10*time.Minute), time.Minute)
		requireNoError(t, err, "LeaseRenew after expiry")
		requireEqual(t, r.Fence, fence, "renew after expiry keeps the fence")

		requireIs(t, d.LeaseRelease(ctx, "shard/1", "b", fence), model.ErrConflict, "LeaseRelease by a non-owner")
		requireIs(t, d.LeaseRelease(ctx, "shard/1", "a", fence+1), model.ErrConflict, "LeaseRelease with a wrong fence")
		requireNoError(t, d.LeaseRelease(ctx, "shard/1", "a", fence), "LeaseRelease")
		_, err = d.LeaseRenew(ctx, "shard/1", "a", fence, at(10*time.Minute), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseRenew after release")

		// Released: free for anybody at once, with a larger fence.
		b, err := d.LeaseAcquire(ctx, "shard/1", "b", at(10*time.Minute), time.Minute)
		requireNoError(t, err, "LeaseAcquire after release")
		requireEqual(t, b.Owner, "b", "new Owner")
		if b.Fence <= fence {
			t.Fatalf("fence after release: got %d, want > %d", b.Fence, fence)
		}
	}},
	{"ExpireAndSteal", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		a, err := d.LeaseAcquire(ctx, "partition/0", "a", base, time.Minute)
		requireNoError(t, err, "LeaseAcquire a")

		_, err = d.LeaseAcquire(ctx, "partition/0", "b", at(59*time.Second), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseAcquire before expiry")

		b, err := d.LeaseAcquire(ctx, "partition/0", "b", at(2*time.Minute), time.Minute)
		requireNoError(t, err, "LeaseAcquire after expiry")
		requireEqual(t, b.Owner, "b", "Owner")
		if b.Fence <= a.Fence {
			t.Fatalf("fence after steal: got %d, want > %d", b.Fence, a.Fence)
		}

		_, err = d.LeaseRenew(ctx, "partition/0", "a", a.Fence, at(2*time.Minute), time.Minute)
		requireIs(t, err, model.ErrConflict, "old owner renews after the steal")
		requireIs(t, d.LeaseRelease(ctx, "partition/0", "a", a.Fence), model.ErrConflict, "old owner releases after the steal")

		c, err := d.LeaseAcquire(ctx, "partition/0", "a", at(10*time.Minute), time.Minute)
		requireNoError(t, err, "LeaseAcquire back by a")
		if c.Fence <= b.Fence {
			t.Fatalf("fence after second steal: got %d, want > %d", c.Fence, b.Fence)
		}
	}},
	{"List", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, name := range []string{"shard/0", "shard/1", "partition/0"} {
			_, err := d.LeaseAcquire(ctx, name, "a", base, time.Minute)
			requireNoError(t, err, "LeaseAcquire "+name)
		}
		got, err := d.LeaseList(ctx, "shard/")
		requireNoError(t, err, "LeaseList")
		names := make([]string, len(got))
		for i, l := range got {
			names[i] = l.Name
			requireEqual(t, l.Owner, "a", "Owner of "+l.Name)
		}
		requireSameIDs(t, names, []string{"shard/0", "shard/1"}, "LeaseList")
	}},
}

// ------------------------------------------------------------- lifecycle

var lifecycleTests = []namedTest{
	{"PingClose", func(t *testing.T, d store.Driver) {
		ctx := context.Background()
		requireNoError(t, d.Ping(ctx), "Ping")
		requireNoError(t, d.Close(), "Close")
		requireNoError(t, d.Close(), "Close twice")
		requireIs(t, d.Ping(ctx), model.ErrUnavailable, "Ping after Close")
	}},
}
