package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// claimLaneTests pin EventClaimDue's share of a claim over lanes (tenant,
// policy, priority), its order within a lane (store.CompareInLane) and its
// SkipPolicies.
var claimLaneTests = []namedTest{
	{"SharesTenantsPoliciesAndPriorities", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		const shard = 3
		var all []*model.Event
		mk := func(tenant, policy string, prio, i int, launch time.Duration) *model.Event {
			e := newEvent(tenant, "s-"+tenant, base, i)
			e.Shard, e.PolicyID, e.Priority, e.LaunchAt = shard, policy, prio, at(launch)
			all = append(all, e)
			return e
		}
		var a, aLater, b, cLow, cHigh, d1, d2 []*model.Event
		for i := range 20 {
			a = append(a, mk("A", "", 0, i, time.Duration(i)*time.Second))
		}
		for i := range 5 {
			aLater = append(aLater, mk("A", "", 0, 20+i, 2*time.Minute)) // not due
		}
		for i := range 3 {
			b = append(b, mk("B", "", 0, i, 50*time.Second))
		}
		for i := range 4 {
			cLow = append(cLow, mk("C", "pc", 0, i, time.Duration(i)*time.Second))
			cHigh = append(cHigh, mk("C", "pc", 5, 4+i, 30*time.Second+time.Duration(i)*time.Second))
		}
		for i := range 10 {
			d1 = append(d1, mk("D", "p1", 0, i, time.Duration(i)*time.Second))
			d2 = append(d2, mk("D", "p2", 0, 10+i, time.Duration(i)*time.Second))
		}
		// Inserted in reverse, so that no driver's insertion order is
		// what the claim's order happens to be.
		slices.Reverse(all)
		insertEvents(t, d, all...)

		got, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: shard, Fence: 1, DueBefore: at(time.Minute), Limit: 16})
		requireNoError(t, err, "EventClaimDue")
		requireEqual(t, len(got), 16, "claimed")
		ids := eventIDs(got)
		taken := func(es []*model.Event) (n int, prefix bool) {
			for i, e := range es {
				if slices.Contains(ids, e.ID) {
					n++
					if n != i+1 {
						return n, false
					}
				}
			}
			return n, true
		}
		// Four tenants share 16: B has 3, so A, C and D take 4 and one of
		// them the one B left.
		nb, _ := taken(b)
		requireEqual(t, nb, 3, "B, with fewer due than its share, takes all")
		na, prefix := taken(a)
		if na < 4 || na > 5 || !prefix {
			t.Fatalf("A took %d of its 20 (earliest first: %v), want 4 or 5, its earliest", na, prefix)
		}
		nh, prefix := taken(cHigh)
		if nh != 4 || !prefix {
			t.Fatalf("C took %d of its priority-5 events (in launch order: %v), want all 4 before any of its earlier priority-0 ones", nh, prefix)
		}
		nl, prefix := taken(cLow)
		if nl > 1 || !prefix {
			t.Fatalf("C took %d of its priority-0 events, want at most the remainder's one, its earliest", nl)
		}
		n1, p1 := taken(d1)
		n2, p2 := taken(d2)
		if n1 < 2 || n2 < 2 || n1+n2 > 5 || !p1 || !p2 {
			t.Fatalf("D took %d of p1 and %d of p2 (earliest first: %v, %v), want an even split of 4 or 5, each policy's earliest", n1, n2, p1, p2)
		}
		requireEqual(t, na+nh+nl+n1+n2, 13, "the remainder went to one of A, C and D")
		for _, e := range aLater {
			if slices.Contains(ids, e.ID) {
				t.Fatalf("claimed %s, not due", e.ID)
			}
		}

		got, err = d.EventClaimDue(ctx, &store.EventClaimParams{Shard: shard, Fence: 1, DueBefore: at(time.Minute), Limit: 100})
		requireNoError(t, err, "EventClaimDue the rest")
		requireEqual(t, len(got), 20+3+8+20-16, "the second claim takes every due event left")
		for _, e := range aLater {
			requireEqual(t, getEvent(t, d, e.ID).Status, model.EventPending, "not-due event untouched")
		}
	}},
	{"ManyTenantsShareEvenly", func(t *testing.T, d store.Driver) {
		// A tenant with a large backlog takes no more than the others'
		// share, whatever its events' launch times.
		ctx := t.Context()
		var all []*model.Event
		big := 60
		for i := range big {
			e := newEvent("big", "s-big", base, i)
			e.LaunchAt = at(time.Duration(i) * time.Millisecond)
			all = append(all, e)
		}
		const small = 8
		for k := range small {
			tenant := fmt.Sprintf("t%d", k)
			for i := range 2 {
				e := newEvent(tenant, "s-"+tenant, base, i)
				e.LaunchAt = at(time.Second) // after all of big's
				all = append(all, e)
			}
		}
		insertEvents(t, d, all...)
		got, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Minute), Limit: 18})
		requireNoError(t, err, "EventClaimDue")
		per := map[string]int{}
		for _, e := range got {
			per[e.TenantID]++
		}
		requireEqual(t, len(got), 18, "claimed")
		requireEqual(t, per["big"], 2, "the big tenant's share of 18 over 9 tenants")
		for k := range small {
			requireEqual(t, per[fmt.Sprintf("t%d", k)], 2, fmt.Sprintf("t%d's share", k))
		}
	}},
	{"FiresAtOneInstantTakeTurns", func(t *testing.T, d store.Driver) {
		// Two fires of one lane without a policy due at one instant: a
		// claim takes each one's first events before either's later ones,
		// whichever fire the driver would otherwise read first; an earlier
		// launch time still goes before both, a later one after.
		lane := func(e *model.Event, launch time.Duration) *model.Event {
			e.LaunchAt = at(launch)
			return e
		}
		early := lane(newEvent("A", "s-early", base, 0), 5*time.Second)
		late := lane(newEvent("A", "s-late", base, 0), 20*time.Second)
		var one, two []*model.Event
		for i := range 30 {
			one = append(one, lane(newEvent("A", "s-one", base, i), 10*time.Second))
			two = append(two, lane(newEvent("A", "s-two", base, i), 10*time.Second))
		}
		insertEvents(t, d, two...)
		insertEvents(t, d, late, early)
		insertEvents(t, d, one...)
		claim := func(limit int) []string { t.Helper(); return claimDue(t, d, 0, limit) }

		want := slices.Concat([]string{early.ID}, eventIDs(one[:5]), eventIDs(two[:5]))
		requireSameIDs(t, claim(11), want, "the earlier event, then five turns of the two fires")
		requireSameIDs(t, claim(4), slices.Concat(eventIDs(one[5:7]), eventIDs(two[5:7])), "the next two turns")
		requireSameIDs(t, claim(100), slices.Concat(eventIDs(one[7:]), eventIDs(two[7:]), []string{late.ID}), "the rest, the later event with it")
	}},
	{"PolicySchedulesTakeTurns", func(t *testing.T, d store.Driver) {
		// In a lane of a policy the schedules with due events take turns,
		// in the order of their earliest waiting events: a schedule's
		// events due after another's backlog are not left behind it.
		const shard = 2
		ev := func(sched string, i int, launch time.Duration) *model.Event {
			e := policyEvent(sched, i, launch)
			e.Shard = shard
			return e
		}
		var backlog, small, retried, later []*model.Event
		for i := range 30 {
			backlog = append(backlog, ev("s-backlog", i, time.Duration(i)*time.Second))
		}
		for i := range 3 {
			small = append(small, ev("s-small", i, 40*time.Second))
			e := ev("s-retried", i, 45*time.Second)
			e.Status, e.Attempts = model.EventRetrying, 1
			retried = append(retried, e)
		}
		for i := range 2 {
			later = append(later, ev("s-later", i, 2*time.Minute)) // not due
		}
		insertEvents(t, d, slices.Concat(later, retried, small, backlog)...)
		claim := func(limit int) []string { t.Helper(); return claimDue(t, d, shard, limit) }
		requireSameIDs(t, claim(9), slices.Concat(eventIDs(backlog[:3]), eventIDs(small), eventIDs(retried)),
			"three turns: the backlog's earliest three, the small schedule's and the retried one's")
		requireSameIDs(t, claim(4), eventIDs(backlog[3:7]), "the backlog alone has due events left")

		// A schedule whose events are due before the backlog's next goes
		// first now: the backlog's head moved with what was claimed.
		var between []*model.Event
		for i := range 2 {
			between = append(between, ev("s-between", i, 5*time.Second))
		}
		insertEvents(t, d, between...)
		requireSameIDs(t, claim(3), slices.Concat(eventIDs(between), eventIDs(backlog[7:8])),
			"the schedule whose head is earlier takes the remainder of an uneven split")
		requireSameIDs(t, claim(100), eventIDs(backlog[8:]), "the rest of the due events")
		for _, e := range later {
			requireEqual(t, getEvent(t, d, e.ID).Status, model.EventPending, "a schedule with nothing due is left")
		}
	}},
	{"PolicyTurnsOfUnevenSchedules", func(t *testing.T, d store.Driver) {
		// A schedule with fewer due events than its share leaves the rest
		// to the others, which take turns until the take is reached.
		var few, b, c []*model.Event
		for i := range 2 {
			few = append(few, policyEvent("s-few", i, 0))
		}
		for i := range 10 {
			b = append(b, policyEvent("s-b", i, time.Second+time.Duration(i)*time.Millisecond))
			c = append(c, policyEvent("s-c", i, 2*time.Second+time.Duration(i)*time.Millisecond))
		}
		insertEvents(t, d, slices.Concat(c, b, few)...)
		claim := func(limit int) []string { t.Helper(); return claimDue(t, d, 0, limit) }
		requireSameIDs(t, claim(12), slices.Concat(eventIDs(few), eventIDs(b[:5]), eventIDs(c[:5])),
			"the small schedule's 2, then five turns of the others")
		requireSameIDs(t, claim(100), slices.Concat(eventIDs(b[5:]), eventIDs(c[5:])), "the rest")
	}},
	{"PolicyRetriesAndHandBacksTakeTurns", func(t *testing.T, d store.Driver) {
		// An event that a transition makes waiting again (a retry at a
		// later launch time, a hand-back) takes its schedule's turns beside
		// another schedule's backlog, as an inserted one does.
		retried, handed := policyEvent("s-retried", 0, 0), policyEvent("s-handed", 0, 0)
		insertEvents(t, d, retried, handed)
		claim := func(limit int) []string { t.Helper(); return claimDue(t, d, 0, limit) }
		requireSameIDs(t, claim(10), []string{retried.ID, handed.ID}, "both claimed")
		var backlog []*model.Event
		for i := range 20 {
			backlog = append(backlog, policyEvent("s-backlog", i, time.Duration(i)*time.Second))
		}
		insertEvents(t, d, backlog...)
		requireNoError(t, transition(t, d, store.Retry(retried.ID, model.EventScheduled, 1, 1, at(30*time.Second), "503", false, at(time.Second))), "Retry")
		requireNoError(t, transition(t, d, store.StartDelivery(handed.ID, 1, at(time.Minute), at(time.Second))), "StartDelivery")
		requireNoError(t, transition(t, d, store.HandBack(handed.ID, 1, at(time.Second))), "HandBack")
		requireSameIDs(t, claim(4), slices.Concat([]string{handed.ID, retried.ID}, eventIDs(backlog[:2])),
			"the retried and the handed-back event take their turns beside the backlog")
	}},
	{"SkipPolicies", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		old := newEvent("A", "s-hot", base, 0)
		old.PolicyID = "hot"
		insertEvents(t, d, old)
		got, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: at(time.Minute), Limit: 10})
		requireNoError(t, err, "claim under fence 1")
		requireIDs(t, eventIDs(got), []string{old.ID}, "claim under fence 1")

		var hot, rest []*model.Event
		for i := range 10 {
			e := newEvent("A", "s-hot", base, 1+i)
			e.PolicyID, e.LaunchAt = "hot", at(time.Duration(i)*time.Second)
			hot = append(hot, e)
		}
		for i := range 3 {
			rest = append(rest, newEvent("A", "s-free", base, i))
		}
		for i := range 2 {
			e := newEvent("B", "s-cold", base, i)
			e.PolicyID = "cold"
			rest = append(rest, e)
		}
		insertEvents(t, d, append(slices.Clone(hot), rest...)...)

		got, err = d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 2, DueBefore: at(time.Minute), Limit: 100, SkipPolicies: []string{"hot"}})
		requireNoError(t, err, "claim skipping hot")
		want := append([]string{old.ID}, eventIDs(rest)...)
		requireSameIDs(t, eventIDs(got), want, "an older fence's event of a skipped policy, and the other policies' events")
		for _, e := range got {
			requireEqual(t, e.TakenOver, e.ID == old.ID, "TakenOver of "+e.ID)
		}
		for _, e := range hot {
			requireEqual(t, getEvent(t, d, e.ID).Status, model.EventPending, "skipped policy's event stays pending")
		}

		got, err = d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 2, DueBefore: at(time.Minute), Limit: 4})
		requireNoError(t, err, "claim without skipping")
		requireSameIDs(t, eventIDs(got), eventIDs(hot[:4]), "the skipped policy's events, earliest first, once it is no longer skipped")
	}},
}

// policyEvent is the i-th event of schedule sched of tenant A, of policy
// "p", launched d after base.
func policyEvent(sched string, i int, d time.Duration) *model.Event {
	e := newEvent("A", sched, base, i)
	e.PolicyID, e.LaunchAt = "p", at(d)
	return e
}

// claimDue claims up to limit of shard's events due within a minute of
// base under fence 1 and returns their ids.
func claimDue(t *testing.T, d store.Driver, shard, limit int) []string {
	t.Helper()
	got, err := d.EventClaimDue(t.Context(), &store.EventClaimParams{Shard: shard, Fence: 1, DueBefore: at(time.Minute), Limit: limit})
	requireNoError(t, err, "EventClaimDue")
	return eventIDs(got)
}
