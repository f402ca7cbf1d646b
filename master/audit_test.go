package master_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
)

// A schedule created, renamed and paused has three versions, newest
// first, each with who stored it; the audit list has a record per call
// with the diff of the rename, and no key in any record.
func TestAuditAndVersions(t *testing.T) {
	h := newHarness(t)
	tenant, c := h.tenant("acme")
	_, other := h.tenant("other")
	sch := h.cronSchedule(c, "nightly")
	ur, err := c.UpdateScheduleWithResponse(h.ctx, sch.Id, client.ScheduleUpdate{Name: ptr("nightly-report")},
		func(_ context.Context, r *http.Request) error {
			r.Header.Set("X-Request-Id", "req-rename-1")
			return nil
		})
	mustStatus(t, err, ur.StatusCode(), ur.Body, http.StatusOK)
	pr, err := c.PauseScheduleWithResponse(h.ctx, sch.Id, client.PauseRequest{Note: ptr("maintenance")})
	mustStatus(t, err, pr.StatusCode(), pr.Body, http.StatusOK)
	// A trigger names the version it fired, and does not store one.
	tr, err := c.TriggerScheduleWithResponse(h.ctx, sch.Id, client.TriggerRequest{})
	mustStatus(t, err, tr.StatusCode(), tr.Body, http.StatusAccepted)

	vr, err := c.ListScheduleVersionsWithResponse(h.ctx, sch.Id, nil)
	mustStatus(t, err, vr.StatusCode(), vr.Body, http.StatusOK)
	vs := vr.JSON200.Items
	if len(vs) != 3 {
		t.Fatalf("versions %s, want 3", vr.Body)
	}
	for i, want := range []struct {
		version int64
		name    string
		state   client.ScheduleState
		action  string
	}{{3, "nightly-report", client.ScheduleStatePaused, "pauseSchedule"}, {2, "nightly-report", client.ScheduleStateActive, "updateSchedule"}, {1, "nightly", client.ScheduleStateActive, "createSchedule"}} {
		v := vs[i]
		if v.Version != want.version || v.Schedule.Name != want.name || v.Schedule.State != want.state || v.Action == nil || *v.Action != want.action {
			t.Fatalf("versions[%d] = version %d %q %s action %v, want %+v", i, v.Version, v.Schedule.Name, v.Schedule.State, v.Action, want)
		}
		if v.Current != (i == 0) || v.KeyPrefix == nil || !strings.HasPrefix(*v.KeyPrefix, "sk_") {
			t.Fatalf("versions[%d]: current %v key prefix %v", i, v.Current, v.KeyPrefix)
		}
	}
	// Paged one at a time, the same versions.
	var paged []int64
	params := &client.ListScheduleVersionsParams{Limit: ptr(1)}
	for {
		r, err := c.ListScheduleVersionsWithResponse(h.ctx, sch.Id, params)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		for _, v := range r.JSON200.Items {
			paged = append(paged, v.Version)
		}
		if r.JSON200.NextCursor == nil {
			break
		}
		params.Cursor = r.JSON200.NextCursor
	}
	if len(paged) != 3 || paged[0] != 3 || paged[2] != 1 {
		t.Fatalf("paged versions %v", paged)
	}

	ar, err := c.ListAuditWithResponse(h.ctx, &client.ListAuditParams{ObjectId: &sch.Id})
	mustStatus(t, err, ar.StatusCode(), ar.Body, http.StatusOK)
	recs := ar.JSON200.Items
	if len(recs) != 4 || recs[1].Action != "updateSchedule" || recs[1].TenantId != tenant || recs[3].Action != "triggerSchedule" ||
		*recs[3].Version != 3 || recs[2].Note == nil || *recs[2].Note != "maintenance" {
		t.Fatalf("audit of the schedule: %s", ar.Body)
	}
	diff := *recs[1].Diff
	if len(diff) != 1 || diff["name"].Before != "nightly" || diff["name"].After != "nightly-report" {
		t.Fatalf("diff of the rename: %s", ar.Body)
	}
	if recs[1].RequestId == nil || *recs[1].RequestId != "req-rename-1" {
		t.Fatalf("request id of the rename: %s", ar.Body)
	}

	// Another tenant sees none of it; the admin sees every tenant's,
	// including the tenant and key creations, without the keys.
	or, err := other.ListAuditWithResponse(h.ctx, &client.ListAuditParams{ObjectId: &sch.Id})
	mustStatus(t, err, or.StatusCode(), or.Body, http.StatusOK)
	if len(or.JSON200.Items) != 0 {
		t.Fatalf("another tenant sees %s", or.Body)
	}
	adm, err := h.admin.ListAuditWithResponse(h.ctx, &client.ListAuditParams{TenantId: &tenant})
	mustStatus(t, err, adm.StatusCode(), adm.Body, http.StatusOK)
	var actions []string
	for _, r := range adm.JSON200.Items {
		actions = append(actions, r.Action)
	}
	// Ids order records by second; within one, by the key that made them.
	slices.Sort(actions)
	if got := strings.Join(actions, ","); got != "createAPIKey,createSchedule,createTenant,pauseSchedule,triggerSchedule,updateSchedule" {
		t.Fatalf("admin's audit of the tenant: %s", got)
	}
	if strings.Contains(string(adm.Body), `"hash"`) || strings.Contains(string(adm.Body), `"key":`) {
		t.Fatalf("a key or its hash in the audit: %s", adm.Body)
	}
}

