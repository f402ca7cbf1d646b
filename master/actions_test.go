package master_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
)

// labelled creates a cron schedule with labels.
func (h *harness) labelled(c *client.ClientWithResponses, name string, labels map[string]string) client.Schedule {
	h.t.Helper()
	l := client.Labels(labels)
	return h.schedule(c, client.ScheduleCreate{Name: name, Cron: ptr("0 3 * * *"), EventCount: ptr(2), Target: httpTarget(), Labels: &l})
}

// act posts a bulk action and wants 200.
func (h *harness) act(c *client.ClientWithResponses, in client.ScheduleActionRequest) client.ScheduleActionResult {
	h.t.Helper()
	r, err := c.ScheduleActionsWithResponse(h.ctx, in)
	mustStatus(h.t, err, r.StatusCode(), r.Body, http.StatusOK)
	return *r.JSON200
}

// listIDs lists every schedule id with these label selectors (and state),
// in pages of limit.
func (h *harness) listIDs(c *client.ClientWithResponses, labels []string, state string, limit int) []string {
	h.t.Helper()
	ids := []string{}
	p := client.ListSchedulesParams{Limit: &limit}
	if len(labels) > 0 {
		p.Label = &labels
	}
	if state != "" {
		st := client.ScheduleState(state)
		p.State = &st
	}
	for {
		r, err := c.ListSchedulesWithResponse(h.ctx, &p)
		mustStatus(h.t, err, r.StatusCode(), r.Body, http.StatusOK)
		for _, s := range r.JSON200.Items {
			ids = append(ids, s.Id)
		}
		if r.JSON200.NextCursor == nil {
			return ids
		}
		p.Cursor = r.JSON200.NextCursor
	}
}

func sel(labels map[string]string) client.ScheduleSelector {
	return client.ScheduleSelector{Labels: &labels}
}

func TestScheduleActionsByLabel(t *testing.T) {
	h := newHarness(t)
	tenantA, a := h.tenant("a")
	tenantB, b := h.tenant("b")
	var billing, ops []string
	for i := range 3 {
		billing = append(billing, h.labelled(a, "bill-"+strconv.Itoa(i), map[string]string{"team": "billing", "tier": strconv.Itoa(i)}).Id)
	}
	for i := range 2 {
		ops = append(ops, h.labelled(a, "ops-"+strconv.Itoa(i), map[string]string{"team": "ops"}).Id)
	}
	other := h.labelled(b, "b-bill", map[string]string{"team": "billing"}).Id
	slices.Sort(billing)
	bySel := sel(map[string]string{"team": "billing"})

	// The list by label is the oracle's set, for either tenant.
	if got := h.listIDs(a, []string{"team=billing"}, "", 2); !slices.Equal(got, billing) {
		t.Fatalf("list label=team=billing = %v, want %v", got, billing)
	}
	if got := h.listIDs(a, []string{"team=billing", "tier=1"}, "", 100); len(got) != 1 {
		t.Fatalf("list team=billing AND tier=1 = %v, want one", got)
	}
	if got := h.listIDs(a, []string{"tier"}, "", 100); !slices.Equal(got, billing) {
		t.Fatalf("list label=tier (has the key) = %v, want %v", got, billing)
	}

	res := h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionPause, Selector: bySel, Note: ptr("billing freeze")})
	if res.Matched != 3 || res.Changed != 3 || res.More != nil || res.Failed != nil {
		t.Fatalf("pause by label = %+v, want 3 matched, 3 changed", res)
	}
	if got := h.listIDs(a, nil, "paused", 100); !slices.Equal(got, billing) {
		t.Fatalf("paused after the bulk pause = %v, want %v", got, billing)
	}
	if st := h.storedSchedule(tenantB, other).State; st != model.ScheduleActive {
		t.Fatalf("the other tenant's billing schedule is %s, want active", st)
	}
	// Idempotent: the same page again changes nothing.
	if res := h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionPause, Selector: bySel}); res.Matched != 3 || res.Changed != 0 {
		t.Fatalf("repeated pause = %+v, want 3 matched, 0 changed", res)
	}

	res = h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionResume, Selector: bySel})
	if res.Matched != 3 || res.Changed != 3 {
		t.Fatalf("resume by label = %+v", res)
	}
	if got := h.listIDs(a, nil, "paused", 100); len(got) != 0 {
		t.Fatalf("paused after the bulk resume: %v", got)
	}

	// ids and labels together: only the named schedules with the label.
	both := append(slices.Clone(billing), ops...)
	opsOnly := map[string]string{"team": "ops"}
	res = h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionPause, Selector: client.ScheduleSelector{Ids: &both, Labels: &opsOnly}})
	if res.Matched != 2 || res.Changed != 2 {
		t.Fatalf("pause by ids and label = %+v, want the 2 ops schedules", res)
	}
	if got := h.listIDs(a, nil, "paused", 100); !slices.Equal(got, ops) {
		t.Fatalf("paused = %v, want the ops schedules %v", got, ops)
	}
	h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionResume, Selector: client.ScheduleSelector{Ids: &ops}})

	before := h.em.triggerCount()
	res = h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionTrigger, Selector: bySel})
	if res.Matched != 3 || res.Changed != 3 || h.em.triggerCount()-before != 3 {
		t.Fatalf("trigger by label = %+v, %d triggers, want 3", res, h.em.triggerCount()-before)
	}

	res = h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionDelete, Selector: bySel})
	if res.Matched != 3 || res.Changed != 3 {
		t.Fatalf("delete by label = %+v", res)
	}
	if got := h.listIDs(a, nil, "", 100); !slices.Equal(got, ops) {
		t.Fatalf("left after the bulk delete: %v, want %v", got, ops)
	}
	for _, id := range billing {
		if _, err := h.st.ScheduleGet(h.ctx, tenantA, id); err == nil {
			t.Fatalf("schedule %s is still stored", id)
		}
	}
	// A repeated delete, by ids, selects nothing: no error.
	res = h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionDelete, Selector: client.ScheduleSelector{Ids: &billing}})
	if res.Matched != 0 || res.Changed != 0 {
		t.Fatalf("repeated delete by ids = %+v, want nothing matched", res)
	}
	if st := h.storedSchedule(tenantB, other).State; st != model.ScheduleActive {
		t.Fatalf("the other tenant's schedule is %s after A's bulk actions", st)
	}
}

