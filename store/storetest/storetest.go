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
// base; every driver keeps at least milliseconds (see instantTests).
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
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
		{"Fields", fieldTests},
		{"Complete", completeTests},
		{"Resume", resumeTests},
		{"Interval", intervalTests},
		{"Children", childrenTests},
		{"Watermark", watermarkTests},
		{"Fire", fireTests},
		{"Watch", watchTests},
		{"FireDeadline", fireDeadlineTests},
		{"Event", eventTests},
		{"ClaimLanes", claimLaneTests},
		{"Policy", policyTests},
		{"Calendar", calendarTests},
		{"Lease", leaseTests},
		{"Audit", auditTests},
		{"Lifecycle", lifecycleTests},
		{"Instant", instantTests},
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

func createSchedule(t *testing.T, d store.Driver, s *model.Schedule, cs []model.Child, fs ...store.FireNew) {
	t.Helper()
	requireNoError(t, CreateSchedule(t.Context(), d, s, cs, fs...), "create schedule "+s.ID)
}

// CreateSchedule creates s with its children cs and fires fs as a single
// create does (ScheduleCreateMany of one item) and returns the item's
// error or the call's.
func CreateSchedule(ctx context.Context, d interface {
	ScheduleCreateMany(ctx context.Context, items []store.ScheduleNew) ([]error, error)
}, s *model.Schedule, cs []model.Child, fs ...store.FireNew) error {
	errs, err := d.ScheduleCreateMany(ctx, []store.ScheduleNew{{Schedule: s, Children: cs, Fires: fs}})
	if err != nil {
		return err
	}
	return errs[0]
}
