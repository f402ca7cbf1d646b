package master_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }

// stripInstance drops the instance member, which names the request path.
func stripInstance(body []byte) []byte {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	delete(m, "instance")
	b, _ := json.Marshal(m)
	return b
}

func TestScheduleValidation(t *testing.T) {
	h := newHarness(t, func(c *master.Config, _ *master.Deps) {
		c.MaxEventCount = 1000 // configurable limits
	})
	tid, c := h.tenant("acme")
	valid := func() client.ScheduleCreate {
		return client.ScheduleCreate{Name: "ok", Cron: ptr("0 3 * * *"), Target: httpTarget()}
	}
	cases := []struct {
		name   string
		mutate func(*client.ScheduleCreate)
		field  string
		reason string // substring of the reason, if set
	}{
		{"RejectsInvalidCron", func(s *client.ScheduleCreate) { s.Cron = ptr("0 24 * * *") }, "cron", "hour: 24"},
		{"RejectsCronWithTooFewFields", func(s *client.ScheduleCreate) { s.Cron = ptr("0 3 * *") }, "cron", ""},
		{"RejectsInvalidCronField", func(s *client.ScheduleCreate) {
			s.Cron = nil
			s.Fields = &client.CronFields{Minute: ptr("0"), Hour: ptr("25")}
		}, "fields.hour", "25"},
		{"RejectsUnknownTimezone", func(s *client.ScheduleCreate) { s.Timezone = ptr("Mars/Olympus_Mons") }, "timezone", "IANA"},
		{"RejectsUnknownPolicy", func(s *client.ScheduleCreate) { s.PolicyId = ptr("pol_doesnotexist") }, "policyId", "unknown policy"},
		{"RejectsEventCountOverLimit", func(s *client.ScheduleCreate) { s.EventCount = ptr(1001) }, "eventCount", "1000"},
		{"RejectsLongName", func(s *client.ScheduleCreate) { s.Name = strings.Repeat("n", 201) }, "name", "200"},
		{"RejectsPayloadOverLimit", func(s *client.ScheduleCreate) {
			s.Payload = ptr(json.RawMessage(`"` + strings.Repeat("x", 256<<10) + `"`))
		}, "payload", "262144"},
		{"RejectsNonHTTPTargetURL", func(s *client.ScheduleCreate) { s.Target.Url = ptr("ftp://consumer.example.com/x") }, "target.url", "http"},
		{"RejectsTargetURLWithoutHost", func(s *client.ScheduleCreate) { s.Target.Url = ptr("https:///path") }, "target.url", "host"},
		{"RejectsHTTPTargetWithoutURL", func(s *client.ScheduleCreate) { s.Target.Url = nil }, "target.url", "required"},
		{"RejectsHTTPBatchTargetWithoutURL", func(s *client.ScheduleCreate) { s.Target = client.Target{Type: client.TargetTypeHttpBatch} }, "target.url", "required"},
		{"RejectsNonHTTPBatchTargetURL", func(s *client.ScheduleCreate) {
			s.Target = client.Target{Type: client.TargetTypeHttpBatch, Url: ptr("ftp://consumer.example.com/x")}
		}, "target.url", "http"},
		{"RejectsHTTPBatchTargetWithQueueURL", func(s *client.ScheduleCreate) {
			s.Target = client.Target{Type: client.TargetTypeHttpBatch, Url: ptr("https://consumer.example.com/batch"), QueueUrl: ptr("q")}
		}, "target.queueUrl", "sqs"},
		{"RejectsMalformedSQSQueueURL", func(s *client.ScheduleCreate) {
			s.Target = client.Target{Type: client.TargetTypeSqs, QueueUrl: ptr("https://sqs.eu-west-1.amazonaws.com/not-an-account/q")}
		}, "target.queueUrl", "SQS"},
		{"RejectsCronAndRunAtTogether", func(s *client.ScheduleCreate) { s.RunAt = ptr(time.Now().Add(time.Hour)) }, "cron", "exclusive"},
		{"RejectsMissingExpression", func(s *client.ScheduleCreate) { s.Cron = nil }, "cron", "required"},
		{"RejectsBadWindow", func(s *client.ScheduleCreate) { s.Window = ptr("two hours") }, "window", ""},
		{"RejectsSpreadWithoutWindow", func(s *client.ScheduleCreate) { s.Spread = ptr(true) }, "spread", ""},
		{"RejectsPriorityOutOfRange", func(s *client.ScheduleCreate) { s.Priority = ptr(5000) }, "priority", ""},
		{"RejectsEndBeforeStart", func(s *client.ScheduleCreate) {
			s.StartAt = ptr(time.Now().Add(48 * time.Hour))
			s.EndAt = ptr(time.Now().Add(24 * time.Hour))
		}, "endAt", "after startAt"},
		{"RejectsTooManyChildren", func(s *client.ScheduleCreate) {
			s.Cron = ptr("* * 1-30 1-11 *") // 60 minutes × 11 months × 30 days: over the children limit
		}, "cron", "children"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := valid()
			tc.mutate(&body)
			r, err := c.CreateScheduleWithResponse(h.ctx, nil, body)
			p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, tc.field)
			if tc.reason != "" && !strings.Contains(reasonOf(p, tc.field), tc.reason) {
				t.Fatalf("reason %q does not contain %q", reasonOf(p, tc.field), tc.reason)
			}
		})
	}

	schemaCases := []struct {
		name  string
		body  string
		field string
	}{
		{"RejectsUnknownField", `{"name":"x","cron":"0 3 * * *","target":{"type":"http","url":"https://a.example"},"colour":"red"}`, "colour"},
		{"RejectsUnknownNestedField", `{"name":"x","cron":"0 3 * * *","target":{"type":"http","url":"https://a.example","verb":"PUT"}}`, "target.verb"},
		{"RejectsMissingTarget", `{"name":"x","cron":"0 3 * * *"}`, "target"},
		{"RejectsUnknownTargetType", `{"name":"x","cron":"0 3 * * *","target":{"type":"smtp"}}`, "target.type"},
		{"RejectsMisspelledBatchTargetType", `{"name":"x","cron":"0 3 * * *","target":{"type":"http-batch","url":"https://a.example"}}`, "target.type"},
		{"RejectsWrongType", `{"name":"x","cron":"0 3 * * *","eventCount":"many","target":{"type":"http","url":"https://a.example"}}`, "eventCount"},
		{"RejectsZeroEventCount", `{"name":"x","cron":"0 3 * * *","eventCount":0,"target":{"type":"http","url":"https://a.example"}}`, "eventCount"},
		{"RejectsBadRunAt", `{"name":"x","runAt":"tomorrow","target":{"type":"http","url":"https://a.example"}}`, "runAt"},
		{"RejectsUnknownOverlap", `{"name":"x","cron":"0 3 * * *","overlap":"queue","target":{"type":"http","url":"https://a.example"}}`, "overlap"},
		{"RejectsInvalidJSON", `{"name":"x",`, "body"},
	}
	for _, tc := range schemaCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", stringsReader(tc.body))
			wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, tc.field)
		})
	}

	t.Run("RejectsBodyOverSizeLimit", func(t *testing.T) {
		big := `{"name":"x","cron":"0 3 * * *","target":{"type":"http","url":"https://a.example"},"payload":"` + strings.Repeat("x", 2<<20) + `"}`
		r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", stringsReader(big))
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusRequestEntityTooLarge, "body")
	})
	t.Run("RejectsChunkedBodyOverSizeLimit", func(t *testing.T) {
		// No Content-Length: the limit must stop the read itself.
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte(`{"name":"x","payload":"`))
			chunk := []byte(strings.Repeat("x", 64<<10))
			for range 64 {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
			_ = pw.Close()
		}()
		r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", pr)
		_ = pr.Close()
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusRequestEntityTooLarge, "body")
	})
	t.Run("RejectsWrongContentType", func(t *testing.T) {
		r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "text/plain", stringsReader(`name=x`))
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "")
	})
	t.Run("RejectsBadQueryParameter", func(t *testing.T) {
		r, err := c.ListSchedulesWithResponse(h.ctx, &client.ListSchedulesParams{Limit: ptr(5000)})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "limit")
		s, err := c.ListSchedulesWithResponse(h.ctx, &client.ListSchedulesParams{State: ptr(client.ScheduleState("sleeping"))})
		wantProblem(t, err, s.HTTPResponse, s.Body, http.StatusBadRequest, "state")
	})
	t.Run("RejectsForeignCursor", func(t *testing.T) {
		r, err := c.ListSchedulesWithResponse(h.ctx, &client.ListSchedulesParams{Cursor: ptr("%%%")})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "cursor")
	})
	t.Run("ReportsEveryBadField", func(t *testing.T) {
		body := valid()
		body.Name = strings.Repeat("n", 300)
		body.Timezone = ptr("Nowhere/Land")
		body.EventCount = ptr(5000)
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, body)
		p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "name")
		if reasonOf(p, "timezone") == "" || reasonOf(p, "eventCount") == "" {
			t.Fatalf("not every field named: %s", r.Body)
		}
	})
	t.Run("RejectedRequestsLeaveNothingBehind", func(t *testing.T) {
		list, err := h.st.ScheduleList(h.ctx, &storeListParams{TenantID: tid, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 0 {
			t.Fatalf("%d schedules stored by rejected requests", len(list))
		}
		tzs, err := h.st.ChildTimezones(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(tzs) != 0 {
			t.Fatalf("children stored by rejected requests: %v", tzs)
		}
	})

	t.Run("PolicyRejectsLongName", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: strings.Repeat("p", 201), MaxInFlight: 1})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "name")
	})
	t.Run("PolicyRejectsBadTokenTimeout", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "p", MaxInFlight: 1, TokenTimeout: ptr("-5m")})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "tokenTimeout")
	})
	t.Run("PolicyRejectsZeroMaxInFlight", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "p", MaxInFlight: 0})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "maxInFlight")
	})
	t.Run("PolicyRejectsUnknownField", func(t *testing.T) {
		r, err := c.CreatePolicyWithBodyWithResponse(h.ctx, nil, "application/json", stringsReader(`{"name":"p","maxInFlight":1,"bursts":3}`))
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "bursts")
	})
	t.Run("TenantRejectsLongName", func(t *testing.T) {
		r, err := h.admin.CreateTenantWithResponse(h.ctx, nil, client.TenantCreate{Name: strings.Repeat("t", 201)})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "name")
	})
	t.Run("UnknownRouteIsProblem", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/nothing", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		wantProblem(t, nil, resp, b, http.StatusNotFound, "")
	})
}

// A release whose event id breaks the spec's length bounds is refused
// naming the id, as kin-openapi's validation of the parameter does.
func TestReleaseIDTooLong(t *testing.T) {
	h := newHarness(t)
	anon := h.client("")
	r, err := anon.ReleaseEventWithResponse(h.ctx, strings.Repeat("e", 201), client.ReleaseRequest{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "id")
}
