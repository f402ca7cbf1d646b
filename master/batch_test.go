package master_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// postBatch sends body to POST /v1/schedules/batch as c and decodes a 200.
func postBatch(t *testing.T, h *harness, c *client.ClientWithResponses, body string) client.ScheduleBatchResult {
	t.Helper()
	r, err := c.CreateSchedulesBatchWithBodyWithResponse(h.ctx, "application/json", strings.NewReader(body))
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	var out client.ScheduleBatchResult
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("batch answer %s: %v", r.Body, err)
	}
	return out
}

// itemProblem fails unless result i answered status with a problem naming field.
func itemProblem(t *testing.T, res client.ScheduleBatchResult, i, status int, field string) {
	t.Helper()
	got := res.Items[i]
	if got.Index != i || got.Status != status || got.Problem == nil || got.Schedule != nil {
		t.Fatalf("item %d: want a %d problem, got %+v", i, status, got)
	}
	if got.Problem.Status != status {
		t.Fatalf("item %d: problem status %d, want %d", i, got.Problem.Status, status)
	}
	if got.Problem.Errors != nil {
		for _, e := range *got.Problem.Errors {
			if e.Field == field && e.Reason != "" {
				return
			}
		}
	}
	t.Fatalf("item %d: problem does not name %q: %+v", i, field, got.Problem)
}

// itemCreated fails unless result i is a created schedule named name.
func itemCreated(t *testing.T, res client.ScheduleBatchResult, i int, name string) client.Schedule {
	t.Helper()
	got := res.Items[i]
	if got.Index != i || got.Status != http.StatusCreated || got.Schedule == nil || got.Problem != nil {
		t.Fatalf("item %d: want created, got %+v", i, got)
	}
	if got.Schedule.Name != name || got.Schedule.Id == "" {
		t.Fatalf("item %d: schedule %+v, want name %q", i, got.Schedule, name)
	}
	return *got.Schedule
}

// TestBatchCreateHTTPBatchTargets checks that batch items with http_batch
// targets are created as such and refused, naming target.url, without a URL
// or with a refused address.
func TestBatchCreateHTTPBatchTargets(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("batchtargets")
	items := []string{
		`{"name":"batched","cron":"0 3 * * *","target":{"type":"http_batch","url":"https://consumer.example.com/batch"}}`,
		`{"name":"nourl","cron":"0 3 * * *","target":{"type":"http_batch"}}`,
		`{"name":"ssrf","cron":"0 3 * * *","target":{"type":"http_batch","url":"http://169.254.169.254/"}}`,
	}
	res := postBatch(t, h, c, `{"items":[`+strings.Join(items, ",")+`]}`)
	if len(res.Items) != len(items) || res.Created != 1 {
		t.Fatalf("results: %+v, want 1 created of %d", res, len(items))
	}
	got := itemCreated(t, res, 0, "batched")
	if got.Target.Type != client.TargetTypeHttpBatch || got.Target.Url == nil || *got.Target.Url != "https://consumer.example.com/batch" {
		t.Fatalf("target %+v", got.Target)
	}
	itemProblem(t, res, 1, http.StatusUnprocessableEntity, "items[1].target.url")
	itemProblem(t, res, 2, http.StatusUnprocessableEntity, "items[2].target.url")
	r, err := c.GetScheduleWithResponse(h.ctx, got.Id)
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if r.JSON200.Target.Type != client.TargetTypeHttpBatch {
		t.Fatalf("stored target %+v", r.JSON200.Target)
	}
}

