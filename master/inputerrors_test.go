package master_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
)

// validQueryValue is a value the schema of query parameter p accepts.
func validQueryValue(t *testing.T, p *openapi3.Parameter) string {
	t.Helper()
	s := p.Schema.Value
	switch {
	case len(s.Enum) > 0:
		return s.Enum[0].(string)
	case s.Type.Is(openapi3.TypeInteger):
		return "5"
	case s.Type.Is(openapi3.TypeBoolean):
		return "true"
	case s.Format == "date-time":
		return "2030-01-02T03:04:05Z"
	case s.Type.Is(openapi3.TypeString):
		return "x"
	}
	t.Fatalf("parameter %s: no valid value known for its schema", p.Name)
	return ""
}

// TestRepeatedQueryParameters: every query parameter of the spec takes one
// value; given twice, even with valid values (from and to of listEvents
// were taken from the first), it is answered 400 naming it.
func TestRepeatedQueryParameters(t *testing.T) {
	h := newHarness(t)
	tenantKey := h.tenantKey("repeats")
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	tested := 0
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range op.Parameters {
				if p.Value.In != openapi3.ParameterInQuery {
					continue
				}
				name := p.Value.Name
				if p.Value.Schema.Value.Type.Is(openapi3.TypeArray) {
					// It takes several values: given twice, both are accepted.
					t.Run(method+" "+path+" "+name+" repeated", func(t *testing.T) {
						if !p.Value.Schema.Value.Items.Value.Type.Is(openapi3.TypeString) {
							t.Fatalf("%s: no valid value known for its items", name)
						}
						o := bodyOperation{method: method, path: param.ReplaceAllString(path, "x_1") + "?" + url.Values{name: {"x", "y"}}.Encode(), key: tenantKey}
						resp, body := o.do(t, h, "", false)
						if resp.StatusCode != http.StatusOK {
							t.Fatalf("%s given twice: status %d, want 200; body %s", name, resp.StatusCode, body)
						}
					})
					continue
				}
				t.Run(method+" "+path+" "+name, func(t *testing.T) {
					v := validQueryValue(t, p.Value)
					o := bodyOperation{method: method, path: param.ReplaceAllString(path, "x_1") + "?" + url.Values{name: {v, v}}.Encode(), key: tenantKey}
					if strings.HasPrefix(path, "/v1/tenants") {
						o.key = testAdminKey
					}
					resp, body := o.do(t, h, "", false)
					wantReason(t, wantProblem(t, nil, resp, body, http.StatusBadRequest, name), name, "must be given at most once")
				})
				tested++
			}
		}
	}
	if tested < 10 {
		t.Fatalf("only %d query parameters tested", tested)
	}
	t.Run("OnceIsFine", func(t *testing.T) {
		o := bodyOperation{method: http.MethodGet, path: "/v1/events?from=2030-01-02T03:04:05Z&to=2030-01-03T03:04:05Z", key: tenantKey}
		resp, body := o.do(t, h, "", false)
		mustStatus(t, nil, resp.StatusCode, body, http.StatusOK)
	})
}

// TestFractionInIntegerField: 1.0 for an integer passes the schema (it is
// an integral number) but not the decoder; the 400 names the field in the
// API's words, not Go's.
func TestFractionInIntegerField(t *testing.T) {
	h := newHarness(t)
	tid, c := h.tenant("fractions")
	tenantKey := h.tenantKey("fractions-too")
	const target = `"target":{"type":"http","url":"https://consumer.example.com/hook"}`
	cases := []struct {
		name, method, path, key, body string
		field, detail                 string
	}{
		{"CreateSchedule", http.MethodPost, "/v1/schedules", tenantKey,
			`{"name":"x","cron":"0 3 * * *","eventCount":1.0,` + target + `}`, "eventCount", "eventCount must be an integer"},
		{"CreatePolicy", http.MethodPost, "/v1/policies", tenantKey,
			`{"name":"p","maxInFlight":2.0}`, "maxInFlight", "maxInFlight must be an integer"},
		{"UpdateTenantQuota", http.MethodPatch, "/v1/tenants/" + tid, testAdminKey,
			`{"quotas":{"maxSchedules":1.0}}`, "quotas.maxSchedules", "quotas.maxSchedules must be an integer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := bodyOperation{method: tc.method, path: tc.path, key: tc.key}.do(t, h, tc.body, false)
			p := wantProblem(t, nil, resp, body, http.StatusBadRequest, tc.field)
			wantReason(t, p, tc.field, "must be an integer")
			if p.Detail == nil || *p.Detail != tc.detail {
				t.Fatalf("detail %v, want %q", p.Detail, tc.detail)
			}
		})
	}
	t.Run("BatchItem", func(t *testing.T) {
		r, err := c.CreateSchedulesBatchWithBodyWithResponse(h.ctx, "application/json",
			strings.NewReader(`{"items":[{"name":"x","cron":"0 3 * * *","eventCount":1.0,`+target+`}]}`))
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		items := r.JSON200.Items
		if len(items) != 1 || items[0].Problem == nil || items[0].Problem.Detail == nil || *items[0].Problem.Detail != "items[0]: eventCount must be an integer" ||
			reasonOf(*items[0].Problem, "items[0].eventCount") != "must be an integer" {
			t.Fatalf("batch answer %s", r.Body)
		}
	})
}

