package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

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
	{"TransitionBatchReportsEachResult", func(t *testing.T, d store.Driver) {
		// One call over many events: each transition's result is its own,
		// a failed one does not stop the others, and transitions of one
		// event apply in the call's order.
		ctx := t.Context()
		const n = 12
		es := make([]*model.Event, n)
		for i := range es {
			es[i] = newEvent("A", "s1", at(time.Duration(i)*time.Second), i)
		}
		insertEvents(t, d, es...)
		_, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 2, DueBefore: at(time.Hour), Limit: n})
		requireNoError(t, err, "EventClaimDue")

		var ts []store.EventTransition
		for i, e := range es {
			tr := store.EventTransition{ID: e.ID, From: model.EventScheduled, Fence: 2, To: model.EventDelivering,
				TokenExpiresAt: ptr(at(time.Duration(i) * time.Minute)), At: base}
			if i%3 == 1 {
				tr.Fence = 1 // stale fence: loses
			}
			ts = append(ts, tr)
		}
		// Then, in the same call: the first event moves on again (applies
		// only after its start above), and an unknown event.
		ts = append(ts,
			store.EventTransition{ID: es[0].ID, From: model.EventDelivering, To: model.EventDelivered, At: base},
			store.EventTransition{ID: "nope", From: model.EventScheduled, To: model.EventDelivering, At: base},
			store.EventTransition{ID: es[3].ID, From: model.EventDelivering, To: model.EventReleased, ClearToken: true, FinishedAt: ptr(base), At: base, RequiresPrevious: true},
			store.EventTransition{ID: es[6].ID, From: model.EventDelivering, To: model.EventReleased, ClearToken: true, FinishedAt: ptr(base), At: base},
		)
		errs, err := d.EventTransition(ctx, ts)
		requireNoError(t, err, "EventTransition")
		requireEqual(t, len(errs), len(ts), "results")
		for i, e := range es {
			want := model.EventDelivering
			if i%3 == 1 {
				requireIs(t, errs[i], model.ErrConflict, fmt.Sprintf("start %d with a stale fence", i))
				want = model.EventScheduled
			} else {
				requireNoError(t, errs[i], fmt.Sprintf("start %d", i))
			}
			switch i {
			case 0:
				want = model.EventDelivered
			case 6:
				want = model.EventReleased
			}
			requireEqual(t, getEvent(t, d, e.ID).Status, want, fmt.Sprintf("event %d Status", i))
		}
		requireNoError(t, errs[n], "second transition of event 0, after its first")
		requireIs(t, errs[n+1], model.ErrNotFound, "unknown event")
		requireIs(t, errs[n+2], model.ErrConflict, "transition requiring a failed one")
		requireNoError(t, errs[n+3], "release of event 6, after its start")
		requireTimePtr(t, getEvent(t, d, es[3].ID).TokenExpiresAt, ptr(at(3*time.Minute)), "event 3 keeps its token")
		requireTimePtr(t, getEvent(t, d, es[6].ID).TokenExpiresAt, nil, "event 6 token cleared")
	}},
	{"TransitionFenceGuardsExtendAndRelease", func(t *testing.T, d store.Driver) {
		// A delivery token carries the fence its event was started under:
		// an extend or release naming another fence (a token of an earlier
		// delivery of the event) must not touch the current one.
		ctx := t.Context()
		e := newEvent("A", "s1", base, 0)
		insertEvents(t, d, e)
		_, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 4, DueBefore: at(time.Minute), Limit: 1})
		requireNoError(t, err, "EventClaimDue")
		requireNoError(t, transition(t, d, store.EventTransition{ID: e.ID, From: model.EventScheduled, Fence: 4, To: model.EventDelivering,
			TokenExpiresAt: ptr(at(time.Minute)), At: base}), "start")

		extend := func(fence int64, until time.Time) store.EventTransition {
			return store.EventTransition{ID: e.ID, From: model.EventDelivering, Fence: fence, To: model.EventDelivering, TokenExpiresAt: &until, At: base}
		}
		release := func(fence int64) store.EventTransition {
			return store.EventTransition{ID: e.ID, From: model.EventDelivering, Fence: fence, To: model.EventReleased,
				ClearToken: true, FinishedAt: ptr(base), At: base}
		}
		requireIs(t, transition(t, d, extend(3, at(time.Hour))), model.ErrConflict, "extend under a stale fence")
		requireIs(t, transition(t, d, release(3)), model.ErrConflict, "release under a stale fence")
		got := getEvent(t, d, e.ID)
		requireEqual(t, got.Status, model.EventDelivering, "Status after stale calls")
		requireTimePtr(t, got.TokenExpiresAt, ptr(at(time.Minute)), "TokenExpiresAt after stale calls")

		requireNoError(t, transition(t, d, extend(4, at(2*time.Minute))), "extend under the token's fence")
		requireTimePtr(t, getEvent(t, d, e.ID).TokenExpiresAt, ptr(at(2*time.Minute)), "extended")
		requireNoError(t, transition(t, d, release(4)), "release under the token's fence")
		got = getEvent(t, d, e.ID)
		requireEqual(t, got.Status, model.EventReleased, "released")
		requireTimePtr(t, got.TokenExpiresAt, nil, "token cleared")
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
	{"RedriveStartsOver", func(t *testing.T, d store.Driver) {
		// A redriven event is pending again with nothing of its finished
		// attempt left but the error, kept as history.
		ctx := t.Context()
		e := newEvent("A", "s1", base, 0)
		insertEvents(t, d, e)
		_, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Minute), Limit: 1})
		requireNoError(t, err, "EventClaimDue")
		for _, tr := range []store.EventTransition{
			{ID: e.ID, From: model.EventScheduled, Fence: 1, To: model.EventDelivering, Attempts: 1, TokenExpiresAt: ptr(at(time.Minute)), At: at(time.Second)},
			{ID: e.ID, From: model.EventDelivering, Fence: 1, To: model.EventDelivered, DeliveredAt: ptr(at(2 * time.Second)), At: at(2 * time.Second)},
			{ID: e.ID, From: model.EventDelivered, To: model.EventDead, TokenTimedOut: true, LastError: "HTTP 500",
				FinishedAt: ptr(at(3 * time.Second)), At: at(3 * time.Second)},
		} {
			requireNoError(t, transition(t, d, tr), fmt.Sprintf("%s -> %s", tr.From, tr.To))
		}

		requireNoError(t, transition(t, d, store.Redrive(e.ID, at(time.Hour))), "redrive")
		got := getEvent(t, d, e.ID)
		requireEqual(t, got.Status, model.EventPending, "Status")
		requireEqual(t, got.Attempts, 0, "Attempts")
		requireTime(t, got.LaunchAt, at(time.Hour), "LaunchAt")
		requireTimePtr(t, got.FinishedAt, nil, "FinishedAt")
		requireTimePtr(t, got.DeliveredAt, nil, "DeliveredAt")
		requireTimePtr(t, got.TokenExpiresAt, nil, "TokenExpiresAt")
		requireEqual(t, got.TokenTimedOut, false, "TokenTimedOut")
		requireEqual(t, got.LastError, "HTTP 500", "LastError kept as history")
		requireTime(t, got.UpdatedAt, at(time.Hour), "UpdatedAt")

		// It is claimable again and retention does not take it.
		n, err := d.EventDeleteFinishedBefore(ctx, at(48*time.Hour), 10)
		requireNoError(t, err, "EventDeleteFinishedBefore")
		requireEqual(t, n, 0, "redriven events deleted by retention")
		claimed, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 2, DueBefore: at(2 * time.Hour), Limit: 10})
		requireNoError(t, err, "EventClaimDue after redrive")
		requireIDs(t, eventIDs(claimed), []string{e.ID}, "redriven event claimed")
	}},
	{"DeliveredAfterCancel", func(t *testing.T, d store.Driver) {
		// A pause cancels an event its handler holds and sends anyway: the
		// delivery is recorded, never left as cancelled.
		ctx := t.Context()
		sent := newEvent("A", "s1", base, 0)
		kept := newEvent("A", "s1", base, 1)
		insertEvents(t, d, sent, kept)
		_, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Minute), Limit: 10})
		requireNoError(t, err, "EventClaimDue")
		n, err := d.EventCancelPending(ctx, "s1", "", at(time.Second))
		requireNoError(t, err, "EventCancelPending")
		requireEqual(t, n, 2, "cancelled the scheduled events")
		requireIs(t, transition(t, d, store.DeliveredReleased(sent.ID, model.EventScheduled, 1, 1, false, at(2*time.Second))),
			model.ErrConflict, "outcome from scheduled after the cancel")
		requireNoError(t, transition(t, d, store.DeliveredAfterCancel(sent.ID, 1, at(2*time.Second), at(3*time.Second))), "delivered after cancel")
		got := getEvent(t, d, sent.ID)
		requireEqual(t, got.Status, model.EventReleased, "Status")
		requireEqual(t, got.Attempts, 1, "Attempts")
		requireTimePtr(t, got.DeliveredAt, ptr(at(2*time.Second)), "DeliveredAt")
		requireTimePtr(t, got.FinishedAt, ptr(at(3*time.Second)), "FinishedAt")
		requireIs(t, transition(t, d, store.DeliveredAfterCancel(sent.ID, 1, at(2*time.Second), at(4*time.Second))),
			model.ErrConflict, "a second time")
		requireEqual(t, getEvent(t, d, kept.ID).Status, model.EventCancelled, "the event not sent stays cancelled")
	}},
	{"DeliveredAfterRelease", func(t *testing.T, d store.Driver) {
		// A consumer that releases before it answers has its release
		// written before the delivery's outcome, which then loses: the
		// delivery is recorded on the released event all the same, and
		// the release's finish stays.
		ctx := t.Context()
		free := newEvent("A", "s1", base, 0) // unthrottled: acknowledged while scheduled
		held := newEvent("A", "s1", base, 1) // throttled: released while delivering
		kept := newEvent("A", "s1", base, 2) // outcome first, release after
		insertEvents(t, d, free, held, kept)
		_, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Minute), Limit: 10})
		requireNoError(t, err, "EventClaimDue")
		requireIs(t, transition(t, d, store.DeliveredAfterRelease(free.ID, 1, at(time.Second), at(time.Second))),
			model.ErrConflict, "recorded on an event not released")

		requireNoError(t, transition(t, d, store.Acknowledge(free.ID, model.EventScheduled, at(2*time.Second))), "acknowledge")
		requireIs(t, transition(t, d, store.DeliveredReleased(free.ID, model.EventScheduled, 1, 1, false, at(3*time.Second))),
			model.ErrConflict, "outcome after the acknowledge")
		requireNoError(t, transition(t, d, store.DeliveredAfterRelease(free.ID, 1, at(3*time.Second), at(4*time.Second))), "unthrottled delivered after release")

		requireNoError(t, transition(t, d, store.StartDelivery(held.ID, 1, at(time.Minute), at(time.Second))), "start")
		requireNoError(t, transition(t, d, store.Release(held.ID, model.EventDelivering, 1, 1, at(2*time.Second))), "release")
		requireIs(t, transition(t, d, store.Delivered(held.ID, 1, 1, at(3*time.Second))), model.ErrConflict, "outcome after the release")
		requireNoError(t, transition(t, d, store.DeliveredAfterRelease(held.ID, 1, at(3*time.Second), at(4*time.Second))), "throttled delivered after release")

		for _, id := range []string{free.ID, held.ID} {
			got := getEvent(t, d, id)
			requireEqual(t, got.Status, model.EventReleased, id+" Status")
			requireEqual(t, got.Attempts, 1, id+" Attempts")
			requireTimePtr(t, got.DeliveredAt, ptr(at(3*time.Second)), id+" DeliveredAt")
			requireTimePtr(t, got.FinishedAt, ptr(at(2*time.Second)), id+" FinishedAt of the release")
			requireTimePtr(t, got.TokenExpiresAt, nil, id+" TokenExpiresAt")
			requireIs(t, transition(t, d, store.DeliveredAfterRelease(id, 1, at(5*time.Second), at(5*time.Second))),
				model.ErrConflict, id+" recorded a second time")
		}

		// The outcome first: a late record of the same attempt (another
		// copy's) leaves the written one as it is.
		requireNoError(t, transition(t, d, store.DeliveredReleased(kept.ID, model.EventScheduled, 1, 1, false, at(3*time.Second))), "outcome")
		requireIs(t, transition(t, d, store.Acknowledge(kept.ID, model.EventScheduled, at(4*time.Second))), model.ErrConflict, "acknowledge after the outcome")
		requireIs(t, transition(t, d, store.DeliveredAfterRelease(kept.ID, 1, at(5*time.Second), at(5*time.Second))),
			model.ErrConflict, "record over a written outcome")
		got := getEvent(t, d, kept.ID)
		requireEqual(t, got.Attempts, 1, "Attempts of the outcome written first")
		requireTimePtr(t, got.DeliveredAt, ptr(at(3*time.Second)), "DeliveredAt of the outcome written first")

		n, err := d.EventDeleteFinishedBefore(ctx, at(2500*time.Millisecond), 10)
		requireNoError(t, err, "EventDeleteFinishedBefore")
		requireEqual(t, n, 2, "retention counts from the release")
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
	{"CountsByStatus", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		a0 := newEvent("A", "s1", base, 0)
		a1 := newEvent("A", "s1", base, 1)
		a2 := newEvent("A", "s2", at(time.Hour), 0)
		a3 := newEvent("A", "s2", at(time.Hour), 1)
		b0 := newEvent("B", "s3", base, 0)
		insertEvents(t, d, a0, a1, a2, a3, b0)
		requireNoError(t, transition(t, d, store.EventTransition{ID: a1.ID, From: model.EventPending, To: model.EventDead, FinishedAt: ptr(base), At: base}), "dead a1")
		requireNoError(t, transition(t, d, store.EventTransition{ID: a2.ID, From: model.EventPending, To: model.EventDead, FinishedAt: ptr(base), At: base}), "dead a2")
		requireNoError(t, transition(t, d, store.EventTransition{ID: a3.ID, From: model.EventPending, To: model.EventDelivered, TokenExpiresAt: ptr(at(time.Hour)), At: base}), "deliver a3")

		counts, err := d.EventCountByStatus(ctx, "A")
		requireNoError(t, err, "EventCountByStatus")
		want := store.EventCounts{model.EventPending: 1, model.EventDead: 2, model.EventDelivered: 1}
		for _, st := range []model.EventStatus{model.EventPending, model.EventScheduled, model.EventDelivering, model.EventDelivered,
			model.EventReleased, model.EventRetrying, model.EventDead, model.EventCancelled} {
			requireEqual(t, counts[st], want[st], "count of "+string(st))
		}

		counts, err = d.EventCountByStatus(ctx, "nobody")
		requireNoError(t, err, "EventCountByStatus unknown tenant")
		requireEqual(t, len(counts), 0, "statuses of an unknown tenant")
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

		// AttemptsAtMost: the release of attempt 2 does not apply once a
		// third attempt has been counted; the third's release does.
		requireNoError(t, transition(t, d, store.EventTransition{ID: deliveredFresh.ID, From: model.EventDelivered,
			To: model.EventDelivered, Attempts: 3, At: base}), "count a third attempt")
		requireIs(t, transition(t, d, store.Release(deliveredFresh.ID, model.EventDelivered, 0, 2, base)), model.ErrConflict, "release of an earlier attempt")
		requireEqual(t, getEvent(t, d, deliveredFresh.ID).Status, model.EventDelivered, "a later attempt keeps its token")
		requireNoError(t, transition(t, d, store.Release(deliveredFresh.ID, model.EventDelivered, 0, 3, base)), "release of the current attempt")
		requireEqual(t, getEvent(t, d, deliveredFresh.ID).Status, model.EventReleased, "released by its own attempt")

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
	}}, {"ClaimDueHonoursLargeLimit", func(t *testing.T, d store.Driver) {
		skipLargeUnderRace(t)
		ctx := t.Context()
		// More than a driver's page of 1,000 is due: a short claim would
		// read as "nothing left" to the handler, which asks for 2,000.
		const due = 1500
		es := make([]*model.Event, due)
		want := make([]string, due)
		for i := range es {
			// Launch times in reverse of the index so that the claim's order
			// is not the insertion order.
			es[i] = newEvent("A", "s1", base, i)
			es[i].LaunchAt = at(time.Duration(due-i) * time.Millisecond)
			want[due-1-i] = es[i].ID
		}
		insertEvents(t, d, es...)

		got, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Hour), Limit: 2000})
		requireNoError(t, err, "EventClaimDue")
		requireEqual(t, len(got), due, "claimed with Limit 2000 when 1500 are due")
		requireIDs(t, eventIDs(got), want, "claimed earliest LaunchAt first")

		got, err = d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Hour), Limit: 2000})
		requireNoError(t, err, "EventClaimDue again")
		requireEqual(t, len(got), 0, "nothing left to claim")
	}},
	{"FindTokenExpiredHonoursLargeLimit", func(t *testing.T, d store.Driver) {
		skipLargeUnderRace(t)
		ctx := t.Context()
		const holding = 1500
		es := make([]*model.Event, holding)
		want := make([]string, holding)
		for i := range es {
			es[i] = newEvent("A", "s1", base, i)
			es[i].PolicyID = "p1"
			es[i].Status = model.EventDelivered
			if i%2 == 0 {
				es[i].Status = model.EventDelivering
			}
			es[i].TokenExpiresAt = ptr(at(time.Duration(holding-i) * time.Millisecond))
			want[holding-1-i] = es[i].ID
		}
		insertEvents(t, d, es...)

		got, err := d.EventFindTokenExpired(ctx, "p1", at(time.Hour), 0)
		requireNoError(t, err, "EventFindTokenExpired limit 0")
		requireEqual(t, len(got), holding, "limit 0 lists all")
		requireIDs(t, eventIDs(got), want, "limit 0: oldest expiry first")
		got, err = d.EventFindTokenExpired(ctx, "p1", at(time.Hour), 1200)
		requireNoError(t, err, "EventFindTokenExpired limit 1200")
		requireIDs(t, eventIDs(got), want[:1200], "limit 1200: the 1200 oldest expiries")
		got, err = d.EventFindTokenExpired(ctx, "p1", at(time.Hour), 2000)
		requireNoError(t, err, "EventFindTokenExpired limit 2000")
		requireEqual(t, len(got), holding, "limit 2000 when 1500 hold tokens")
	}},
}

// skipLargeUnderRace skips a case of more than a thousand events in builds
// with the race detector: the in-process FerretDB of the MongoDB tests takes
// minutes for it there. scripts/test.sh runs these cases without the race
// detector for both drivers.
func skipLargeUnderRace(t *testing.T) {
	t.Helper()
	if raceDetector {
		t.Skip("a large case: run without -race (scripts/test.sh does)")
	}
}