func (r *recEmitter) triggerCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.triggers
}

func TestScheduleActionsPages(t *testing.T) {
	h := newHarness(t, func(c *master.Config, _ *master.Deps) { c.BulkPage = 2 })
	_, a := h.tenant("a")
	var want []string
	for i := range 5 {
		want = append(want, h.labelled(a, "s"+strconv.Itoa(i), map[string]string{"team": "billing"}).Id)
		h.labelled(a, "x"+strconv.Itoa(i), map[string]string{"team": "ops"})
	}
	slices.Sort(want)

	for _, bySel := range []client.ScheduleSelector{sel(map[string]string{"team": "billing"}), {Ids: &want}} {
		in := client.ScheduleActionRequest{Action: client.ScheduleActionPause, Selector: bySel}
		changed, pages := 0, 0
		for {
			res := h.act(a, in)
			pages++
			if res.Matched > 2 {
				t.Fatalf("page %d matched %d, more than the page size 2", pages, res.Matched)
			}
			// A page repeated changes nothing more.
			if again := h.act(a, in); again.Matched != res.Matched || again.Changed != 0 {
				t.Fatalf("page %d repeated = %+v after %+v", pages, again, res)
			}
			changed += res.Changed
			if res.More == nil {
				break
			}
			in.Cursor = res.NextCursor
		}
		if changed != 5 || pages != 3 {
			t.Fatalf("paused %d over %d pages, want 5 over 3", changed, pages)
		}
		if got := h.listIDs(a, nil, "paused", 100); !slices.Equal(got, want) {
			t.Fatalf("paused = %v, want %v", got, want)
		}
		res := h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionResume, Selector: bySel})
		if res.Changed != 2 {
			t.Fatalf("first resume page = %+v", res)
		}
		for res.More != nil {
			res = h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionResume, Selector: bySel, Cursor: res.NextCursor})
		}
	}
}

func TestScheduleActionsReportsFailedItem(t *testing.T) {
	h := newHarness(t)
	tenant, a := h.tenant("a")
	s1 := h.labelled(a, "one", map[string]string{"team": "billing"})
	s2 := h.labelled(a, "two", map[string]string{"team": "billing"})
	// s2 completed: a pause of it is a 409, as the single pause answers.
	m := h.storedSchedule(tenant, s2.Id)
	done := *m
	done.State, done.Version = model.ScheduleCompleted, m.Version+1
	if err := h.st.ScheduleUpdate(h.ctx, &done, m.Version, nil); err != nil {
		t.Fatalf("ScheduleUpdate: %v", err)
	}
	res := h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionPause, Selector: sel(map[string]string{"team": "billing"})})
	if res.Matched != 2 || res.Changed != 1 || res.Failed == nil || len(*res.Failed) != 1 {
		t.Fatalf("pause = %+v, want 2 matched, 1 changed, 1 failed", res)
	}
	if f := (*res.Failed)[0]; f.Id != s2.Id || f.Status != http.StatusConflict || f.Detail == "" {
		t.Fatalf("failed item = %+v, want %s with 409", f, s2.Id)
	}
	if got := h.storedSchedule(tenant, s2.Id); got.State != model.ScheduleCompleted || got.Version != done.Version {
		t.Fatalf("the failed item changed: %s version %d", got.State, got.Version)
	}
	if got := h.storedSchedule(tenant, s1.Id); got.State != model.SchedulePaused {
		t.Fatalf("the other item is %s, want paused", got.State)
	}
}

