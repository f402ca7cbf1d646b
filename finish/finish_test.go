package finish_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/finish"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/storetest"
	"github.com/schedulerd/schedulerd/throttle"
)

const (
	shards = 4
	secret = "test-secret"
)

// rig is a store, an emitter, a finisher and a handler delivering over
// HTTP, as one instance runs them; sweeps are called by the test.
type rig struct {
	st  *embedded.Store
	em  *emitter.Emitter
	fin *finish.Finisher
}

func newRig(t *testing.T) *rig {
	t.Helper()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return newRigOn(t, st)
}

// newRigOn is newRig on st (two rigs on one store are two instances).
func newRigOn(t *testing.T, st *embedded.Store) *rig {
	t.Helper()
	fin, err := finish.New(finish.Config{Shards: shards}, finish.Deps{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	em, err := emitter.New(emitter.Config{Shards: shards, Partitions: 1, Owner: "test"}, emitter.Deps{Store: st, Watch: fin})
	if err != nil {
		t.Fatal(err)
	}
	fin.UseEmitter(em)
	return &rig{st: st, em: em, fin: fin}
}

// deliver starts a handler over r's store on every shard.
func (r *rig) deliver(t *testing.T) {
	t.Helper()
	d, err := httpdelivery.New(httpdelivery.Config{SigningSecret: []byte(secret), ReleaseBaseURL: "http://127.0.0.1:1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	held := allShards{}
	thr, err := throttle.New(throttle.Config{Shards: shards, DrainTimeout: time.Second}, throttle.Deps{Store: r.st, Shards: held})
	if err != nil {
		t.Fatal(err)
	}
	h, err := handler.New(handler.Config{Shards: shards, DrainTimeout: time.Second, PrefetchInterval: 20 * time.Millisecond,
		Backoff: func(int) time.Duration { return 20 * time.Millisecond }},
		handler.Deps{Store: r.st, Shards: held, Throttle: thr, Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: d}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := thr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(); thr.Stop() })
}

// allShards holds every shard under fence 1.
type allShards struct{}

func (allShards) Held() map[int]int64 {
	m := map[int]int64{}
	for i := range shards {
		m[i] = 1
	}
	return m
}
func (allShards) Owns(int, int64) bool     { return true }
func (allShards) Changed() <-chan struct{} { return nil }
func (allShards) Refence(int)              {}

// consumer answers each event of the schedules' target: 200, or 410
// (permanent: dead at once) for an index in dead.
func target(t *testing.T, dead map[int]bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m delivery.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if dead[m.Index] {
			w.WriteHeader(http.StatusGone)
			return
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// receiver records the notifications it accepts; it fails the first
// attempt of each with a 503, so that every one is retried.
type receiver struct {
	mu       sync.Mutex
	failed   map[string]bool
	accepted []model.Notification
	bad      []string
}

func newReceiver(t *testing.T) (*receiver, string) {
	t.Helper()
	rc := &receiver{failed: map[string]bool{}}
	v := consumer.NewVerifier(secret)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if _, err := v.Verify(r.Header.Get(consumer.HeaderSignature), r.Header.Get(consumer.HeaderTimestamp), body); err != nil {
			rc.bad = append(rc.bad, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var m delivery.Message
		var n model.Notification
		if json.Unmarshal(body, &m) != nil || json.Unmarshal(m.Payload, &n) != nil {
			rc.bad = append(rc.bad, string(body))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if !rc.failed[n.ID] {
			rc.failed[n.ID] = true
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rc.accepted = append(rc.accepted, n)
	}))
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

func (rc *receiver) got() []model.Notification {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]model.Notification(nil), rc.accepted...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newSchedule(id, url string, n int) *model.Schedule {
	now := time.Now().UTC()
	return &model.Schedule{
		ID: id, TenantID: "t1", Name: id, Cron: "0 3 * * *", Timezone: "UTC", EventCount: n,
		Target: model.Target{Type: model.TargetHTTP, URL: url}, MaxAttempts: 1,
		Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow, State: model.ScheduleActive,
		Version: 1, CreatedAt: now, UpdatedAt: now,
	}
}

func create(t *testing.T, st store.Driver, s *model.Schedule) {
	t.Helper()
	if err := storetest.CreateSchedule(context.Background(), st, s, nil); err != nil {
		t.Fatal(err)
	}
}

// finished reports whether every event of the fire is finished.
func finished(t *testing.T, st store.Driver, fireID string, n int) bool {
	t.Helper()
	c, err := st.EventCountByFire(context.Background(), fireID)
	if err != nil {
		t.Fatal(err)
	}
	return c[model.EventReleased]+c[model.EventDead]+c[model.EventCancelled] == n
}

func sweep(t *testing.T, f *finish.Finisher) finish.Stats {
	t.Helper()
	st, err := f.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestNotificationPerFire: two fires of five events, one of which goes
// dead, give one signed notification of each kind per fire (never one per
// event) with the fire's counts, each retried after the receiver failed
// it; sweeping again sends nothing more.
func TestNotificationPerFire(t *testing.T) {
	r := newRig(t)
	r.deliver(t)
	rc, url := newReceiver(t)
	s := newSchedule("s1", target(t, map[int]bool{4: true}), 5)
	s.Notify = []model.Notify{{URL: url, On: []model.NotifyKind{model.NotifyFinished, model.NotifyHasDead, model.NotifyEventDead}}}
	create(t, r.st, s)
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Second)
	var fires []*model.Fire
	for i := range 2 {
		f, err := r.em.Trigger(ctx, s, base.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if !f.Watched {
			t.Fatalf("fire %s of a schedule with notify is not watched", f.ID)
		}
		fires = append(fires, f)
	}
	for _, f := range fires {
		waitFor(t, "events of "+f.ID+" finished", func() bool { return finished(t, r.st, f.ID, 5) })
	}
	st := sweep(t, r.fin)
	if st.Finished != 2 || st.Notified != 6 {
		t.Fatalf("first sweep: %+v, want 2 fires finished and 6 notifications", st)
	}
	for range 2 {
		if st := sweep(t, r.fin); st.Finished != 0 || st.Notified != 0 || st.Looked != 0 {
			t.Fatalf("sweep after the finish: %+v, want nothing", st)
		}
	}
	waitFor(t, "6 notifications accepted", func() bool { return len(rc.got()) >= 6 })
	got := rc.got()
	if len(got) != 6 || len(rc.bad) > 0 {
		t.Fatalf("accepted %d notifications (bad: %v), want 6", len(got), rc.bad)
	}
	seen := map[string]bool{}
	for _, n := range got {
		key := n.FireID + " " + string(n.Kind)
		if seen[key] {
			t.Errorf("%s notified twice", key)
		}
		seen[key] = true
		want := model.FireCounts{Count: 5, Released: 4, Dead: 1}
		if n.Kind == model.NotifyEventDead {
			// Sent when the first event died: the others may still run.
			want.Released, want.Waiting = n.Counts.Released, n.Counts.Waiting
		}
		if n.Counts != want || n.ScheduleID != "s1" || n.TenantID != "t1" {
			t.Errorf("%s: %+v, want counts %+v of s1/t1", key, n, want)
		}
	}
	for _, f := range fires {
		for _, k := range []model.NotifyKind{model.NotifyFinished, model.NotifyHasDead, model.NotifyEventDead} {
			if !seen[f.ID+" "+string(k)] {
				t.Errorf("no %s for %s", k, f.ID)
			}
		}
		got, err := r.st.FireGet(ctx, "t1", f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.FinishedAt == nil {
			t.Errorf("fire %s not marked finished", f.ID)
		}
	}
	// Each was retried once: the first attempt failed.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.failed) != 6 {
		t.Errorf("%d notifications failed once, want 6", len(rc.failed))
	}
}

// TestSkippedFireNotified: a fire recorded without events (overlap=skip
// while the previous one runs) is notified as fire.skipped, once, while
// the running one is not finished.
func TestSkippedFireNotified(t *testing.T) {
	r := newRig(t)
	s := newSchedule("s1", "http://127.0.0.1:9/never", 1)
	s.Overlap = model.OverlapSkip
	s.Notify = []model.Notify{{URL: "http://127.0.0.1:9/n", On: []model.NotifyKind{model.NotifySkipped, model.NotifyFinished}}}
	create(t, r.st, s)
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Second)
	first, err := r.em.Trigger(ctx, s, base)
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.em.Trigger(ctx, s, base.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if second.Decision != model.FireSkippedOverlap {
		t.Fatalf("second fire: %s, want skipped_overlap", second.Decision)
	}
	for range 2 {
		sweep(t, r.fin)
	}
	ev, err := r.st.EventGetByID(ctx, model.EventID(model.NotificationFireID(second.ID, model.NotifySkipped), 0))
	if err != nil {
		t.Fatalf("fire.skipped notification of %s: %v", second.ID, err)
	}
	var n model.Notification
	if err := json.Unmarshal(ev.Payload, &n); err != nil || n.Kind != model.NotifySkipped || n.FireID != second.ID || n.Decision != model.FireSkippedOverlap {
		t.Fatalf("notification %s: %+v (%v)", ev.ID, n, err)
	}
	if ev.ScheduleID != finish.NotifyScheduleID("s1") || ev.PolicyID != "" || ev.Target.URL != "http://127.0.0.1:9/n" {
		t.Fatalf("notification event %+v", ev)
	}
	for _, id := range []string{model.NotificationFireID(first.ID, model.NotifyFinished), model.NotificationFireID(first.ID, model.NotifySkipped)} {
		if _, err := r.st.EventGetByID(ctx, model.EventID(id, 0)); err == nil {
			t.Errorf("%s written for a fire that has not finished", id)
		}
	}
	fs, err := r.st.FireListWatched(ctx, "", 10)
	if err != nil || len(fs) != 1 || fs[0].ID != first.ID {
		t.Fatalf("watched fires after the sweep: %v (%v), want only %s", fs, err, first.ID)
	}
}

// TestTenantReceivers: a tenant's receivers are sent every fire of its
// schedules, after the schedule's own; the tenant's other schedules'
// fires are watched once a sweep has read the tenant.
func TestTenantReceivers(t *testing.T) {
	r := newRig(t)
	r.deliver(t)
	ctx := context.Background()
	if err := r.st.TenantCreate(ctx, &model.Tenant{ID: "t1", Name: "acme", CreatedAt: time.Now(),
		Notify: []model.Notify{{URL: "http://127.0.0.1:9/tenant", On: []model.NotifyKind{model.NotifyFinished}}}}); err != nil {
		t.Fatal(err)
	}
	s := newSchedule("s1", target(t, nil), 2)
	s.Notify = []model.Notify{{URL: "http://127.0.0.1:9/own", On: []model.NotifyKind{model.NotifyFinished}}}
	plain := newSchedule("s2", target(t, nil), 1)
	create(t, r.st, s)
	create(t, r.st, plain)
	sweep(t, r.fin)
	if !r.fin.Watched(plain) {
		t.Fatal("a schedule of a tenant with receivers is not watched")
	}
	now := time.Now().UTC().Truncate(time.Second)
	f1, err := r.em.Trigger(ctx, s, now)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := r.em.Trigger(ctx, plain, now)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both fires finished", func() bool { return finished(t, r.st, f1.ID, 2) && finished(t, r.st, f2.ID, 1) })
	sweep(t, r.fin)
	for _, want := range []struct {
		fire  string
		i, of int
		url   string
	}{{f1.ID, 0, 2, "http://127.0.0.1:9/own"}, {f1.ID, 1, 2, "http://127.0.0.1:9/tenant"}, {f2.ID, 0, 1, "http://127.0.0.1:9/tenant"}} {
		ev, err := r.st.EventGetByID(ctx, model.EventID(model.NotificationFireID(want.fire, model.NotifyFinished), want.i))
		if err != nil {
			t.Fatalf("notification %d of %s: %v", want.i, want.fire, err)
		}
		if ev.Target.URL != want.url || ev.Count != want.of {
			t.Errorf("notification %d of %s: %+v", want.i, want.fire, ev)
		}
	}
}

// held is a fixed set of emitter partitions.
type held map[int]int64

func (h held) Held() map[int]int64 { return h }

// TestSweepOwnPartitions: with partitions, an instance acts only on the
// fires of the schedules in the partitions it holds.
func TestSweepOwnPartitions(t *testing.T) {
	r := newRig(t)
	s := newSchedule("s1", "http://127.0.0.1:9/never", 1)
	s.Overlap = model.OverlapSkip
	s.Notify = []model.Notify{{URL: "http://127.0.0.1:9/n", On: []model.NotifyKind{model.NotifySkipped}}}
	create(t, r.st, s)
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Second)
	if _, err := r.em.Trigger(ctx, s, base); err != nil {
		t.Fatal(err)
	}
	skipped, err := r.em.Trigger(ctx, s, base.Add(time.Second))
	if err != nil || skipped.Decision != model.FireSkippedOverlap {
		t.Fatalf("second fire %+v (%v), want skipped_overlap", skipped, err)
	}
	mine := model.PartitionOf("s1", 2)
	finisher := func(p int) *finish.Finisher {
		f, err := finish.New(finish.Config{Shards: shards, Partitions: 2}, finish.Deps{Store: r.st, Emitter: r.em, Partitions: held{p: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if st := sweep(t, finisher(1-mine)); st.Looked != 0 || st.Notified != 0 {
		t.Fatalf("the instance without the schedule's partition: %+v", st)
	}
	if st := sweep(t, finisher(mine)); st.Notified != 1 || st.Finished != 1 {
		t.Fatalf("the instance with the schedule's partition: %+v", st)
	}
}
