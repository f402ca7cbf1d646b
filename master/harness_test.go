package master_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/throttle"
)

const testAdminKey = "admin-key-for-tests-0123456789"

// harness is a real master on 127.0.0.1 over a real embedded store.
type harness struct {
	t        *testing.T
	st       *embedded.Store
	srv      *master.Server
	url      string
	admin    *client.ClientWithResponses
	em       *recEmitter
	released atomic.Int64
	ctx      context.Context
}

type harnessOption func(*master.Config, *master.Deps)

// countingTokens releases and extends through the store and counts the
// releases that won, so that tests see the master used the Tokens it was
// given.
type countingTokens struct {
	st throttle.ReleaseStore
	n  *atomic.Int64
}

func (r countingTokens) Release(ctx context.Context, e *model.Event, now time.Time) (bool, error) {
	ok, err := throttle.Release(ctx, r.st, e, now)
	if ok {
		r.n.Add(1)
	}
	return ok, err
}

func (r countingTokens) Extend(ctx context.Context, e *model.Event, until, now time.Time) error {
	return throttle.Extend(ctx, r.st, e, until, now)
}

func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h := &harness{t: t, st: st, em: &recEmitter{st: st}, ctx: context.Background()}
	cfg := master.Config{AdminKey: testAdminKey, Partitions: 4}
	deps := master.Deps{
		Store:   st,
		Emitter: h.em,
		Tokens:  countingTokens{st: st, n: &h.released},
		Logger:  zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	h.srv, err = master.New(cfg, deps)
	if err != nil {
		t.Fatalf("master.New: %v", err)
	}
	ts := httptest.NewServer(h.srv.Handler()) // listens on 127.0.0.1
	t.Cleanup(ts.Close)
	h.url = ts.URL
	h.admin = h.client(testAdminKey)
	return h
}

// client returns a generated client that sends key (none if empty).
func (h *harness) client(key string) *client.ClientWithResponses {
	h.t.Helper()
	var opts []client.ClientOption
	if key != "" {
		opts = append(opts, client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
	}
	c, err := client.NewClientWithResponses(h.url, opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// tenant creates a tenant with one key through the admin API.
func (h *harness) tenant(name string) (string, *client.ClientWithResponses) {
	h.t.Helper()
	tr, err := h.admin.CreateTenantWithResponse(h.ctx, nil, client.TenantCreate{Name: name})
	mustStatus(h.t, err, tr.StatusCode(), tr.Body, http.StatusCreated)
	kr, err := h.admin.CreateAPIKeyWithResponse(h.ctx, tr.JSON201.Id, nil)
	mustStatus(h.t, err, kr.StatusCode(), kr.Body, http.StatusCreated)
	if !strings.HasPrefix(kr.JSON201.Key, "sk_") {
		h.t.Fatalf("key %q has no sk_ prefix", kr.JSON201.Key)
	}
	return tr.JSON201.Id, h.client(kr.JSON201.Key)
}

func (h *harness) policy(c *client.ClientWithResponses, name string, max int) client.Policy {
	h.t.Helper()
	r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: name, MaxInFlight: max})
	mustStatus(h.t, err, r.StatusCode(), r.Body, http.StatusCreated)
	return *r.JSON201
}

func httpTarget() client.Target {
	return client.Target{Type: client.TargetTypeHttp, Url: ptr("https://consumer.example.com/hook")}
}

func (h *harness) schedule(c *client.ClientWithResponses, body client.ScheduleCreate) client.Schedule {
	h.t.Helper()
	r, err := c.CreateScheduleWithResponse(h.ctx, nil, body)
	mustStatus(h.t, err, r.StatusCode(), r.Body, http.StatusCreated)
	return *r.JSON201
}

func (h *harness) cronSchedule(c *client.ClientWithResponses, name string) client.Schedule {
	h.t.Helper()
	return h.schedule(c, client.ScheduleCreate{Name: name, Cron: ptr("0 3 * * *"), Timezone: ptr("Europe/Berlin"), EventCount: ptr(3), Target: httpTarget()})
}

// storedSchedule reads a schedule straight from the store.
func (h *harness) storedSchedule(tenantID, id string) *model.Schedule {
	h.t.Helper()
	s, err := h.st.ScheduleGet(h.ctx, tenantID, id)
	if err != nil {
		h.t.Fatalf("ScheduleGet: %v", err)
	}
	return s
}

// insertEvent writes one event with the given status straight into the store.
func (h *harness) insertEvent(tenantID, scheduleID, policyID string, status model.EventStatus, opts ...func(*model.Event)) *model.Event {
	h.t.Helper()
	now := time.Now().UTC()
	id := "ev_" + newTestID()
	e := &model.Event{
		ID: id, TenantID: tenantID, ScheduleID: scheduleID, FireID: scheduleID + ".fire",
		FireTime: now, Count: 1, LaunchAt: now, PolicyID: policyID,
		Target:  model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hook"},
		Payload: json.RawMessage(`{"k":1}`), MaxAttempts: 3, Status: status,
		ReleaseToken: "rt_" + newTestID(), CreatedAt: now, UpdatedAt: now,
	}
	if status.HoldsToken() {
		exp := now.Add(15 * time.Minute)
		e.TokenExpiresAt = &exp
		e.DeliveredAt = &now
	}
	for _, o := range opts {
		o(e)
	}
	if _, err := h.st.EventInsertMany(h.ctx, []*model.Event{e}); err != nil {
		h.t.Fatalf("EventInsertMany: %v", err)
	}
	return e
}

var testIDs atomic.Int64

func newTestID() string {
	return strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "") + "x" + itoa(int(testIDs.Add(1)))
}

