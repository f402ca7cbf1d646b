package master_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

func withKey(key string) client.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Idempotency-Key", key)
		return nil
	}
}

func TestIdempotency(t *testing.T) {
	h := newHarness(t)
	aID, a := h.tenant("a")
	bID, b := h.tenant("b")
	body := client.ScheduleCreate{Name: "idem", Cron: ptr("0 3 * * *"), Target: httpTarget()}

	countSchedules := func(t *testing.T, tenant string) int {
		t.Helper()
		l, err := h.st.ScheduleList(h.ctx, &storeListParams{TenantID: tenant, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}

	t.Run("RetryReturnsFirstResult", func(t *testing.T) {
		params := &client.CreateScheduleParams{IdempotencyKey: ptr("create-1")}
		first, err := a.CreateScheduleWithResponse(h.ctx, params, body)
		mustStatus(t, err, first.StatusCode(), first.Body, http.StatusCreated)
		second, err := a.CreateScheduleWithResponse(h.ctx, params, body)
		mustStatus(t, err, second.StatusCode(), second.Body, http.StatusCreated)
		if string(first.Body) != string(second.Body) {
			t.Fatalf("replay differs:\n%s\n%s", first.Body, second.Body)
		}
		if second.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("replay not marked")
		}
		if n := countSchedules(t, aID); n != 1 {
			t.Fatalf("%d schedules, want 1", n)
		}
	})
	t.Run("SameKeyOtherBodyIs422", func(t *testing.T) {
		other := body
		other.Name = "different"
		r, err := a.CreateScheduleWithResponse(h.ctx, &client.CreateScheduleParams{IdempotencyKey: ptr("create-1")}, other)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "Idempotency-Key")
		if n := countSchedules(t, aID); n != 1 {
			t.Fatalf("%d schedules, want 1", n)
		}
	})
	t.Run("KeysAreScopedPerTenant", func(t *testing.T) {
		r, err := b.CreateScheduleWithResponse(h.ctx, &client.CreateScheduleParams{IdempotencyKey: ptr("create-1")}, body)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
		if n := countSchedules(t, bID); n != 1 {
			t.Fatalf("B has %d schedules, want 1", n)
		}
	})
	t.Run("ConcurrentRetriesMakeOneSchedule", func(t *testing.T) {
		const n = 12
		ids := make([]string, n)
		codes := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := a.CreateScheduleWithResponse(h.ctx, &client.CreateScheduleParams{IdempotencyKey: ptr("concurrent")}, body)
				if err != nil {
					return
				}
				codes[i] = r.StatusCode()
				if r.JSON201 != nil {
					ids[i] = r.JSON201.Id
				}
			}()
		}
		wg.Wait()
		for i := range n {
			if codes[i] != http.StatusCreated || ids[i] != ids[0] {
				t.Fatalf("request %d: status %d id %q (first id %q)", i, codes[i], ids[i], ids[0])
			}
		}
		if c := countSchedules(t, aID); c != 2 {
			t.Fatalf("%d schedules, want 2", c)
		}
	})
	t.Run("RejectedCreateIsNotRecorded", func(t *testing.T) {
		bad := body
		bad.Timezone = ptr("Nowhere/City")
		params := &client.CreateScheduleParams{IdempotencyKey: ptr("fix-me")}
		r, err := a.CreateScheduleWithResponse(h.ctx, params, bad)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "timezone")
		ok, err := a.CreateScheduleWithResponse(h.ctx, &client.CreateScheduleParams{IdempotencyKey: ptr("fix-me-2")}, body)
		mustStatus(t, err, ok.StatusCode(), ok.Body, http.StatusCreated)
	})
	t.Run("RecoversObjectWithoutRecord", func(t *testing.T) {
		// The first attempt stored the schedule and crashed before its
		// idempotency record: the retry answers with the stored schedule.
		params := &client.CreateScheduleParams{IdempotencyKey: ptr("crashed")}
		first, err := a.CreateScheduleWithResponse(h.ctx, params, body)
		mustStatus(t, err, first.StatusCode(), first.Body, http.StatusCreated)
		if _, err := h.st.IdempotencyDeleteBefore(h.ctx, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		h2 := newHarnessOnStore(t, h, 100*time.Millisecond)
		r, err := h2.clientLike(a).CreateScheduleWithResponse(h.ctx, params, body)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
		if r.JSON201.Id != first.JSON201.Id {
			t.Fatalf("recovered %s, want %s", r.JSON201.Id, first.JSON201.Id)
		}
	})
	t.Run("FailedEmissionIsFinishedByTheRetry", func(t *testing.T) {
		// The schedule was stored, emitting its fires failed: the create
		// answers 503 (not 201: nothing else would emit a fire the
		// emitter's passes scanned past) and its retry emits them.
		oneOff := client.ScheduleCreate{Name: "soon", RunAt: ptr(time.Now().Add(time.Minute).UTC()), EventCount: ptr(3),
			Target: client.Target{Type: client.TargetTypeHttp, Url: ptr("http://127.0.0.1:9/")}}
		params := &client.CreateScheduleParams{IdempotencyKey: ptr("emit-fails")}
		h.em.mu.Lock()
		h.em.failSaved = 1
		h.em.mu.Unlock()
		r, err := a.CreateScheduleWithResponse(h.ctx, params, oneOff)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusServiceUnavailable, "")
		again, err := a.CreateScheduleWithResponse(h.ctx, params, oneOff)
		mustStatus(t, err, again.StatusCode(), again.Body, http.StatusCreated)
		id := again.JSON201.Id
		if n := h.em.savedCount(id); n != 2 {
			t.Fatalf("Saved called %d times for %s, want 2 (failed, then the retry)", n, id)
		}
		evs, err := h.st.EventList(h.ctx, &store.EventListParams{TenantID: aID, ScheduleID: id, Limit: 10})
		if err != nil || len(evs) != 3 {
			t.Fatalf("%d events of the retried create (err %v), want 3", len(evs), err)
		}
	})
	t.Run("Policies", func(t *testing.T) {
		params := &client.CreatePolicyParams{IdempotencyKey: ptr("pol-1")}
		p1, err := a.CreatePolicyWithResponse(h.ctx, params, client.PolicyCreate{Name: "p", MaxInFlight: 3})
		mustStatus(t, err, p1.StatusCode(), p1.Body, http.StatusCreated)
		p2, err := a.CreatePolicyWithResponse(h.ctx, params, client.PolicyCreate{Name: "p", MaxInFlight: 3})
		mustStatus(t, err, p2.StatusCode(), p2.Body, http.StatusCreated)
		if p1.JSON201.Id != p2.JSON201.Id {
			t.Fatal("two policies")
		}
		l, _ := h.st.PolicyList(h.ctx, aID)
		if len(l) != 1 {
			t.Fatalf("%d policies", len(l))
		}
	})
	t.Run("TenantsAndKeys", func(t *testing.T) {
		tp := &client.CreateTenantParams{IdempotencyKey: ptr("tenant-1")}
		t1, err := h.admin.CreateTenantWithResponse(h.ctx, tp, client.TenantCreate{Name: "c"})
		mustStatus(t, err, t1.StatusCode(), t1.Body, http.StatusCreated)
		t2, err := h.admin.CreateTenantWithResponse(h.ctx, tp, client.TenantCreate{Name: "c"})
		mustStatus(t, err, t2.StatusCode(), t2.Body, http.StatusCreated)
		if t1.JSON201.Id != t2.JSON201.Id {
			t.Fatal("two tenants")
		}
		k1, err := h.admin.CreateAPIKeyWithResponse(h.ctx, t1.JSON201.Id, nil, withKey("key-1"))
		mustStatus(t, err, k1.StatusCode(), k1.Body, http.StatusCreated)
		k2, err := h.admin.CreateAPIKeyWithResponse(h.ctx, t1.JSON201.Id, &client.CreateAPIKeyParams{IdempotencyKey: ptr("key-1")})
		mustStatus(t, err, k2.StatusCode(), k2.Body, http.StatusCreated)
		if k1.JSON201.Key != k2.JSON201.Key || k1.JSON201.Id != k2.JSON201.Id {
			t.Fatal("retried key creation made another key")
		}
		keys, _ := h.st.APIKeyList(h.ctx, t1.JSON201.Id)
		if len(keys) != 1 {
			t.Fatalf("%d keys", len(keys))
		}
		// The same key for another tenant's key creation is a different request.
		other, err := h.admin.CreateAPIKeyWithResponse(h.ctx, aID, &client.CreateAPIKeyParams{IdempotencyKey: ptr("key-1")})
		wantProblem(t, err, other.HTTPResponse, other.Body, http.StatusUnprocessableEntity, "Idempotency-Key")
	})
}