func TestScheduleActionsRefusesBadSelectors(t *testing.T) {
	h := newHarness(t)
	_, a := h.tenant("a")
	h.labelled(a, "one", map[string]string{"team": "billing"})
	tests := []struct {
		name   string
		body   string
		status int
		field  string
	}{
		{"NoSelectorCriteria", `{"action":"pause","selector":{}}`, 400, "selector"},
		{"EmptyIds", `{"action":"pause","selector":{"ids":[]}}`, 400, "selector"},
		{"EmptyLabels", `{"action":"delete","selector":{"labels":{}}}`, 400, "selector"},
		{"EmptyNamePrefix", `{"action":"delete","selector":{"namePrefix":""}}`, 400, "selector"},
		{"NoSelector", `{"action":"delete"}`, 400, "selector"},
		{"UnknownAction", `{"action":"archive","selector":{"namePrefix":"o"}}`, 400, "action"},
		{"UnknownPolicy", `{"action":"pause","selector":{"policyId":"pol_nope"}}`, 422, "selector.policyId"},
		{"BadLabelKey", `{"action":"pause","selector":{"labels":{"my team":"x"}}}`, 422, "selector.labels"},
		{"BadLabelValue", `{"action":"pause","selector":{"labels":{"team":"a b"}}}`, 422, "selector.labels.team"},
		{"NoteWithResume", `{"action":"resume","selector":{"namePrefix":"o"},"note":"x"}`, 422, "note"},
		{"UntilPast", `{"action":"pause","selector":{"namePrefix":"o"},"until":"2001-01-01T00:00:00Z"}`, 422, "until"},
		{"ForeignCursor", `{"action":"pause","selector":{"namePrefix":"o"},"cursor":"nope"}`, 400, "cursor"},
		{"OverAPageOfIDs", `{"action":"pause","selector":{"ids":["s` + strings.Repeat(`","s`, 1000) + `"]}}`, 400, "selector.ids"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := a.ScheduleActionsWithBodyWithResponse(h.ctx, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			wantProblem(t, err, r.HTTPResponse, r.Body, tc.status, tc.field)
		})
	}
	if st := h.listIDs(a, nil, "paused", 100); len(st) != 0 {
		t.Fatalf("a refused action paused %v", st)
	}
	// Ids of no schedule select nothing, and are no error.
	res := h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionPause, Selector: client.ScheduleSelector{Ids: &[]string{"sch_nope"}}})
	if res.Matched != 0 || res.Changed != 0 {
		t.Fatalf("unknown ids = %+v, want nothing matched", res)
	}
}