func TestBatchCreateMixedItems(t *testing.T) {
	h := newHarness(t)
	tenantID, c := h.tenant("batch")
	runAt := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	items := []string{
		`{"name":"once","runAt":"` + runAt + `","target":{"type":"http","url":"https://consumer.example.com/hook"}}`,
		`{"name":"badcron","cron":"61 * * * *","target":{"type":"http","url":"https://consumer.example.com/hook"}}`,
		`{"name":"nightly","cron":"0 3 * * *","timezone":"Europe/Berlin","target":{"type":"http","url":"https://consumer.example.com/hook"}}`,
		`{"cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"}}`,
		`{"name":"extra","cron":"0 3 * * *","bogus":1,"target":{"type":"http","url":"https://consumer.example.com/hook"}}`,
		`{"name":"ssrf","cron":"0 3 * * *","timezone":"Asia/Tokyo","target":{"type":"http","url":"http://169.254.169.254/latest/meta-data/"}}`,
		`{"name":"nopolicy","cron":"0 3 * * *","timezone":"Asia/Tokyo","policyId":"pol_missing","target":{"type":"http","url":"https://consumer.example.com/hook"}}`,
		`{"name":"both","cron":"0 3 * * *","runAt":"` + runAt + `","target":{"type":"http","url":"https://consumer.example.com/hook"}}`,
	}
	res := postBatch(t, h, c, `{"items":[`+strings.Join(items, ",")+`]}`)
	if len(res.Items) != len(items) || res.Created != 2 || res.Failed != len(items)-2 {
		t.Fatalf("results: %d items, %d created, %d failed; want %d, 2, %d", len(res.Items), res.Created, res.Failed, len(items), len(items)-2)
	}
	once := itemCreated(t, res, 0, "once")
	nightly := itemCreated(t, res, 2, "nightly")
	if once.RunAt == nil || once.RunAt.Format(time.RFC3339) != runAt {
		t.Fatalf("once: runAt %v, want %s", once.RunAt, runAt)
	}
	if nightly.Cron == nil || *nightly.Cron != "0 3 * * *" || nightly.Timezone != "Europe/Berlin" || nightly.Children == 0 {
		t.Fatalf("nightly: %+v", nightly)
	}
	itemProblem(t, res, 1, http.StatusUnprocessableEntity, "items[1].cron")
	itemProblem(t, res, 3, http.StatusBadRequest, "items[3].name")
	itemProblem(t, res, 4, http.StatusBadRequest, "items[4].bogus")
	itemProblem(t, res, 5, http.StatusUnprocessableEntity, "items[5].target.url")
	itemProblem(t, res, 6, http.StatusUnprocessableEntity, "items[6].policyId")
	itemProblem(t, res, 7, http.StatusUnprocessableEntity, "items[7].cron")

	// Exactly the valid items are stored, readable as single schedules,
	// and were handed to the emitter once each.
	stored, err := h.st.ScheduleList(h.ctx, &storeListParams{TenantID: tenantID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range stored {
		names[m.Name] = true
	}
	if len(stored) != 2 || !names["once"] || !names["nightly"] {
		t.Fatalf("stored %d schedules %v, want once and nightly", len(stored), names)
	}
	for _, s := range []client.Schedule{once, nightly} {
		g, err := c.GetScheduleWithResponse(h.ctx, s.Id)
		mustStatus(t, err, g.StatusCode(), g.Body, http.StatusOK)
		if g.JSON200.Name != s.Name || g.JSON200.Version != 1 || g.JSON200.State != client.ScheduleStateActive {
			t.Fatalf("get %s: %+v", s.Id, g.JSON200)
		}
		if n := h.em.savedCount(s.Id); n != 1 {
			t.Fatalf("%s handed to the emitter %d times, want 1", s.Name, n)
		}
	}
	// Children only of the stored schedules (a one-off has one in UTC):
	// nothing of the failed items in Asia/Tokyo.
	tzs, err := h.st.ChildTimezones(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(tzs)
	if !slices.Equal(tzs, []string{"Europe/Berlin", "UTC"}) {
		t.Fatalf("children timezones %v, want Europe/Berlin and UTC", tzs)
	}
}

func TestBatchCreateIdempotentRetry(t *testing.T) {
	h := newHarness(t)
	tenantID, c := h.tenant("retry")
	count := func(t *testing.T) int {
		t.Helper()
		l, err := h.st.ScheduleList(h.ctx, &storeListParams{TenantID: tenantID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	item := func(key, name string) string {
		k := ""
		if key != "" {
			k = `"idempotencyKey":"` + key + `",`
		}
		return `{` + k + `"name":"` + name + `","cron":"*/5 * * * *","target":{"type":"http","url":"https://consumer.example.com/hook"}}`
	}
	body := `{"items":[` + item("k1", "a") + `,` + item("k2", "b") + `,` + item("k3", "c") + `]}`

	first := postBatch(t, h, c, body)
	if first.Created != 3 {
		t.Fatalf("first: %+v", first)
	}
	second := postBatch(t, h, c, body)
	if second.Created != 3 || second.Failed != 0 {
		t.Fatalf("retry: %+v", second)
	}
	for i := range 3 {
		a, b := first.Items[i], second.Items[i]
		if b.Schedule == nil || a.Schedule.Id != b.Schedule.Id {
			t.Fatalf("item %d: retry answered %+v, first %s", i, b, a.Schedule.Id)
		}
		if b.Replayed == nil || !*b.Replayed || (a.Replayed != nil && *a.Replayed) {
			t.Fatalf("item %d: replayed first %v, retry %v", i, a.Replayed, b.Replayed)
		}
		if n := h.em.savedCount(a.Schedule.Id); n != 1 {
			t.Fatalf("item %d emitted on save %d times, want 1", i, n)
		}
	}
	if n := count(t); n != 3 {
		t.Fatalf("%d schedules after the retry, want 3", n)
	}

	t.Run("KeyReusedForAnotherItem", func(t *testing.T) {
		res := postBatch(t, h, c, `{"items":[`+item("k1", "changed")+`,`+item("k4", "d")+`]}`)
		itemProblem(t, res, 0, http.StatusUnprocessableEntity, "items[0].idempotencyKey")
		itemCreated(t, res, 1, "d")
		if n := count(t); n != 4 {
			t.Fatalf("%d schedules, want 4", n)
		}
	})
	t.Run("KeyRepeatedInOneBatch", func(t *testing.T) {
		res := postBatch(t, h, c, `{"items":[`+item("k5", "e")+`,`+item("k5", "e")+`]}`)
		itemCreated(t, res, 0, "e")
		itemProblem(t, res, 1, http.StatusUnprocessableEntity, "items[1].idempotencyKey")
		if n := count(t); n != 5 {
			t.Fatalf("%d schedules, want 5", n)
		}
	})
	t.Run("RetryAfterFailedEmission", func(t *testing.T) {
		// The first attempt stores its items and fails to emit: it answers
		// 503 and records nothing; the retry finishes the emission of the
		// same schedules and creates nothing twice.
		h.em.mu.Lock()
		h.em.failSaved = 1
		h.em.mu.Unlock()
		body := `{"items":[` + item("k6", "f") + `,` + item("", "g") + `]}`
		r, err := c.CreateSchedulesBatchWithBodyWithResponse(h.ctx, "application/json", strings.NewReader(body))
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusServiceUnavailable, "")
		if n := count(t); n != 7 {
			t.Fatalf("%d schedules after the failed attempt, want 7", n)
		}
		res := postBatch(t, h, c, `{"items":[`+item("k6", "f")+`]}`)
		s := itemCreated(t, res, 0, "f")
		if n := count(t); n != 7 {
			t.Fatalf("%d schedules after the retry, want 7", n)
		}
		if n := h.em.savedCount(s.Id); n != 2 {
			t.Fatalf("f handed to the emitter %d times, want 2 (failed, then the retry)", n)
		}
		again := postBatch(t, h, c, `{"items":[`+item("k6", "f")+`]}`)
		if again.Items[0].Schedule == nil || again.Items[0].Schedule.Id != s.Id || h.em.savedCount(s.Id) != 2 {
			t.Fatalf("a third attempt: %+v, emitted %d times", again.Items[0], h.em.savedCount(s.Id))
		}
	})
}

func TestBatchCreateEnvelope(t *testing.T) {
	h := newHarness(t, func(cfg *master.Config, _ *master.Deps) { cfg.MaxBatchItems = 3 })
	tenantID, c := h.tenant("envelope")
	item := `{"name":"x","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"}}`
	items := func(n int) string {
		var b bytes.Buffer
		b.WriteString(`{"items":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(item)
		}
		b.WriteString(`]}`)
		return b.String()
	}
	for _, tc := range []struct {
		name, ct, body string
		status         int
		field          string
	}{
		{"OverTheLimit", "application/json", items(4), http.StatusRequestEntityTooLarge, "items"},
		{"Empty", "application/json", items(0), http.StatusBadRequest, "items"},
		{"NoItems", "application/json", `{}`, http.StatusBadRequest, "items"},
		{"ItemsNotAnArray", "application/json", `{"items":{}}`, http.StatusBadRequest, "items"},
		{"UnknownTopLevelField", "application/json", `{"items":[` + item + `],"x":1}`, http.StatusBadRequest, "x"},
		{"NotJSON", "text/plain", items(1), http.StatusBadRequest, "Content-Type"},
		{"NoBody", "application/json", ``, http.StatusBadRequest, "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.CreateSchedulesBatchWithBodyWithResponse(h.ctx, tc.ct, strings.NewReader(tc.body))
			wantProblem(t, err, r.HTTPResponse, r.Body, tc.status, tc.field)
		})
	}
	l, err := h.st.ScheduleList(h.ctx, &storeListParams{TenantID: tenantID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 0 {
		t.Fatalf("%d schedules stored by refused batches", len(l))
	}
	res := postBatch(t, h, c, items(3))
	if res.Created != 3 {
		t.Fatalf("a batch at the limit: %+v", res)
	}
}

func TestBatchCreateDefaultLimit(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("limit")
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := range master.DefaultMaxBatchItems + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"n%d","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"}}`, i)
	}
	b.WriteString(`]}`)
	r, err := c.CreateSchedulesBatchWithBodyWithResponse(h.ctx, "application/json", strings.NewReader(b.String()))
	p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusRequestEntityTooLarge, "items")
	if !strings.Contains(reasonOf(p, "items"), "1000") {
		t.Fatalf("reason %q does not say the limit", reasonOf(p, "items"))
	}
}

// TestBatchItemsValidatedLikeSingleCreates sends bad bodies both to
// createSchedule and as the one item of a batch: the item answers the same
// status naming the same fields, under items[0].
func TestBatchItemsValidatedLikeSingleCreates(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("same")
	const target = `"target":{"type":"http","url":"https://consumer.example.com/hook"}`
	for _, tc := range []struct{ name, body string }{
		{"MissingName", `{"cron":"0 3 * * *",` + target + `}`},
		{"MissingTarget", `{"name":"x","cron":"0 3 * * *"}`},
		{"UnknownField", `{"name":"x","cron":"0 3 * * *","crn":"1",` + target + `}`},
		{"WrongType", `{"name":"x","cron":"0 3 * * *","eventCount":"two",` + target + `}`},
		{"BelowMinimum", `{"name":"x","cron":"0 3 * * *","eventCount":0,` + target + `}`},
		{"AboveMaximum", `{"name":"x","cron":"0 3 * * *","maxAttempts":101,` + target + `}`},
		{"BadEnum", `{"name":"x","cron":"0 3 * * *","overlap":"sometimes",` + target + `}`},
		{"BadTargetType", `{"name":"x","cron":"0 3 * * *","target":{"type":"ftp","url":"ftp://x"}}`},
		{"BadDate", `{"name":"x","runAt":"tomorrow",` + target + `}`},
		{"NullPayload", `{"name":"x","cron":"0 3 * * *","payload":null,` + target + `}`},
		{"EmptyName", `{"name":"","cron":"0 3 * * *",` + target + `}`},
		{"NotAnObject", `[1]`},
		{"BadCron", `{"name":"x","cron":"0 3 * *",` + target + `}`},
		{"UnknownTimezone", `{"name":"x","cron":"0 3 * * *","timezone":"Mars/Olympus",` + target + `}`},
		{"NoWhen", `{"name":"x",` + target + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			single, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if single.StatusCode() < 400 || single.StatusCode() >= 500 {
				t.Fatalf("single create answered %d: %s", single.StatusCode(), single.Body)
			}
			var p client.Problem
			if err := json.Unmarshal(single.Body, &p); err != nil || p.Errors == nil {
				t.Fatalf("single create problem %s: %v", single.Body, err)
			}
			res := postBatch(t, h, c, `{"items":[`+tc.body+`]}`)
			got := res.Items[0]
			if got.Status != single.StatusCode() || got.Problem == nil || got.Problem.Errors == nil {
				t.Fatalf("item answered %+v, single create %d %s", got, single.StatusCode(), single.Body)
			}
			var want, have []string
			for _, e := range *p.Errors {
				f := "items[0]"
				if e.Field != "body" {
					f += "." + e.Field
				}
				want = append(want, f+": "+e.Reason)
			}
			for _, e := range *got.Problem.Errors {
				have = append(have, e.Field+": "+e.Reason)
			}
			slices.Sort(want)
			slices.Sort(have)
			if !slices.Equal(want, have) {
				t.Fatalf("item names\n  %q\nsingle create names\n  %q", have, want)
			}
		})
	}
}

// A batch is held to the tenant's quotas item by item, in order: the items
// that fit are created, the rest are refused naming the quota.
func TestBatchQuotas(t *testing.T) {
	h := newHarness(t, func(c *master.Config, _ *master.Deps) {
		c.TenantQuotas.MaxSchedules = 3
	})
	_, c := h.tenant("acme")
	h.schedule(c, client.ScheduleCreate{Name: "first", Cron: ptr("0 3 * * *"), Target: httpTarget()})
	item := func(name string, events int) string {
		return fmt.Sprintf(`{"name":%q,"cron":"0 3 * * *","eventCount":%d,"target":{"type":"http","url":"https://consumer.example.com/hook"}}`, name, events)
	}
	res := postBatch(t, h, c, `{"items":[`+item("a", 1)+`,`+item("b", 1)+`,`+item("c", 1)+`]}`)
	itemCreated(t, res, 0, "a")
	itemCreated(t, res, 1, "b")
	itemProblem(t, res, 2, http.StatusUnprocessableEntity, "items[2].maxSchedules")
}

// policyGets counts PolicyGet calls.
type policyGets struct {
	*embedded.Store
	n atomic.Int64
}

func (p *policyGets) PolicyGet(ctx context.Context, tenantID, id string) (*model.Policy, error) {
	p.n.Add(1)
	return p.Store.PolicyGet(ctx, tenantID, id)
}

// TestBatchLooksUpEachPolicyOnce checks that a batch looks up each policy
// its items name once, and still answers every item that names an unknown
// policy with a problem naming its policyId.
func TestBatchLooksUpEachPolicyOnce(t *testing.T) {
	var st *policyGets
	h := newHarness(t, func(_ *master.Config, d *master.Deps) {
		st = &policyGets{Store: d.Store.(*embedded.Store)}
		d.Store = st
	})
	_, c := h.tenant("policies")
	pr, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "p", MaxInFlight: 5})
	if err != nil || pr.JSON201 == nil {
		t.Fatalf("create policy: %v %s", err, pr.Body)
	}
	item := func(name, policy string) string {
		return `{"name":"` + name + `","policyId":"` + policy + `","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://consumer.example.com/hook"}}`
	}
	st.n.Store(0)
	res := postBatch(t, h, c, `{"items":[`+item("a", pr.JSON201.Id)+`,`+item("b", "pol_unknown")+`,`+item("c", pr.JSON201.Id)+`,`+item("d", "pol_unknown")+`,`+item("e", pr.JSON201.Id)+`]}`)
	for _, i := range []int{0, 2, 4} {
		if s := itemCreated(t, res, i, string(rune('a'+i))); s.PolicyId == nil || *s.PolicyId != pr.JSON201.Id {
			t.Fatalf("item %d: policy %v", i, s.PolicyId)
		}
	}
	for _, i := range []int{1, 3} {
		itemProblem(t, res, i, http.StatusUnprocessableEntity, "items["+strconv.Itoa(i)+"].policyId")
	}
	if n := st.n.Load(); n != 2 {
		t.Fatalf("%d policy lookups for a batch naming 2 policies, want 2", n)
	}
}
