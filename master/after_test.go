package master_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/client"
)

// TestAfterRefusals: a dependency on an unknown schedule, another
// tenant's, the schedule itself, or one that closes a cycle is a 422
// naming after.scheduleId, on create and on update, and nothing is
// written; a dependency shows in the schedule and a clock member removes
// it.
func TestAfterRefusals(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	_, other := h.tenant("other")
	target := client.Target{Type: client.TargetTypeHttp, Url: ptr("https://consumer.example.com/hook")}
	mk := func(c *client.ClientWithResponses, name string, cron *string, after *client.After) *client.CreateScheduleResponse {
		t.Helper()
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: name, Cron: cron, After: after, Target: target})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	after := func(id string) *client.After { return &client.After{ScheduleId: id} }
	a := mk(c, "a", ptr("0 3 * * *"), nil)
	mustStatus(t, nil, a.StatusCode(), a.Body, http.StatusCreated)
	theirs := mk(other, "theirs", ptr("0 3 * * *"), nil)
	mustStatus(t, nil, theirs.StatusCode(), theirs.Body, http.StatusCreated)

	refused := func(r *client.CreateScheduleResponse, want string) {
		t.Helper()
		p := wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "after.scheduleId")
		if reason := reasonOf(p, "after.scheduleId"); !strings.Contains(reason, want) {
			t.Fatalf("reason %q, want it to say %q", reason, want)
		}
	}
	refused(mk(c, "x", nil, after("sch_nope")), "unknown schedule")
	refused(mk(c, "x", nil, after(theirs.JSON201.Id)), "unknown schedule")
	bad := mk(c, "x", nil, &client.After{ScheduleId: a.JSON201.Id, When: ptr(client.AfterWhen("later"))})
	wantProblem(t, nil, bad.HTTPResponse, bad.Body, http.StatusUnprocessableEntity, "after.when")
	both := mk(c, "x", ptr("0 3 * * *"), after(a.JSON201.Id))
	wantProblem(t, nil, both.HTTPResponse, both.Body, http.StatusUnprocessableEntity, "after")

	b := mk(c, "b", nil, after(a.JSON201.Id))
	mustStatus(t, nil, b.StatusCode(), b.Body, http.StatusCreated)
	if got := b.JSON201.After; got == nil || got.ScheduleId != a.JSON201.Id || got.When == nil || *got.When != client.AfterWhenFinished {
		t.Fatalf("after of the created schedule: %+v", got)
	}
	cc := mk(c, "c", nil, after(b.JSON201.Id))
	mustStatus(t, nil, cc.StatusCode(), cc.Body, http.StatusCreated)

	update := func(id string, u client.ScheduleUpdate) *client.UpdateScheduleResponse {
		t.Helper()
		r, err := c.UpdateScheduleWithResponse(h.ctx, id, u)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// a after c closes a -> c -> b -> a.
	r := update(a.JSON201.Id, client.ScheduleUpdate{After: after(cc.JSON201.Id)})
	p := wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "after.scheduleId")
	if reason := reasonOf(p, "after.scheduleId"); !strings.Contains(reason, "makes a cycle: "+a.JSON201.Id+" -> "+cc.JSON201.Id+" -> "+b.JSON201.Id+" -> "+a.JSON201.Id) {
		t.Fatalf("cycle reason %q", reason)
	}
	r = update(b.JSON201.Id, client.ScheduleUpdate{After: after(b.JSON201.Id)})
	p = wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "after.scheduleId")
	if reason := reasonOf(p, "after.scheduleId"); reason != "names the schedule itself" {
		t.Fatalf("self reason %q", reason)
	}
	got, err := c.GetScheduleWithResponse(h.ctx, a.JSON201.Id)
	mustStatus(t, err, got.StatusCode(), got.Body, http.StatusOK)
	if got.JSON200.After != nil || got.JSON200.Version != 1 {
		t.Fatalf("a refused update changed the schedule: %+v", got.JSON200)
	}
	// A clock member removes the dependency.
	r = update(b.JSON201.Id, client.ScheduleUpdate{Cron: ptr("0 4 * * *")})
	mustStatus(t, nil, r.StatusCode(), r.Body, http.StatusOK)
	if r.JSON200.After != nil {
		t.Fatalf("after kept past a cron: %+v", r.JSON200.After)
	}
}