func TestScheduleLabels(t *testing.T) {
	h := newHarness(t)
	_, a := h.tenant("a")
	create := func(labels string) (*http.Response, []byte) {
		t.Helper()
		body := `{"name":"n","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"},"labels":` + labels + `}`
		r, err := a.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return r.HTTPResponse, r.Body
	}
	seventeen := make([]string, 17)
	for i := range seventeen {
		seventeen[i] = `"k` + strconv.Itoa(i) + `":"v"`
	}
	for _, tc := range []struct {
		name   string
		labels string
		field  string
	}{
		{"KeySpace", `{"my team":"x"}`, "labels"},
		{"KeyEmpty", `{"":"x"}`, "labels"},
		{"KeyTooLong", `{"` + strings.Repeat("k", 64) + `":"x"}`, "labels"},
		{"PrefixUpperCase", `{"Example.com/team":"x"}`, "labels"},
		{"ValueTooLong", `{"team":"` + strings.Repeat("v", 64) + `"}`, "labels.team"},
		{"ValueBadChar", `{"team":"a/b"}`, "labels.team"},
		{"SeventeenLabels", `{` + strings.Join(seventeen, ",") + `}`, "labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := create(tc.labels)
			wantProblem(t, nil, resp, body, http.StatusUnprocessableEntity, tc.field)
		})
	}
	if ids := h.listIDs(a, nil, "", 100); len(ids) != 0 {
		t.Fatalf("refused creates stored %v", ids)
	}

	s := h.labelled(a, "s", map[string]string{"team": "billing", "example.com/tier": ""})
	if s.Labels == nil || (*s.Labels)["example.com/tier"] != "" || (*s.Labels)["team"] != "billing" || len(*s.Labels) != 2 {
		t.Fatalf("created labels = %v", s.Labels)
	}
	// PATCH replaces the labels whole; absent keeps them; {} removes them.
	patch := func(body string) client.Schedule {
		t.Helper()
		r, err := a.UpdateScheduleWithBodyWithResponse(h.ctx, s.Id, "application/json", strings.NewReader(body))
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		return *r.JSON200
	}
	if got := patch(`{"labels":{"team":"ops"}}`); got.Labels == nil || len(*got.Labels) != 1 || (*got.Labels)["team"] != "ops" {
		t.Fatalf("labels after a PATCH = %v, want only team=ops", got.Labels)
	}
	if got := patch(`{"name":"renamed"}`); got.Labels == nil || (*got.Labels)["team"] != "ops" {
		t.Fatalf("labels after a PATCH without labels = %v", got.Labels)
	}
	r, err := a.UpdateScheduleWithBodyWithResponse(h.ctx, s.Id, "application/json", strings.NewReader(`{"labels":{"team":"a b"}}`))
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "labels.team")
	if got := patch(`{"labels":{}}`); got.Labels != nil {
		t.Fatalf("labels after PATCH {} = %v, want none", *got.Labels)
	}

	// A batch item carries labels too, and is checked alike.
	res := postBatch(t, h, a, `{"items":[
		{"name":"b1","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"},"labels":{"team":"batch"}},
		{"name":"b2","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"},"labels":{"team":"a b"}}]}`)
	itemProblem(t, res, 1, http.StatusUnprocessableEntity, "items[1].labels.team")
	if ids := h.listIDs(a, []string{"team=batch"}, "", 100); len(ids) != 1 || ids[0] != res.Items[0].Schedule.Id {
		t.Fatalf("list team=batch = %v, want the first batch item", ids)
	}

	// A bad selector in the list is a 422 naming label; 17 are a 400.
	lr, err := a.ListSchedulesWithResponse(h.ctx, &client.ListSchedulesParams{Label: &[]string{"a b=c"}})
	wantProblem(t, err, lr.HTTPResponse, lr.Body, http.StatusUnprocessableEntity, "label")
	lr, err = a.ListSchedulesWithResponse(h.ctx, &client.ListSchedulesParams{Label: &seventeen})
	wantProblem(t, err, lr.HTTPResponse, lr.Body, http.StatusBadRequest, "label")
}

func TestPolicyLabels(t *testing.T) {
	h := newHarness(t)
	_, a := h.tenant("a")
	l := map[string]string{"team": "billing"}
	r, err := a.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "p", MaxInFlight: 3, Labels: &l})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
	if r.JSON201.Labels == nil || (*r.JSON201.Labels)["team"] != "billing" {
		t.Fatalf("created policy labels = %v", r.JSON201.Labels)
	}
	id := r.JSON201.Id
	bad := map[string]string{"team": "-x"}
	ur, err := a.UpdatePolicyWithResponse(h.ctx, id, client.PolicyUpdate{Labels: &bad})
	wantProblem(t, err, ur.HTTPResponse, ur.Body, http.StatusUnprocessableEntity, "labels.team")
	ops := map[string]string{"team": "ops", "tier": "gold"}
	ur, err = a.UpdatePolicyWithResponse(h.ctx, id, client.PolicyUpdate{Labels: &ops})
	mustStatus(t, err, ur.StatusCode(), ur.Body, http.StatusOK)
	gr, err := a.GetPolicyWithResponse(h.ctx, id)
	mustStatus(t, err, gr.StatusCode(), gr.Body, http.StatusOK)
	if gr.JSON200.Labels == nil || len(*gr.JSON200.Labels) != 2 || (*gr.JSON200.Labels)["team"] != "ops" {
		t.Fatalf("policy labels after update = %v", gr.JSON200.Labels)
	}
	// Policies select schedules in bulk by policyId.
	h.schedule(a, client.ScheduleCreate{Name: "s", Cron: ptr("0 3 * * *"), PolicyId: &id, Target: httpTarget()})
	res := h.act(a, client.ScheduleActionRequest{Action: client.ScheduleActionPause, Selector: client.ScheduleSelector{PolicyId: &id}})
	if res.Matched != 1 || res.Changed != 1 {
		t.Fatalf("pause by policy = %+v", res)
	}
}
