package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// oneWorld makes one-offs, fan-outs and lone events whose launch times are
// all distinct, so that claims take them in the same order from a store
// that holds one-offs' events in their rows and from one that does not.
type oneWorld struct {
	r      *rand.Rand
	n      int
	scheds []*model.Schedule // made so far
	events []string          // ids of the events made so far
	fires  []string          // ids of the fires made so far
	sorted bool              // one-offs' ids sort in creation order
}

func (w *oneWorld) next() (int, time.Time) {
	w.n++
	return w.n, base().Add(time.Duration(w.n)*time.Second + time.Duration(w.r.IntN(1000))*time.Millisecond)
}

// oneOff returns a one-off of tenant with its fire and one event, as the
// master saves it; policy, if not empty, names its policy.
func (w *oneWorld) oneOff(tenant, policy string) store.ScheduleNew {
	n, runAt := w.next()
	// Ids that start like each other's ("o5" and "o5-1"), to test the
	// lists' order.
	id := fmt.Sprintf("o%d", n/2)
	if n%2 == 1 {
		id += "-" + strconv.Itoa(n%7)
	}
	if w.sorted {
		id = fmt.Sprintf("o%06d", n)
	} else if n%4 == 3 {
		id = masterID(uint64(n)) // its due entry packs it (appendImpliedKey)
	}
	now := base()
	sc := &model.Schedule{
		ID: id, TenantID: tenant, Name: "job", RunAt: &runAt, Timezone: "UTC", EventCount: 1, PolicyID: policy,
		Target: model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/" + id}, Payload: footprintPayload,
		MaxAttempts: 3, Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow, State: model.ScheduleActive,
		Version: 1, Partition: n % 4, CreatedAt: now, UpdatedAt: now,
	}
	child := model.Child{ScheduleID: id, TenantID: tenant, ScheduleVersion: 1, Partition: sc.Partition, Timezone: "UTC",
		LaunchExpression: "D:" + runAt.Format("2006-01-02"), Minute: runAt.Hour()*60 + runAt.Minute()}
	f := &model.Fire{ID: model.FireID(id, 1, runAt), ScheduleID: id, TenantID: tenant, FireTime: runAt,
		LocalTime: runAt.Format(localLayout), Count: 1, Decision: model.FireEmitted, CreatedAt: now}
	e := &model.Event{ID: model.EventID(f.ID, 0), TenantID: tenant, ScheduleID: id, FireID: f.ID, FireTime: runAt,
		Count: 1, LaunchAt: runAt, Target: sc.Target, Payload: sc.Payload, MaxAttempts: 3, PolicyID: policy,
		Shard: n % 3, Status: model.EventPending, CreatedAt: now, UpdatedAt: now}
	if n%5 == 0 {
		d := runAt.Add(time.Hour)
		e.Deadline = &d
	}
	switch n % 3 { // release tokens as the emitter gives them, and others
	case 0:
		e.ReleaseToken = fmt.Sprintf("%032x", w.r.Uint64())
	case 1:
		e.ReleaseToken = "Tok-" + strconv.Itoa(n)
	}
	w.scheds = append(w.scheds, sc)
	w.events = append(w.events, e.ID)
	w.fires = append(w.fires, f.ID)
	return store.ScheduleNew{Schedule: sc, Children: []model.Child{child}, Fires: []store.FireNew{{Fire: f, Events: []*model.Event{e}}}}
}

// masterID returns an id of the master's form: "sch_" and the base32 of
// 10 bytes that end with n.
func masterID(n uint64) string {
	var b [10]byte
	binary.BigEndian.PutUint64(b[2:], n)
	return model.PrefixSchedule + model.IDText.EncodeToString(b[:])
}