// TestLoneSurrogateEscapes: a \u escape of half a UTF-16 surrogate pair
// encodes no character (encoding/json would store U+FFFD in its place); it
// is refused naming where it is, with or without a key, in the fields and
// the payload alike. A whole pair is a character like any other.
func TestLoneSurrogateEscapes(t *testing.T) {
	h := newHarness(t)
	tid, c := h.tenant("surrogates")
	body := func(name, payload string) string {
		return `{"name":"` + name + `","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":` + payload + `}`
	}
	cases := []struct{ name, body, field string }{
		{"InName", body(`x\ud800`, `1`), "name"},
		{"SecondHalfAlone", body(`\udc00x`, `1`), "name"},
		{"InPayload", body(`x`, `{"a":["ok","\ud83d"]}`), "payload.a.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", strings.NewReader(tc.body))
			wantReason(t, wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, tc.field), tc.field, "unpaired UTF-16 surrogate")
		})
	}
	t.Run("ReleaseWithoutKey", func(t *testing.T) {
		resp, b := bodyOperation{method: http.MethodPost, path: "/v1/events/ev_1/release"}.do(t, h, `{"token":"rt_\ud800"}`, false)
		wantProblem(t, nil, resp, b, http.StatusBadRequest, "token")
	})
	t.Run("PairIsAccepted", func(t *testing.T) {
		r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", strings.NewReader(body(`smile \ud83d\ude00`, `"\uD83D\uDE00"`)))
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
		if got := h.storedSchedule(tid, r.JSON201.Id); got.Name != "smile \U0001F600" || string(got.Payload) != `"\uD83D\uDE00"` {
			t.Fatalf("stored name %q payload %s", got.Name, got.Payload)
		}
	})
}

// TestQuotaRefusalsSayHowToRaiseThem: each refusal for a tenant quota names
// the admin call that raises it for the tenant and the server setting of
// the default, which exists.
func TestQuotaRefusalsSayHowToRaiseThem(t *testing.T) {
	h := newHarness(t, func(c *master.Config, _ *master.Deps) { c.QuotaCountTTL = -1 })
	flags := map[string]string{}
	for _, o := range app.Options() {
		flags["-"+o.Flag] = o.Env
	}
	wantWayOut := func(t *testing.T, p client.Problem, tenantID, field, quota string) {
		t.Helper()
		for _, text := range []string{reasonOf(p, field), *p.Detail} {
			if !strings.Contains(text, "PATCH /v1/tenants/"+tenantID+` {"quotas":{"`+quota+`":<n>}}`) {
				t.Fatalf("%q does not name the admin call", text)
			}
			m := regexp.MustCompile(`server flag (-[a-z-]+) \(([A-Z_]+)\)`).FindStringSubmatch(text)
			if m == nil || flags[m[1]] != m[2] || !strings.Contains(m[1], "-tenant-") {
				t.Fatalf("%q does not name a server flag and its variable (known: %v)", text, m)
			}
		}
	}
	id, c := h.tenant("limited")
	h.patchTenant(id, client.TenantUpdate{Quotas: &client.TenantQuotas{MaxSchedules: ptr(1), MaxEventsPerFire: ptr(10), MaxEventsStored: ptr(3)}})
	s := h.schedule(c, client.ScheduleCreate{Name: "one", Cron: ptr("0 3 * * *"), EventCount: ptr(2), Target: httpTarget()})

	t.Run("MaxSchedules", func(t *testing.T) {
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "two", Cron: ptr("0 3 * * *"), Target: httpTarget()})
		wantWayOut(t, wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "maxSchedules"), id, "maxSchedules", "maxSchedules")
	})
	t.Run("MaxEventsPerFire", func(t *testing.T) {
		r, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{EventCount: ptr(11)})
		wantWayOut(t, wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "eventCount"), id, "eventCount", "maxEventsPerFire")
	})
	t.Run("MaxEventsStored", func(t *testing.T) {
		h.insertEvent(id, s.Id, "", model.EventPending)
		h.insertEvent(id, s.Id, "", model.EventPending)
		r, err := c.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{})
		wantWayOut(t, wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusTooManyRequests, "maxEventsStored"), id, "maxEventsStored", "maxEventsStored")
	})
}
