package embedded

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// The store against a plain model: random sequences of creates, updates,
// pauses, resumes, deletes and event transitions on schedules of 1 to 1,440
// children, each call under a deadline (a call that never returns ends the
// run, naming it), the store compared with the model after every step.
// SCHEDULERD_MODEL_SEED sets the seed, SCHEDULERD_MODEL_STEPS the steps.

// modelKeys is every child key the test uses: minute m of hour h, as the
// children of "m h * * *".
var modelKeys = func() []model.ChildKey {
	keys := make([]model.ChildKey, 0, 24*60)
	for h := range 24 {
		for m := range 60 {
			keys = append(keys, model.ChildKey{LaunchExpression: fmt.Sprintf("H:%02d", h), Minute: m})
		}
	}
	return keys
}()

type modelSched struct {
	tenant  string
	state   model.ScheduleState
	version int64
	keys    []model.ChildKey // what the schedule's cron splits into
	// children are the stored children: key → the version that wrote it.
	children map[model.ChildKey]int64
}

type modelEvent struct {
	sched  string
	status model.EventStatus
	fence  int64
	launch time.Time
}

type storeModel struct {
	t      *testing.T
	s      *Store
	r      *rand.Rand
	now    time.Time
	n      int
	fence  int64
	scheds map[string]*modelSched
	gone   map[string]string // deleted schedule id → tenant
	events map[string]*modelEvent
}

func TestStoreAgainstModel(t *testing.T) {
	seed := testseed.Get(t, "SCHEDULERD_MODEL_SEED", 1)
	steps := 300
	if v := os.Getenv("SCHEDULERD_MODEL_STEPS"); v != "" {
		var err error
		if steps, err = strconv.Atoi(v); err != nil {
			t.Fatalf("SCHEDULERD_MODEL_STEPS=%q: %v", v, err)
		}
	}
	m := &storeModel{t: t, s: openTemp(t, Options{}), r: rand.New(rand.NewPCG(seed, 41)),
		now: time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC), fence: 1,
		scheds: map[string]*modelSched{}, gone: map[string]string{}, events: map[string]*modelEvent{}}
	counts := map[string]int{}
	for step := range steps {
		m.now = m.now.Add(time.Second)
		op := m.step()
		counts[op]++
		if err := m.compare(); err != nil {
			t.Fatalf("step %d (%s): %v (counts so far %v)", step, op, err, counts)
		}
	}
	t.Logf("operations: %v", counts)
	checkEventIndexes(t, m.s)
	for _, op := range []string{"create", "update", "pause", "resume", "delete", "stale", "events", "claim", "deliver", "cancel-deliver"} {
		if counts[op] == 0 {
			t.Errorf("no %q step in %d steps: the draw does not cover the operations", op, steps)
		}
	}
}

// call runs a store call under the deadline.
func (m *storeModel) call(what string, fn func() error) error {
	m.t.Helper()
	var err error
	storetest.Within(m.t, 30*time.Second, what, func() { err = fn() })
	return err
}

func (m *storeModel) must(what string, fn func() error) {
	m.t.Helper()
	if err := m.call(what, fn); err != nil {
		m.t.Fatalf("%s: %v", what, err)
	}
}

// childCount draws a schedule's number of children: mostly a few, some
// every minute of an hour, some every minute of the day.
func (m *storeModel) childCount() int {
	switch m.r.IntN(10) {
	case 0:
		return 1440
	case 1, 2:
		return 45 + m.r.IntN(120)
	default:
		return 1 + m.r.IntN(12)
	}
}

func (m *storeModel) drawKeys() []model.ChildKey {
	n := m.childCount()
	idx := m.r.Perm(len(modelKeys))[:n]
	slices.Sort(idx)
	keys := make([]model.ChildKey, n)
	for i, j := range idx {
		keys[i] = modelKeys[j]
	}
	return keys
}

func (m *storeModel) schedule(id string, ms *modelSched) *model.Schedule {
	return &model.Schedule{ID: id, TenantID: ms.tenant, Name: "s-" + id, Cron: "* * * * *", Timezone: "UTC",
		EventCount: 1, Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/hook"},
		MaxAttempts: 3, Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow,
		State: ms.state, Version: ms.version, CreatedAt: m.now, UpdatedAt: m.now}
}