// fanOut returns a fire of a cron schedule of tenant with size events.
func (w *oneWorld) fanOut(tenant string, size int) store.FireNew {
	n, at := w.next()
	id := fmt.Sprintf("c%d", n)
	f := &model.Fire{ID: model.FireID(id, 1, at), ScheduleID: id, TenantID: tenant, FireTime: at,
		LocalTime: at.Format(localLayout), Count: size, Decision: model.FireEmitted, CreatedAt: base()}
	fn := store.FireNew{Fire: f}
	for i := range size {
		_, launch := w.next()
		e := &model.Event{ID: model.EventID(f.ID, i), TenantID: tenant, ScheduleID: id, FireID: f.ID, FireTime: at,
			Index: i, Count: size, LaunchAt: launch, Target: model.Target{Type: model.TargetHTTP, URL: "https://c.example.com/"},
			MaxAttempts: 3, Shard: i % 3, Status: model.EventPending, CreatedAt: base(), UpdatedAt: base()}
		fn.Events = append(fn.Events, e)
		w.events = append(w.events, e.ID)
	}
	w.fires = append(w.fires, f.ID)
	return fn
}

// joiner returns an event that joins the fire of one-off sc at index 1.
func (w *oneWorld) joiner(sc *model.Schedule) *model.Event {
	_, launch := w.next()
	fireID := model.FireID(sc.ID, 1, *sc.RunAt)
	e := &model.Event{ID: model.EventID(fireID, 1), TenantID: sc.TenantID, ScheduleID: sc.ID, FireID: fireID, FireTime: *sc.RunAt,
		Index: 1, Count: 2, LaunchAt: launch, Target: sc.Target, Payload: sc.Payload, MaxAttempts: 3,
		Shard: 1, Status: model.EventPending, CreatedAt: base(), UpdatedAt: base()}
	w.events = append(w.events, e.ID)
	return e
}

// oneSeed is the seed of the randomized tests: SCHEDULERD_ONERECORD_SEED,
// 1 by default.
func oneSeed(t *testing.T) uint64 { return testseed.Get(t, "SCHEDULERD_ONERECORD_SEED", 1) }