// newHarnessOnStore starts a second master on h's store (as after a restart)
// with a short idempotency wait.
func newHarnessOnStore(t *testing.T, h *harness, wait time.Duration) *harness {
	t.Helper()
	h2 := &harness{t: t, st: h.st, em: h.em, ctx: h.ctx}
	srv, err := newServer(h.st, h.em, wait)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, srv)
	h2.url = ts
	return h2
}

// clientLike returns a client of h2 with the same key as c.
func (h *harness) clientLike(c *client.ClientWithResponses) *client.ClientWithResponses {
	h.t.Helper()
	cc, err := client.NewClientWithResponses(h.url, client.WithRequestEditorFn(func(ctx context.Context, r *http.Request) error {
		// Reuse c's editors by issuing through its underlying client options.
		for _, fn := range c.ClientInterface.(*client.Client).RequestEditors {
			if err := fn(ctx, r); err != nil {
				return err
			}
		}
		return nil
	}))
	if err != nil {
		h.t.Fatal(err)
	}
	return cc
}

var _ = fmt.Sprint
var _ = model.ErrNotFound

func TestIdempotencyRecordsHoldNoClearKey(t *testing.T) {
	secret := []byte("signing-secret-for-tests")
	withSecret := func(s []byte) harnessOption {
		return func(c *master.Config, _ *master.Deps) { c.IdempotencySecret = s }
	}
	h := newHarness(t, withSecret(secret))
	tr, err := h.admin.CreateTenantWithResponse(h.ctx, nil, client.TenantCreate{Name: "sealed"})
	mustStatus(t, err, tr.StatusCode(), tr.Body, http.StatusCreated)
	tid := tr.JSON201.Id
	params := &client.CreateAPIKeyParams{IdempotencyKey: ptr("sealed-key")}
	k1, err := h.admin.CreateAPIKeyWithResponse(h.ctx, tid, params)
	mustStatus(t, err, k1.StatusCode(), k1.Body, http.StatusCreated)
	clearKey := k1.JSON201.Key

	// The record as the store holds it.
	rec, err := h.st.IdempotencyGet(h.ctx, "admin", "sealed-key")
	if err != nil {
		t.Fatalf("IdempotencyGet: %v", err)
	}
	secretPart := strings.TrimPrefix(clearKey, k1.JSON201.Prefix)
	if len(secretPart) < 16 || bytes.Contains(rec.Body, []byte(secretPart)) || bytes.Contains(rec.Body, []byte(k1.JSON201.Id)) {
		t.Fatalf("stored idempotency record holds the answer in clear: %q", rec.Body)
	}
	if json.Valid(rec.Body) {
		t.Fatalf("stored idempotency record body is JSON: %q", rec.Body)
	}

	// Another instance with the same secret replays the same key.
	same := &harness{t: t, st: h.st, em: h.em, ctx: h.ctx}
	same.srv, err = master.New(master.Config{AdminKey: testAdminKey, Partitions: 4, IdempotencySecret: secret},
		master.Deps{Store: h.st, Emitter: h.em, Tokens: countingTokens{st: h.st, n: new(atomic.Int64)}})
	if err != nil {
		t.Fatal(err)
	}
	same.url = startServer(t, same.srv)
	k2, err := same.client(testAdminKey).CreateAPIKeyWithResponse(h.ctx, tid, params)
	mustStatus(t, err, k2.StatusCode(), k2.Body, http.StatusCreated)
	if k2.JSON201.Key != clearKey || k2.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay on another instance: key %q replayed %q, want %q replayed", k2.JSON201.Key, k2.HTTPResponse.Header.Get("Idempotent-Replayed"), clearKey)
	}

	// One whose secret was rotated, the old one kept as previous, replays it.
	rotated := &harness{t: t, st: h.st, em: h.em, ctx: h.ctx}
	rotated.srv, err = master.New(master.Config{AdminKey: testAdminKey, Partitions: 4,
		IdempotencySecret: []byte("rotated-in-secret"), PreviousIdempotencySecrets: [][]byte{secret}},
		master.Deps{Store: h.st, Emitter: h.em, Tokens: countingTokens{st: h.st, n: new(atomic.Int64)}})
	if err != nil {
		t.Fatal(err)
	}
	rotated.url = startServer(t, rotated.srv)
	k4, err := rotated.client(testAdminKey).CreateAPIKeyWithResponse(h.ctx, tid, params)
	mustStatus(t, err, k4.StatusCode(), k4.Body, http.StatusCreated)
	if k4.JSON201.Key != clearKey || k4.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after rotation: key %q replayed %q, want %q replayed", k4.JSON201.Key, k4.HTTPResponse.Header.Get("Idempotent-Replayed"), clearKey)
	}

	// One with another secret cannot open it: a 409, and no second key.
	other := &harness{t: t, st: h.st, em: h.em, ctx: h.ctx}
	other.srv, err = master.New(master.Config{AdminKey: testAdminKey, Partitions: 4, IdempotencySecret: []byte("another-secret")},
		master.Deps{Store: h.st, Emitter: h.em, Tokens: countingTokens{st: h.st, n: new(atomic.Int64)}})
	if err != nil {
		t.Fatal(err)
	}
	other.url = startServer(t, other.srv)
	k3, err := other.client(testAdminKey).CreateAPIKeyWithResponse(h.ctx, tid, params)
	wantProblem(t, err, k3.HTTPResponse, k3.Body, http.StatusConflict, "")
	if bytes.Contains(k3.Body, []byte(secretPart)) {
		t.Fatalf("409 shows the key: %s", k3.Body)
	}
	if keys, _ := h.st.APIKeyList(h.ctx, tid); len(keys) != 1 {
		t.Fatalf("%d keys, want 1", len(keys))
	}
}

func TestIdempotencyReplaysRecordsStoredInClear(t *testing.T) {
	// Records written before bodies were sealed are replayed as they are.
	h := newHarness(t)
	tid, a := h.tenant("legacy")
	p := h.policy(a, "p", 2)
	body, _ := json.Marshal(p)
	params := &client.CreatePolicyParams{IdempotencyKey: ptr("legacy-1")}
	create := client.PolicyCreate{Name: "p", MaxInFlight: 2}
	// The hash of the request the same way the master computes it.
	raw, _ := json.Marshal(create)
	sum := sha256.Sum256([]byte("POST /v1/policies\n" + string(raw)))
	if _, err := h.st.IdempotencyPut(h.ctx, &model.IdempotencyRecord{TenantID: tid, Key: "legacy-1",
		RequestHash: hex.EncodeToString(sum[:]), Status: http.StatusCreated, Body: body, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	r, err := a.CreatePolicyWithResponse(h.ctx, params, create)
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
	if r.JSON201.Id != p.Id || r.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("clear record replayed as %s (replayed %q), want policy %s", r.Body, r.HTTPResponse.Header.Get("Idempotent-Replayed"), p.Id)
	}
}