// TestNotifyRefusals: a receiver with a bad or refused address, or an
// unknown kind, is a 422 naming its member; receivers show in the
// schedule and an empty list removes them.
func TestNotifyRefusals(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	mk := func(n client.Notify) *client.CreateScheduleResponse {
		t.Helper()
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "s", Cron: ptr("0 3 * * *"), Notify: &n,
			Target: client.Target{Type: client.TargetTypeHttp, Url: ptr("https://consumer.example.com/hook")}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	on := []client.NotifyKind{client.NotifyKindFireFinished}
	for _, tc := range []struct {
		n      client.NotifyEntry
		field  string
		reason string
	}{
		{client.NotifyEntry{Url: ptr("http://169.254.169.254/latest/"), On: on}, "notify[0].url", "refused address"},
		{client.NotifyEntry{Url: ptr("file:///etc/passwd"), On: on}, "notify[0].url", "must be an http or https URL"},
		{client.NotifyEntry{On: on}, "notify[0].url", "one of url and queueUrl is required"},
		{client.NotifyEntry{Url: ptr("https://ops.example.com/"), On: []client.NotifyKind{"fire.done"}}, "notify[0].on[0]", "must be one of"},
	} {
		r := mk(client.Notify{tc.n})
		p := wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, tc.field)
		if reason := reasonOf(p, tc.field); !strings.Contains(reason, tc.reason) {
			t.Errorf("%+v: reason %q, want %q", tc.n, reason, tc.reason)
		}
	}
	r := mk(client.Notify{{Url: ptr("https://ops.example.com/n"), On: on}})
	mustStatus(t, nil, r.StatusCode(), r.Body, http.StatusCreated)
	if n := r.JSON201.Notify; n == nil || len(*n) != 1 || *(*n)[0].Url != "https://ops.example.com/n" {
		t.Fatalf("notify of the created schedule: %+v", n)
	}
	u, err := c.UpdateScheduleWithResponse(h.ctx, r.JSON201.Id, client.ScheduleUpdate{Notify: &client.Notify{}})
	mustStatus(t, err, u.StatusCode(), u.Body, http.StatusOK)
	if u.JSON200.Notify != nil {
		t.Fatalf("notify kept after [] : %+v", u.JSON200.Notify)
	}
}

// TestTenantNotify: a tenant's receivers are set by a PATCH, checked as a
// schedule's (a refused address is a 422 naming notify[0].url, nothing
// written) and removed by an empty list.
func TestTenantNotify(t *testing.T) {
	h := newHarness(t)
	id, _ := h.tenant("acme")
	on := []client.NotifyKind{client.NotifyKindFireHasDead}
	r, err := h.admin.UpdateTenantWithResponse(h.ctx, id, client.TenantUpdate{Notify: &client.Notify{{Url: ptr("http://169.254.169.254/"), On: on}}})
	if err != nil {
		t.Fatal(err)
	}
	wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "notify[0].url")
	r, err = h.admin.UpdateTenantWithResponse(h.ctx, id, client.TenantUpdate{Notify: &client.Notify{{Url: ptr("https://ops.example.com/all"), On: on}}})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if n := r.JSON200.Notify; n == nil || len(*n) != 1 || *(*n)[0].Url != "https://ops.example.com/all" {
		t.Fatalf("tenant notify %+v", n)
	}
	r, err = h.admin.UpdateTenantWithResponse(h.ctx, id, client.TenantUpdate{Notify: &client.Notify{}})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if r.JSON200.Notify != nil {
		t.Fatalf("tenant notify kept after []: %+v", r.JSON200.Notify)
	}
}