func itoa(n int) string { return strconv.Itoa(n) }

// recEmitter is a small Emitter for the tests: it records calls and writes a
// fire plus its pending events through the store, as the real one does.
type recEmitter struct {
	st *embedded.Store

	mu       sync.Mutex
	saved    []string
	keys     [][]cron.Key // given with each Saved call, in order
	triggers int
	// failSaved makes that many Saved calls fail as a store outage would.
	failSaved int
}

func (r *recEmitter) Saved(ctx context.Context, s *model.Schedule, keys []cron.Key) error {
	r.mu.Lock()
	r.saved = append(r.saved, s.ID)
	r.keys = append(r.keys, keys)
	fail := r.failSaved > 0
	if fail {
		r.failSaved--
	}
	r.mu.Unlock()
	if fail {
		return fmt.Errorf("emit: %w", model.ErrUnavailable)
	}
	if s.RunAt != nil {
		_, err := r.emit(ctx, s, *s.RunAt, model.FireEmitted)
		return err
	}
	return nil
}

// Resumed records a Saved call: the harness's emitter has no misfires.
func (r *recEmitter) Resumed(ctx context.Context, s *model.Schedule, keys []cron.Key, _ time.Time) error {
	return r.Saved(ctx, s, keys)
}

// PlanCreates plans nothing: done emits each stored schedule (new or
// recovered) through Saved.
func (r *recEmitter) PlanCreates(_ context.Context, ss []*model.Schedule, keys [][]cron.Key) ([][]store.FireNew, func(context.Context, []error, []*model.Schedule) error, error) {
	return make([][]store.FireNew, len(ss)), func(ctx context.Context, errs []error, recovered []*model.Schedule) error {
		for i, s := range ss {
			if recovered != nil && recovered[i] != nil {
				s = recovered[i]
			} else if errs[i] != nil {
				continue
			}
			if err := r.Saved(ctx, s, keys[i]); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

func (r *recEmitter) Trigger(ctx context.Context, s *model.Schedule, at time.Time) (*model.Fire, error) {
	r.mu.Lock()
	r.triggers++
	r.mu.Unlock()
	return r.emit(ctx, s, at, model.FireTriggered)
}

func (r *recEmitter) TriggerWith(ctx context.Context, s *model.Schedule, at time.Time, o emitter.TriggerOptions) (*model.Fire, error) {
	r.mu.Lock()
	r.triggers++
	r.mu.Unlock()
	cp := *s
	if o.EventCount > 0 {
		cp.EventCount = o.EventCount
	}
	if o.Payload != nil {
		cp.Payload = o.Payload
	}
	f, err := r.emit(ctx, &cp, at, model.FireTriggered)
	if err == nil && o.Note != "" {
		err = r.st.FireSetDecision(ctx, f.ID, model.FireTriggered, o.Note)
		f.Note = o.Note
	}
	return f, err
}

// Backfill records nothing: tests of backfill run the real emitter.
func (r *recEmitter) Backfill(_ context.Context, _ *model.Schedule, times []time.Time, o emitter.BackfillOptions) (emitter.BackfillStats, error) {
	if o.Admit != nil {
		if err := o.Admit(len(times)); err != nil {
			return emitter.BackfillStats{}, err
		}
	}
	return emitter.BackfillStats{Instants: len(times)}, nil
}

// keysGiven returns the keys of every Saved call for id, as text, in order.
func (r *recEmitter) keysGiven(id string) [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]string
	for i, s := range r.saved {
		if s != id {
			continue
		}
		var ks []string
		for _, k := range r.keys[i] {
			ks = append(ks, k.String())
		}
		slices.Sort(ks)
		out = append(out, ks)
	}
	return out
}

func (r *recEmitter) savedCount(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.saved {
		if s == id {
			n++
		}
	}
	return n
}

func (r *recEmitter) emit(ctx context.Context, s *model.Schedule, at time.Time, d model.FireDecision) (*model.Fire, error) {
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	f := &model.Fire{
		ID: model.FireID(s.ID, s.Version, at), ScheduleID: s.ID, TenantID: s.TenantID,
		FireTime: at.UTC(), LocalTime: at.In(loc).Format(time.RFC3339), Count: s.EventCount,
		Decision: d, CreatedAt: now,
	}
	if _, err := r.st.FireInsert(ctx, f); err != nil {
		return nil, err
	}
	events := make([]*model.Event, s.EventCount)
	for i := range events {
		id := model.EventID(f.ID, i)
		events[i] = &model.Event{
			ID: id, TenantID: s.TenantID, ScheduleID: s.ID, FireID: f.ID, FireTime: f.FireTime,
			Index: i, Count: s.EventCount, LaunchAt: at.UTC(), Priority: s.Priority, PolicyID: s.PolicyID,
			Target: s.Target, Payload: s.Payload, MaxAttempts: s.MaxAttempts, Status: model.EventPending,
			ReleaseToken: "rt_" + id, CreatedAt: now, UpdatedAt: now,
		}
	}
	if _, err := r.st.EventInsertMany(ctx, events); err != nil {
		return nil, err
	}
	return f, nil
}

// mustStatus fails unless the call succeeded with status want.
func mustStatus(t *testing.T, err error, got int, body []byte, want int) {
	t.Helper()
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	if got != want {
		t.Fatalf("status %d, want %d; body %s", got, want, body)
	}
}

// wantProblem checks a problem+json answer with status and, if field is not
// empty, an entry naming field; it returns the problem.
func wantProblem(t *testing.T, err error, resp *http.Response, body []byte, status int, field string) client.Problem {
	t.Helper()
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, body)
	}
	var p client.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body %s: %v", body, err)
	}
	if p.Status != status || p.Title == "" || p.Type == "" {
		t.Fatalf("incomplete problem %s", body)
	}
	if field != "" {
		found := false
		if p.Errors != nil {
			for _, e := range *p.Errors {
				if e.Field == field && e.Reason != "" {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("problem does not name field %q: %s", field, body)
		}
	}
	return p
}

// reasonOf returns the reason given for field.
func reasonOf(p client.Problem, field string) string {
	if p.Errors == nil {
		return ""
	}
	for _, e := range *p.Errors {
		if e.Field == field {
			return e.Reason
		}
	}
	return ""
}

func ptr[T any](v T) *T { return &v }

type ctxT = context.Context

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