// bucketKeys returns the number of keys of each bucket named.
func bucketKeys(t *testing.T, s *Store, names ...[]byte) map[string]int {
	t.Helper()
	out := map[string]int{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, name := range names {
			out[string(name)] = tx.Bucket(name).Stats().KeyN
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// rowEventCount returns the number of schedule rows that hold an event.
func rowEventCount(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bSchedules).ForEach(func(_, v []byte) error {
			if rowHasEvent(v) {
				n++
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

var groupBuckets = [][]byte{bEvGroups, bEvHeads, bEvRows, bEvFire, bEvTenant, bEvIDs, bEvSched, bEvPolicy}

// One-offs saved with their fire and event are one record each: no event
// bucket but ev_due has a key for them, and every query sees their events
// as a store that groups them does, from the first page to the last.
func TestOneRecordQueries(t *testing.T) {
	ctx := t.Context()
	one := openTemp(t, Options{})
	grouped := openTemp(t, Options{groupedOneOffs: true})
	w := &oneWorld{r: rand.New(rand.NewPCG(3, 3))}
	var items []store.ScheduleNew
	for i := range 40 {
		items = append(items, w.oneOff([]string{"ta", "tb"}[i%2], ""))
	}
	for _, s := range []*Store{one, grouped} {
		if res, err := s.ScheduleCreateMany(ctx, items); err != nil || slices.ContainsFunc(res, func(e error) bool { return e != nil }) {
			t.Fatalf("ScheduleCreateMany: %v, %v", res, err)
		}
	}
	if got := bucketKeys(t, one, groupBuckets...); slices.ContainsFunc(slices.Collect(mapValues(got)), func(n int) bool { return n != 0 }) {
		t.Errorf("event buckets of one-offs stored as one record: %v, want all empty", got)
	}
	if got := bucketKeys(t, one, bEvDue)[string(bEvDue)]; got != len(items) {
		t.Errorf("ev_due: %d keys, want one a one-off (%d)", got, len(items))
	}
	if n := rowEventCount(t, one); n != len(items) {
		t.Errorf("%d rows hold their event, want %d", n, len(items))
	}
	// Fan-outs and a policy one-off of the same tenants, in groups.
	fans := []store.FireNew{w.fanOut("ta", 12), w.fanOut("tb", 3)}
	pol := w.oneOff("ta", "pol")
	for _, s := range []*Store{one, grouped} {
		if _, _, err := s.FireInsertMany(ctx, fans); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ScheduleCreateMany(ctx, []store.ScheduleNew{pol}); err != nil {
			t.Fatal(err)
		}
	}
	if n := rowEventCount(t, one); n != len(items) {
		t.Errorf("%d rows hold their event after a policy one-off, want %d", n, len(items))
	}
	compareStores(t, one, grouped, w, w.r)
	checkEventIndexes(t, one)
}

func mapValues(m map[string]int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// compareStores runs every query on both stores and reports answers that
// differ: gets of every event, lists by tenant, schedule and fire paged
// from every id and with limits of 1 to 4 and all, and the counts.
func compareStores(t *testing.T, one, grouped *Store, w *oneWorld, r *rand.Rand) {
	t.Helper()
	ctx := t.Context()
	same := func(what string, a, b any, aerr, berr error) {
		t.Helper()
		if errClass(aerr) != errClass(berr) || !reflect.DeepEqual(a, b) {
			t.Errorf("%s:\n one record: %v %s\n grouped:    %v %s", what, show(a), errClass(aerr), show(b), errClass(berr))
		}
	}
	ids := append(slices.Clone(w.events), "nope", "o1.1.v1.0")
	a, aerr := one.EventGetMany(ctx, ids)
	b, berr := grouped.EventGetMany(ctx, ids)
	same("EventGetMany", a, b, aerr, berr)
	for _, id := range ids {
		a, aerr := one.EventGetByID(ctx, id)
		b, berr := grouped.EventGetByID(ctx, id)
		same("EventGetByID "+id, a, b, aerr, berr)
		a, aerr = one.EventGet(ctx, "ta", id)
		b, berr = grouped.EventGet(ctx, "ta", id)
		same("EventGet ta "+id, a, b, aerr, berr)
	}
	var params []store.EventListParams
	for _, tenant := range []string{"ta", "tb", "tc"} {
		params = append(params, store.EventListParams{TenantID: tenant})
		params = append(params, store.EventListParams{TenantID: tenant, Status: model.EventPending})
	}
	for _, sc := range w.scheds {
		params = append(params, store.EventListParams{TenantID: sc.TenantID, ScheduleID: sc.ID})
	}
	for _, f := range w.fires {
		params = append(params, store.EventListParams{TenantID: "ta", FireID: f})
	}
	afters := append([]string{"", "o", "o1", "o1-", "o1.", "o2-1", "c", "p"}, w.events...)
	for _, p := range params {
		// Pages from a sample of afters: a tenant's from every one when
		// there are few.
		n := 3
		if p.ScheduleID == "" && p.FireID == "" && len(afters) <= 100 {
			n = len(afters)
		}
		for i := range n {
			after := afters[r.IntN(len(afters))]
			if n == len(afters) {
				after = afters[i]
			}
			for _, limit := range []int{0, 1, 2, 3, 4} {
				p := p
				p.After, p.Limit = after, limit
				a, aerr := one.EventList(ctx, &p)
				b, berr := grouped.EventList(ctx, &p)
				same(fmt.Sprintf("EventList %+v", p), a, b, aerr, berr)
			}
		}
	}
	for _, f := range append(slices.Clone(w.fires), "nope.1.v1") {
		a, aerr := one.EventCountByFire(ctx, f)
		b, berr := grouped.EventCountByFire(ctx, f)
		same("EventCountByFire "+f, a, b, aerr, berr)
		la, aerr := one.EventLastFinished(ctx, f)
		lb, berr := grouped.EventLastFinished(ctx, f)
		same("EventLastFinished "+f, la, lb, aerr, berr)
		fa, aerr := one.FireGet(ctx, "ta", f)
		fb, berr := grouped.FireGet(ctx, "ta", f)
		same("FireGet "+f, fa, fb, aerr, berr)
	}
	for _, p := range []store.EventListParams{
		{TenantID: "ta", From: base().Add(20 * time.Second), To: base().Add(60 * time.Second)},
		{TenantID: "tb", Status: model.EventScheduled},
		{TenantID: "ta", Status: model.EventCancelled, Limit: 3},
	} {
		a, aerr := one.EventList(ctx, &p)
		b, berr := grouped.EventList(ctx, &p)
		same(fmt.Sprintf("EventList %+v", p), a, b, aerr, berr)
	}
	for _, tenant := range []string{"ta", "tb", "tc"} {
		for _, max := range []int{0, 1, 5, 30} {
			a, aerr := one.EventCountByTenant(ctx, tenant, max)
			b, berr := grouped.EventCountByTenant(ctx, tenant, max)
			same(fmt.Sprintf("EventCountByTenant %s %d", tenant, max), a, b, aerr, berr)
		}
		a, aerr := one.EventCountByStatus(ctx, tenant)
		b, berr := grouped.EventCountByStatus(ctx, tenant)
		same("EventCountByStatus "+tenant, a, b, aerr, berr)
	}
	for _, sc := range w.scheds {
		a, aerr := one.FireList(ctx, &store.FireListParams{TenantID: sc.TenantID, ScheduleID: sc.ID})
		b, berr := grouped.FireList(ctx, &store.FireListParams{TenantID: sc.TenantID, ScheduleID: sc.ID})
		same("FireList "+sc.ID, a, b, aerr, berr)
	}
}

// errClass names the model sentinel err wraps.
func errClass(err error) string {
	for _, s := range []error{model.ErrNotFound, model.ErrConflict, model.ErrInvalid, model.ErrUnavailable} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return ""
}

// show prints events by value.
func show(v any) string {
	switch v := v.(type) {
	case []*model.Event:
		out := "["
		for _, e := range v {
			out += fmt.Sprintf("%+v ", *e)
		}
		return out + "]"
	case *model.Event:
		if v != nil {
			return fmt.Sprintf("%+v", *v)
		}
	}
	return fmt.Sprintf("%+v", v)
}

// A random mix of creates (one-offs, some with a policy, fan-outs, events
// joining a one-off's fire), claims, transitions, cancels, schedule
// updates and deletes, fire decisions and retention runs gets the same
// answers from a store that holds one-offs' events in their rows as from
// one that groups every event, and so do all the queries (compareStores)
// every few operations. SCHEDULERD_ONERECORD_SEED sets the seed.
func TestOneRecordRandomOps(t *testing.T) {
	ctx := t.Context()
	seed := oneSeed(t)
	one := openTemp(t, Options{})
	grouped := openTemp(t, Options{groupedOneOffs: true})
	r := rand.New(rand.NewPCG(seed, 7))
	w := &oneWorld{r: rand.New(rand.NewPCG(seed, 8))}
	same := func(what string, a, b any, aerr, berr error) {
		t.Helper()
		if errClass(aerr) != errClass(berr) || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s:\n one record: %v %s\n grouped:    %v %s", what, show(a), errClass(aerr), show(b), errClass(berr))
		}
	}
	tenants := []string{"ta", "tb"}
	fence := int64(1)
	held, materialised := 0, 0 // rows that held an event at once; events taken out of rows
	rows := 0
	for op := range 300 {
		now := base().Add(time.Duration(op) * time.Second)
		switch k := r.IntN(100); {
		case k < 5 && len(w.scheds) > 0: // one one-off, created alone
			it := w.oneOff(tenants[r.IntN(2)], "")
			aerr := storetest.CreateSchedule(ctx, one, it.Schedule, it.Children, it.Fires...)
			berr := storetest.CreateSchedule(ctx, grouped, it.Schedule, it.Children, it.Fires...)
			same("create one", nil, nil, aerr, berr)
		case k < 25 || len(w.scheds) == 0: // a batch of one-offs
			var items []store.ScheduleNew
			for range 1 + r.IntN(4) {
				policy := ""
				if r.IntN(6) == 0 {
					policy = "pol"
				}
				items = append(items, w.oneOff(tenants[r.IntN(2)], policy))
			}
			if r.IntN(8) == 0 { // an id that exists: a conflict
				dup := *items[0].Schedule
				dup.ID = w.scheds[r.IntN(len(w.scheds))].ID
				items = append(items, store.ScheduleNew{Schedule: &dup})
			}
			a, aerr := one.ScheduleCreateMany(ctx, items)
			b, berr := grouped.ScheduleCreateMany(ctx, items)
			same("ScheduleCreateMany", errClasses(a), errClasses(b), aerr, berr)
		case k < 30:
			fn := []store.FireNew{w.fanOut(tenants[r.IntN(2)], 1+r.IntN(5))}
			_, an, aerr := one.FireInsertMany(ctx, fn)
			_, bn, berr := grouped.FireInsertMany(ctx, fn)
			same("FireInsertMany", an, bn, aerr, berr)
		case k < 35: // an event joins a one-off's fire
			e := w.joiner(w.scheds[r.IntN(len(w.scheds))])
			an, aerr := one.EventInsertMany(ctx, []*model.Event{e})
			bn, berr := grouped.EventInsertMany(ctx, []*model.Event{e})
			same("EventInsertMany "+e.ID, an, bn, aerr, berr)
		case k < 55:
			fence++
			p := &store.EventClaimParams{Shard: r.IntN(3), Fence: fence, DueBefore: base().Add(time.Duration(r.IntN(w.n+10)) * time.Second), Limit: 1 + r.IntN(4)}
			a, aerr := one.EventClaimDue(ctx, p)
			b, berr := grouped.EventClaimDue(ctx, p)
			same(fmt.Sprintf("EventClaimDue %+v", *p), a, b, aerr, berr)
		case k < 70:
			id := w.events[r.IntN(len(w.events))]
			var ts []store.EventTransition
			switch r.IntN(5) {
			case 0:
				ts = append(ts, store.StartDelivery(id, fence, now.Add(time.Minute), now))
			case 1:
				ts = append(ts, store.DeliveredReleased(id, model.EventDelivering, 0, 1, false, now))
			case 2:
				ts = append(ts, store.Retry(id, model.EventPending, 0, 1, now.Add(time.Hour), "boom", false, now))
			case 3:
				ts = append(ts, store.Acknowledge(id, model.EventPending, now))
			default:
				ts = append(ts, store.Dead(id, model.EventScheduled, 0, 1, "gone", false, now))
			}
			a, aerr := one.EventTransition(ctx, ts)
			b, berr := grouped.EventTransition(ctx, ts)
			same(fmt.Sprintf("EventTransition %+v", ts[0]), errClasses(a), errClasses(b), aerr, berr)
		case k < 77:
			sc := w.scheds[r.IntN(len(w.scheds))]
			fireID := ""
			if r.IntN(2) == 0 {
				fireID = model.FireID(sc.ID, 1, *sc.RunAt)
			}
			a, aerr := one.EventCancelPending(ctx, sc.ID, fireID, now)
			b, berr := grouped.EventCancelPending(ctx, sc.ID, fireID, now)
			same("EventCancelPending "+sc.ID, a, b, aerr, berr)
		case k < 82:
			sc := w.scheds[r.IntN(len(w.scheds))]
			aerr := one.ScheduleDelete(ctx, sc.TenantID, sc.ID)
			berr := grouped.ScheduleDelete(ctx, sc.TenantID, sc.ID)
			same("ScheduleDelete "+sc.ID, nil, nil, aerr, berr)
		case k < 87:
			sc := *w.scheds[r.IntN(len(w.scheds))]
			cur, err := one.ScheduleGet(ctx, sc.TenantID, sc.ID)
			if err != nil {
				continue
			}
			next := *cur
			next.Version, next.Name, next.UpdatedAt = cur.Version+1, "edited", now
			var children []model.Child
			if r.IntN(2) == 0 {
				children = []model.Child{{ScheduleID: sc.ID, TenantID: sc.TenantID, ScheduleVersion: next.Version, Partition: sc.Partition, Timezone: "UTC", LaunchExpression: "X", Minute: 1}}
			}
			aerr := one.ScheduleUpdate(ctx, &next, cur.Version, children)
			berr := grouped.ScheduleUpdate(ctx, &next, cur.Version, children)
			same("ScheduleUpdate "+sc.ID, nil, nil, aerr, berr)
		case k < 92:
			f := w.fires[r.IntN(len(w.fires))]
			aerr := one.FireSetDecision(ctx, f, model.FireSkippedOverlap, "note")
			berr := grouped.FireSetDecision(ctx, f, model.FireSkippedOverlap, "note")
			same("FireSetDecision "+f, nil, nil, aerr, berr)
		case k < 95:
			a, aerr := one.EventDeleteFinishedBefore(ctx, now, 3)
			b, berr := grouped.EventDeleteFinishedBefore(ctx, now, 3)
			same("EventDeleteFinishedBefore", a, b, aerr, berr)
		default:
			compareStores(t, one, grouped, w, r)
		}
		if t.Failed() {
			t.Fatalf("after operation %d", op)
		}
		n := rowEventCount(t, one)
		if n < rows {
			materialised += rows - n
		}
		rows, held = n, max(held, n)
	}
	compareStores(t, one, grouped, w, r)
	checkEventIndexes(t, one)
	checkEventIndexes(t, grouped)
	if held < 10 || materialised < 10 {
		t.Errorf("at most %d rows held an event at once, %d events left rows: the test did not exercise the one-record form", held, materialised)
	}
	t.Logf("%d events, %d schedules; at most %d rows held an event, %d events left rows, %d rows hold one at the end", len(w.events), len(w.scheds), held, materialised, rows)
}

// errClasses is errClass of each error.
func errClasses(errs []error) []string {
	out := make([]string, len(errs))
	for i, err := range errs {
		out[i] = errClass(err)
	}
	return out
}

// headSeq returns the last group sequence given out.
func headSeq(t *testing.T, s *Store) uint64 {
	t.Helper()
	var seq uint64
	if err := s.db.View(func(tx *bolt.Tx) error {
		seq = tx.Bucket(bEvHeads).Sequence()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return seq
}

// The first change to an event that a one-off's row holds (a claim, a
// transition, a cancel, an event joining its fire, an update or delete
// of its schedule, a new decision of its fire) moves it into a group of
// its own in the same commit, once: the row no longer holds it, one
// group sequence is given out, and the changes after it find the group.
// The event reads as in a store that groups every event all along.
func TestOneRecordMaterialisesOnce(t *testing.T) {
	ctx := t.Context()
	changes := []struct {
		name   string
		change func(s *Store, sc *model.Schedule, e *model.Event) error
	}{
		{"claim", func(s *Store, sc *model.Schedule, e *model.Event) error {
			got, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: e.Shard, Fence: 2, DueBefore: e.LaunchAt.Add(time.Second), Limit: 5})
			if err == nil && len(got) != 1 {
				err = fmt.Errorf("claimed %d events, want 1", len(got))
			}
			return err
		}},
		{"transition", func(s *Store, sc *model.Schedule, e *model.Event) error {
			res, err := s.EventTransition(ctx, []store.EventTransition{store.Acknowledge(e.ID, model.EventPending, base().Add(time.Minute))})
			return firstErr(err, res)
		}},
		{"cancel", func(s *Store, sc *model.Schedule, e *model.Event) error {
			n, err := s.EventCancelPending(ctx, sc.ID, "", base().Add(time.Minute))
			if err == nil && n != 1 {
				err = fmt.Errorf("cancelled %d, want 1", n)
			}
			return err
		}},
		{"cancel of the fire", func(s *Store, sc *model.Schedule, e *model.Event) error {
			n, err := s.EventCancelPending(ctx, sc.ID, e.FireID, base().Add(time.Minute))
			if err == nil && n != 1 {
				err = fmt.Errorf("cancelled %d, want 1", n)
			}
			return err
		}},
		{"event joins the fire", func(s *Store, sc *model.Schedule, e *model.Event) error {
			j := *e
			j.ID, j.Index, j.Count, j.Shard = model.EventID(e.FireID, 1), 1, 2, 2
			n, err := s.EventInsertMany(ctx, []*model.Event{&j})
			if err == nil && n != 1 {
				err = fmt.Errorf("inserted %d, want 1", n)
			}
			return err
		}},
		{"schedule update", func(s *Store, sc *model.Schedule, e *model.Event) error {
			next := *sc
			next.Version, next.Payload = 2, []byte(`{"edited":true}`)
			return s.ScheduleUpdate(ctx, &next, 1, nil)
		}},
		{"schedule delete", func(s *Store, sc *model.Schedule, e *model.Event) error {
			return s.ScheduleDelete(ctx, sc.TenantID, sc.ID)
		}},
		{"fire decision", func(s *Store, sc *model.Schedule, e *model.Event) error {
			return s.FireSetDecision(ctx, e.FireID, model.FireSkippedOverlap, "skipped")
		}},
	}
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			w := &oneWorld{r: rand.New(rand.NewPCG(4, 4))}
			items := []store.ScheduleNew{w.oneOff("ta", ""), w.oneOff("ta", "")}
			one := openTemp(t, Options{})
			grouped := openTemp(t, Options{groupedOneOffs: true})
			for _, s := range []*Store{one, grouped} {
				if _, err := s.ScheduleCreateMany(ctx, items); err != nil {
					t.Fatal(err)
				}
			}
			sc, e := items[0].Schedule, items[0].Fires[0].Events[0]
			seq := headSeq(t, one)
			for _, s := range []*Store{one, grouped} {
				if err := c.change(s, sc, e); err != nil {
					t.Fatal(err)
				}
			}
			if n := rowEventCount(t, one); n != 1 {
				t.Errorf("%d rows hold their event, want 1 (the untouched one-off's)", n)
			}
			if got := headSeq(t, one); got != seq+1 {
				t.Errorf("group sequence %d after the change, want %d: one group", got, seq+1)
			}
			keys := bucketKeys(t, one, bEvGroups, bEvHeads, bEvDue)
			checkEventIndexes(t, one)
			compareStores(t, one, grouped, w, w.r)
			// A second change finds the group.
			for _, s := range []*Store{one, grouped} {
				if _, err := s.EventTransition(ctx, []store.EventTransition{store.Acknowledge(e.ID, model.EventPending, base().Add(time.Hour))}); err != nil {
					t.Fatal(err)
				}
			}
			if got := headSeq(t, one); got != seq+1 {
				t.Errorf("group sequence %d after a second change, want %d", got, seq+1)
			}
			if got := bucketKeys(t, one, bEvGroups, bEvHeads); got[string(bEvGroups)] != keys[string(bEvGroups)] || got[string(bEvHeads)] != keys[string(bEvHeads)] {
				t.Errorf("groups and heads after a second change: %v, want %v", got, keys)
			}
			checkEventIndexes(t, one)
			compareStores(t, one, grouped, w, w.r)
		})
	}
}

// firstErr is the first error of a call or of its results.
func firstErr(err error, results []error) error {
	if err != nil {
		return err
	}
	for _, r := range results {
		if r != nil {
			return r
		}
	}
	return nil
}

func TestIsFirstEventID(t *testing.T) {
	const f = "sch_1.1748862015.v3"
	for _, c := range []struct {
		id   string
		want bool
	}{
		{model.EventID(f, 0), true},
		{model.EventID(f, 1), false},
		{model.EventID(f, 10), false},
		{f + ".00", false},
		{f + "x0", false},
		{f + ".", false},
		{f, false},
		{model.EventID("sch_2.1748862015.v3", 0), false},
		{model.EventID(f+"1", 0), false},
	} {
		if got := isFirstEventID(c.id, f); got != c.want {
			t.Errorf("isFirstEventID(%q) = %v, want %v", c.id, got, c.want)
		}
	}
}
