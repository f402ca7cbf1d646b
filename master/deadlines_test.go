package master_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
)

type missed struct {
	mu    sync.Mutex
	fires []*model.Fire
	pols  []string
}

func (m *missed) FireDeadlineMissed(f *model.Fire, policyID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fires, m.pols = append(m.fires, f), append(m.pols, policyID)
}

// A fire under onDeadline expire with a released, an in-flight and two
// waiting events: at its deadline the waiting ones become expired, the miss
// is recorded with 3 remaining, and of two instances checking (and one
// checking again after a restart) the observer hears of it once. A fire
// finished in time records nothing.
func TestDeadlineCheckRecordsOnceAndExpires(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC))
	fireAt := clock.Now()
	deadline := fireAt.Add(45 * time.Minute)
	s := &model.Schedule{ID: "s1", TenantID: "t1", Name: "s1", Cron: "0 3 * * *", Timezone: "UTC", EventCount: 4,
		PolicyID: "pol", Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/"}, MaxAttempts: 3,
		Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow, State: model.ScheduleActive, Version: 1,
		Deadline: 45 * time.Minute, OnDeadline: model.DeadlineExpire, CreatedAt: fireAt, UpdatedAt: fireAt}
	fire := func(sched string, statuses ...model.EventStatus) store.FireNew {
		f := &model.Fire{ID: model.FireID(sched, 1, fireAt), ScheduleID: sched, TenantID: "t1", FireTime: fireAt,
			LocalTime: fireAt.Format(time.RFC3339), Count: len(statuses), Decision: model.FireEmitted, CreatedAt: fireAt,
			Deadline: &deadline, OnDeadline: model.DeadlineExpire}
		var evs []*model.Event
		for i, stt := range statuses {
			evs = append(evs, &model.Event{ID: model.EventID(f.ID, i), TenantID: "t1", ScheduleID: sched, FireID: f.ID,
				FireTime: fireAt, Index: i, Count: len(statuses), LaunchAt: fireAt, Deadline: &deadline, ExpireAt: &deadline,
				PolicyID: "pol", Target: s.Target, MaxAttempts: 3, Status: stt, CreatedAt: fireAt, UpdatedAt: fireAt})
		}
		return store.FireNew{Fire: f, Events: evs}
	}
	late := fire("s1", model.EventReleased, model.EventDelivering, model.EventPending, model.EventRetrying)
	onTime := fire("s2", model.EventReleased, model.EventDead)
	errs, err := st.ScheduleCreateMany(ctx, []store.ScheduleNew{{Schedule: s, Fires: []store.FireNew{late, onTime}}})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	obs := &missed{}
	a := master.NewDeadlineChecker(st, obs, clock, zerolog.Nop(), 0)
	b := master.NewDeadlineChecker(st, obs, clock, zerolog.Nop(), 0)

	clock.Advance(45*time.Minute - time.Second)
	if n, err := a.CheckDue(ctx); err != nil || n != 0 {
		t.Fatalf("before the deadline: %d misses, %v", n, err)
	}
	if e, _ := st.EventGetByID(ctx, late.Events[2].ID); e.Status != model.EventPending {
		t.Fatalf("before the deadline: %s", e.Status)
	}
	clock.Advance(time.Second)
	var wg sync.WaitGroup
	for _, c := range []*master.DeadlineChecker{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.CheckDue(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	restarted := master.NewDeadlineChecker(st, obs, clock, zerolog.Nop(), 0)
	if n, err := restarted.CheckDue(ctx); err != nil || n != 0 {
		t.Fatalf("after a restart: %d misses, %v", n, err)
	}

	if len(obs.fires) != 1 || obs.fires[0].ID != late.Fire.ID || obs.pols[0] != "pol" {
		t.Fatalf("observer heard %d misses (%v), want one of %s on pol", len(obs.fires), obs.pols, late.Fire.ID)
	}
	f, err := st.FireGet(ctx, "t1", late.Fire.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.DeadlineMissed == nil || !f.DeadlineMissed.At.Equal(deadline) || f.DeadlineMissed.Remaining != 3 {
		t.Fatalf("DeadlineMissed %+v, want at %s with 3 remaining", f.DeadlineMissed, deadline)
	}
	want := []model.EventStatus{model.EventReleased, model.EventDelivering, model.EventExpired, model.EventExpired}
	for i, e := range late.Events {
		got, err := st.EventGetByID(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != want[i] {
			t.Errorf("event %d: %s, want %s", i, got.Status, want[i])
		}
	}
	if f, _ := st.FireGet(ctx, "t1", onTime.Fire.ID); f.DeadlineMissed != nil {
		t.Errorf("a fire finished in time has DeadlineMissed %+v", f.DeadlineMissed)
	}
}

// flakyNotifier fails its first call, then records the fires it is given.
type flakyNotifier struct {
	calls int
	kinds []model.NotifyKind
	fires []*model.Fire
}

func (n *flakyNotifier) Notify(_ context.Context, k model.NotifyKind, f *model.Fire) error {
	n.calls++
	if n.calls == 1 {
		return errors.New("the notification store is away")
	}
	n.kinds, n.fires = append(n.kinds, k), append(n.fires, f)
	return nil
}

// A missed deadline's notifications are written before the miss is
// recorded: when writing them fails, the deadline stays open and the next
// check writes them and then records the miss; after that nothing more.
func TestDeadlineMissNotifiesBeforeRecording(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC))
	fireAt := clock.Now()
	deadline := fireAt.Add(time.Minute)
	s := &model.Schedule{ID: "s1", TenantID: "t1", Name: "s1", Cron: "0 3 * * *", Timezone: "UTC", EventCount: 1,
		Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/"}, MaxAttempts: 3,
		Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow, State: model.ScheduleActive, Version: 1,
		Deadline: time.Minute, CreatedAt: fireAt, UpdatedAt: fireAt}
	f := &model.Fire{ID: model.FireID("s1", 1, fireAt), ScheduleID: "s1", TenantID: "t1", FireTime: fireAt,
		LocalTime: fireAt.Format(time.RFC3339), Count: 1, Decision: model.FireEmitted, CreatedAt: fireAt,
		Deadline: &deadline, OnDeadline: model.DeadlineRecord}
	ev := &model.Event{ID: model.EventID(f.ID, 0), TenantID: "t1", ScheduleID: "s1", FireID: f.ID, FireTime: fireAt,
		Count: 1, LaunchAt: fireAt, Deadline: &deadline, Target: s.Target, MaxAttempts: 3, Status: model.EventPending,
		CreatedAt: fireAt, UpdatedAt: fireAt}
	errs, err := st.ScheduleCreateMany(ctx, []store.ScheduleNew{{Schedule: s, Fires: []store.FireNew{{Fire: f, Events: []*model.Event{ev}}}}})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	n := &flakyNotifier{}
	c := master.NewDeadlineChecker(st, nil, clock, zerolog.Nop(), 0)
	c.NotifyMisses(n)
	clock.Advance(time.Minute)

	if _, err := c.CheckDue(ctx); err == nil {
		t.Fatal("a failed notification was not reported")
	}
	if got, _ := st.FireGet(ctx, "t1", f.ID); got.DeadlineMissed != nil {
		t.Fatalf("the miss was recorded before its notification was written: %+v", got.DeadlineMissed)
	}
	if _, err := c.CheckDue(ctx); err != nil {
		t.Fatal(err)
	}
	if len(n.fires) != 1 || n.kinds[0] != model.NotifyDeadlineMissed || n.fires[0].DeadlineMissed == nil || n.fires[0].DeadlineMissed.Remaining != 1 {
		t.Fatalf("notified %v %+v, want one fire.deadline_missed with 1 remaining", n.kinds, n.fires)
	}
	if got, _ := st.FireGet(ctx, "t1", f.ID); got.DeadlineMissed == nil {
		t.Fatal("the miss is not recorded after its notification")
	}
	if _, err := c.CheckDue(ctx); err != nil || len(n.fires) != 1 {
		t.Fatalf("a recorded miss notified again: %d calls, %v", len(n.fires), err)
	}
}