// Reads and releases leave no record; a failed call leaves none either.
func TestAuditOnlySuccessfulChanges(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	pol := h.policy(c, "p", 5)
	before := auditCount(t, h, c)
	gr, err := c.GetPolicyWithResponse(h.ctx, pol.Id)
	mustStatus(t, err, gr.StatusCode(), gr.Body, http.StatusOK)
	bad, err := c.UpdatePolicyWithResponse(h.ctx, pol.Id, client.PolicyUpdate{MaxInFlight: ptr(0)})
	if err != nil || bad.StatusCode() < 400 {
		t.Fatalf("bad update answered %d", bad.StatusCode())
	}
	if n := auditCount(t, h, c); n != before {
		t.Fatalf("records %d after a read and a failed update, want %d", n, before)
	}
	ok, err := c.UpdatePolicyWithResponse(h.ctx, pol.Id, client.PolicyUpdate{MaxInFlight: ptr(7)})
	mustStatus(t, err, ok.StatusCode(), ok.Body, http.StatusOK)
	ar, err := c.ListAuditWithResponse(h.ctx, &client.ListAuditParams{ObjectId: &pol.Id})
	mustStatus(t, err, ar.StatusCode(), ar.Body, http.StatusOK)
	last := ar.JSON200.Items[len(ar.JSON200.Items)-1]
	if last.Action != "updatePolicy" || last.Version == nil || *last.Version != 2 || (*last.Diff)["maxInFlight"].After != float64(7) {
		t.Fatalf("record of the policy update: %s", ar.Body)
	}
}

func auditCount(t *testing.T, h *harness, c *client.ClientWithResponses) int {
	t.Helper()
	r, err := c.ListAuditWithResponse(h.ctx, &client.ListAuditParams{Limit: ptr(1000)})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	return len(r.JSON200.Items)
}

// A batch writes one record naming its count and id range.
func TestAuditBatchOneRecord(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	body := `{"items":[` + strings.Repeat(`{"name":"a","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"}},`, 4) +
		`{"name":"a","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"}}]}`
	r, err := c.CreateSchedulesBatchWithBodyWithResponse(h.ctx, echo.MIMEApplicationJSON, strings.NewReader(body))
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	ar, err := c.ListAuditWithResponse(h.ctx, nil)
	mustStatus(t, err, ar.StatusCode(), ar.Body, http.StatusOK)
	var batch []client.AuditRecord
	for _, rec := range ar.JSON200.Items {
		if rec.Action == "createSchedulesBatch" {
			batch = append(batch, rec)
		}
	}
	if len(batch) != 1 || batch[0].Note == nil || !strings.HasPrefix(*batch[0].Note, "created 5 schedules, ids sch_") {
		t.Fatalf("batch records: %s", ar.Body)
	}
}

func TestAuditBadInput(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	from := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	r, err := c.ListAuditWithResponse(h.ctx, &client.ListAuditParams{From: &from, To: ptr(from.Add(-time.Hour))})
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "to")
	r, err = c.ListAuditWithResponse(h.ctx, &client.ListAuditParams{TenantId: ptr("ten_x")})
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "tenantId")
	r, err = c.ListAuditWithResponse(h.ctx, &client.ListAuditParams{Cursor: ptr("nope")})
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "")
	vr, err := c.ListScheduleVersionsWithResponse(h.ctx, "sch_unknown", nil)
	wantProblem(t, err, vr.HTTPResponse, vr.Body, http.StatusNotFound, "")
}

var _ = master.Config{}