func children(sc *model.Schedule, keys []model.ChildKey) []model.Child {
	cs := make([]model.Child, len(keys))
	for i, k := range keys {
		cs[i] = model.Child{ScheduleID: sc.ID, TenantID: sc.TenantID, ScheduleVersion: sc.Version,
			Timezone: sc.Timezone, LaunchExpression: k.LaunchExpression, Minute: k.Minute}
	}
	return cs
}

// pick returns a schedule id of the model in state (any state when
// empty), or "" when there is none.
func (m *storeModel) pick(state model.ScheduleState) string {
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(m.scheds)) {
		if state == "" || m.scheds[id].state == state {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return ids[m.r.IntN(len(ids))]
}

func (m *storeModel) pickEvent(status model.EventStatus) string {
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(m.events)) {
		if m.events[id].status == status {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return ids[m.r.IntN(len(ids))]
}

// replace writes ms's next version with children keys (none: nil keys),
// as an update, a pause or a resume does.
func (m *storeModel) replace(id string, state model.ScheduleState, keys []model.ChildKey, what string) {
	ms := m.scheds[id]
	next := *ms
	next.state, next.version = state, ms.version+1
	sc := m.schedule(id, &next)
	cs := children(sc, keys)
	m.must(what+" "+id, func() error { return m.s.ScheduleUpdate(m.t.Context(), sc, ms.version, cs) })
	ms.state, ms.version = state, next.version
	ms.children = map[model.ChildKey]int64{}
	for _, k := range keys {
		ms.children[k] = ms.version
	}
}

// cancel cancels a schedule's waiting events, as a pause or a delete does.
func (m *storeModel) cancel(id string) {
	var want int
	for _, e := range m.events {
		if e.sched == id && (e.status == model.EventPending || e.status == model.EventRetrying || e.status == model.EventScheduled) {
			e.status = model.EventCancelled
			want++
		}
	}
	var n int
	m.must("EventCancelPending "+id, func() (err error) {
		n, err = m.s.EventCancelPending(m.t.Context(), id, "", m.now)
		return err
	})
	if n != want {
		m.t.Fatalf("EventCancelPending %s cancelled %d events, want %d", id, n, want)
	}
}

func (m *storeModel) step() string {
	ctx := m.t.Context()
	op := m.r.IntN(14)
	if op < 2 && len(m.scheds) >= 3 {
		// Few schedules at a time: an update then often rewrites every
		// child in the store.
		op = 5
	}
	switch {
	case op < 2 || len(m.scheds) == 0:
		m.n++
		id := fmt.Sprintf("sch_%08d-%s", m.n, "0123456789abcdefghijklmnopqrstuv")
		ms := &modelSched{tenant: []string{"ta", "tb"}[m.r.IntN(2)], state: model.ScheduleActive, version: 1,
			keys: m.drawKeys(), children: map[model.ChildKey]int64{}}
		sc := m.schedule(id, ms)
		m.must("ScheduleCreate "+id, func() error { return storetest.CreateSchedule(ctx, m.s, sc, children(sc, ms.keys)) })
		for _, k := range ms.keys {
			ms.children[k] = 1
		}
		m.scheds[id] = ms
		return "create"
	case op == 2:
		id := m.pick(model.ScheduleActive)
		if id == "" {
			return "none"
		}
		ms := m.scheds[id]
		if m.r.IntN(3) == 0 {
			// A change that keeps the cron: the same children, a new version.
			m.replace(id, model.ScheduleActive, ms.keys, "ScheduleUpdate")
			return "update"
		}
		ms.keys = m.drawKeys()
		m.replace(id, model.ScheduleActive, ms.keys, "ScheduleUpdate")
		return "update"
	case op == 3:
		id := m.pick(model.ScheduleActive)
		if id == "" {
			return "none"
		}
		m.replace(id, model.SchedulePaused, nil, "ScheduleUpdate pause")
		m.cancel(id)
		return "pause"
	case op == 4:
		id := m.pick(model.SchedulePaused)
		if id == "" {
			return "none"
		}
		m.replace(id, model.ScheduleActive, m.scheds[id].keys, "ScheduleUpdate resume")
		return "resume"
	case op == 5:
		id := m.pick("")
		ms := m.scheds[id]
		m.must("ScheduleDelete "+id, func() error { return m.s.ScheduleDelete(ctx, ms.tenant, id) })
		delete(m.scheds, id)
		m.gone[id] = ms.tenant
		m.cancel(id)
		return "delete"
	case op == 6:
		id := m.pick("")
		ms := m.scheds[id]
		sc := m.schedule(id, ms) // the version after ms.version-1
		err := m.call("ScheduleUpdate stale "+id, func() error {
			return m.s.ScheduleUpdate(ctx, sc, ms.version-1, children(sc, m.drawKeys()))
		})
		if !errors.Is(err, model.ErrConflict) {
			m.t.Fatalf("ScheduleUpdate of %s at a stale version: %v, want ErrConflict", id, err)
		}
		return "stale"
	case op < 9:
		id := m.pick(model.ScheduleActive)
		if id == "" {
			return "none"
		}
		ms := m.scheds[id]
		fireTime := m.now.Truncate(time.Minute).Add(-time.Duration(m.r.IntN(5)) * time.Minute)
		fireID := model.FireID(id, ms.version, fireTime)
		var es []*model.Event
		policy := []string{"", "", "pol-a", "pol-b"}[m.r.IntN(4)] // policies' lanes take turns by schedule
		for i := range 1 + m.r.IntN(150) {
			e := &model.Event{ID: model.EventID(fireID, i), TenantID: ms.tenant, ScheduleID: id, FireID: fireID,
				FireTime: fireTime, Count: 1, LaunchAt: fireTime.Add(time.Duration(m.r.IntN(60_000)) * time.Millisecond),
				Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/hook"}, MaxAttempts: 3,
				PolicyID: policy, Status: model.EventPending, CreatedAt: m.now, UpdatedAt: m.now}
			es = append(es, e)
		}
		var want int
		for _, e := range es {
			if m.events[e.ID] == nil {
				m.events[e.ID] = &modelEvent{sched: id, status: model.EventPending, launch: e.LaunchAt}
				want++
			}
		}
		var n int
		m.must("EventInsertMany of "+fireID, func() (err error) { n, err = m.s.EventInsertMany(ctx, es); return err })
		if n != want {
			m.t.Fatalf("EventInsertMany inserted %d, want %d", n, want)
		}
		return "events"
	case op < 11:
		m.fence++
		limit := 1 + m.r.IntN(80)
		due := m.now.Add(time.Duration(m.r.IntN(60)) * time.Second)
		var got []*model.Event
		m.must("EventClaimDue", func() (err error) {
			got, err = m.s.EventClaimDue(ctx, &store.EventClaimParams{Fence: m.fence, DueBefore: due, Limit: limit})
			return err
		})
		var claimable []string
		for id, e := range m.events {
			if (e.status == model.EventPending || e.status == model.EventRetrying) && e.launch.Before(due) ||
				e.status == model.EventScheduled && e.fence < m.fence {
				claimable = append(claimable, id)
			}
		}
		if want := min(limit, len(claimable)); len(got) != want {
			m.t.Fatalf("EventClaimDue (limit %d) claimed %d events, want %d of %d claimable", limit, len(got), want, len(claimable))
		}
		for _, e := range got {
			me := m.events[e.ID]
			if me == nil || !slices.Contains(claimable, e.ID) {
				m.t.Fatalf("EventClaimDue claimed %s, which is not claimable (%+v)", e.ID, me)
			}
			me.status, me.fence = model.EventScheduled, m.fence
		}
		return "claim"
	case op < 13:
		id := m.pickEvent(model.EventScheduled)
		if id == "" {
			return "none"
		}
		e := m.events[id]
		to := store.DeliveredReleased(id, model.EventScheduled, e.fence, 1, false, m.now)
		what := "deliver"
		if m.r.IntN(4) == 0 {
			to = store.Dead(id, model.EventScheduled, e.fence, 1, "gone", false, m.now)
			what = "dead"
		}
		var errs []error
		m.must("EventTransition "+what+" "+id, func() (err error) {
			errs, err = m.s.EventTransition(ctx, []store.EventTransition{to})
			return err
		})
		if errs[0] != nil {
			m.t.Fatalf("EventTransition %s of %s: %v", what, id, errs[0])
		}
		e.status = to.To
		return "deliver"
	default:
		// A transition from a status the event is not in conflicts.
		id := m.pickEvent(model.EventCancelled)
		if id == "" {
			return "none"
		}
		var errs []error
		m.must("EventTransition from scheduled of cancelled "+id, func() (err error) {
			errs, err = m.s.EventTransition(ctx, []store.EventTransition{store.DeliveredReleased(id, model.EventScheduled, 0, 1, false, m.now)})
			return err
		})
		if !errors.Is(errs[0], model.ErrConflict) {
			m.t.Fatalf("delivering cancelled event %s: %v, want ErrConflict", id, errs[0])
		}
		return "cancel-deliver"
	}
}

// compare checks the store against the model: every schedule's state and
// version, deleted ones gone, every child (cross-tenant, through
// ChildrenFind) and every event's status.
func (m *storeModel) compare() error {
	ctx := m.t.Context()
	for _, id := range slices.Sorted(maps.Keys(m.scheds)) {
		ms := m.scheds[id]
		var sc *model.Schedule
		if err := m.call("ScheduleGet "+id, func() (err error) { sc, err = m.s.ScheduleGet(ctx, ms.tenant, id); return err }); err != nil {
			return fmt.Errorf("schedule %s: %w", id, err)
		}
		if sc.State != ms.state || sc.Version != ms.version {
			return fmt.Errorf("schedule %s is %s v%d, want %s v%d", id, sc.State, sc.Version, ms.state, ms.version)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(m.gone)) {
		err := m.call("ScheduleGet deleted "+id, func() error { _, err := m.s.ScheduleGet(ctx, m.gone[id], id); return err })
		if !errors.Is(err, model.ErrNotFound) {
			return fmt.Errorf("deleted schedule %s: %v, want ErrNotFound", id, err)
		}
	}
	var got []model.Child
	if err := m.call("ChildrenFind", func() (err error) {
		got, err = m.s.ChildrenFind(ctx, &store.ChildrenFindParams{Timezone: "UTC", Keys: modelKeys})
		return err
	}); err != nil {
		return err
	}
	have := map[string]bool{}
	for _, c := range got {
		s := fmt.Sprintf("%s v%d %s@%d", c.ScheduleID, c.ScheduleVersion, c.LaunchExpression, c.Minute)
		if have[s] {
			return fmt.Errorf("child %s found twice", s)
		}
		have[s] = true
	}
	var want []string
	for id, ms := range m.scheds {
		for k, v := range ms.children {
			want = append(want, fmt.Sprintf("%s v%d %s@%d", id, v, k.LaunchExpression, k.Minute))
		}
	}
	if len(want) != len(have) {
		return fmt.Errorf("%d children stored, want %d", len(have), len(want))
	}
	for _, s := range want {
		if !have[s] {
			return fmt.Errorf("child %s missing", s)
		}
	}
	ids := slices.Sorted(maps.Keys(m.events))
	stored := map[string]*model.Event{}
	for chunk := range slices.Chunk(ids, 500) {
		var es map[string]*model.Event
		if err := m.call("EventGetMany", func() (err error) { es, err = m.s.EventGetMany(ctx, chunk); return err }); err != nil {
			return err
		}
		maps.Copy(stored, es)
	}
	for _, id := range ids {
		e, me := stored[id], m.events[id]
		if e == nil {
			return fmt.Errorf("event %s missing", id)
		}
		if e.Status != me.status || me.status == model.EventScheduled && e.Fence != me.fence {
			return fmt.Errorf("event %s is %s under fence %d, want %s under %d", id, e.Status, e.Fence, me.status, me.fence)
		}
	}
	return nil
}
