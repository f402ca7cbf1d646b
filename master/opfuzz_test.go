package master_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	schedulerd "github.com/schedulerd/schedulerd"
	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
)

// Random requests to every operation of openapi.yaml, their bodies drawn
// from the operation's schema (valid, mutated or garbage), their path ids
// from the objects of three tenants and from garbage, with any of the keys
// or none. No answer is a 5xx; every error is problem+json; no request
// reaches tenant C's objects: C's key is never sent, so a path naming one
// of them must never succeed, and they are unchanged at the end.
// SCHEDULERD_OPFUZZ_SEED sets the seed, SCHEDULERD_OPFUZZ_REQUESTS the
// number of requests.
func TestRandomRequestsToEveryOperation(t *testing.T) {
	seed := testseed.Get(t, "SCHEDULERD_OPFUZZ_SEED", 1)
	n := 1500
	if v := os.Getenv("SCHEDULERD_OPFUZZ_REQUESTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("SCHEDULERD_OPFUZZ_REQUESTS=%q: %v", v, err)
		}
	}
	doc, err := openapi3.NewLoader().LoadFromData(schedulerd.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	r := rand.New(rand.NewPCG(seed, 35))

	type world struct {
		tenantID, key string
		ids           []string // schedules, policies, fires, events
	}
	setup := func(name string) world {
		tr, err := h.admin.CreateTenantWithResponse(h.ctx, nil, client.TenantCreate{Name: name})
		mustStatus(t, err, tr.StatusCode(), tr.Body, http.StatusCreated)
		kr, err := h.admin.CreateAPIKeyWithResponse(h.ctx, tr.JSON201.Id, nil)
		mustStatus(t, err, kr.StatusCode(), kr.Body, http.StatusCreated)
		id, key, c := tr.JSON201.Id, kr.JSON201.Key, h.client(kr.JSON201.Key)
		pol := h.policy(c, name+"-pol", 3)
		s := h.cronSchedule(c, name+"-cron")
		one := h.schedule(c, client.ScheduleCreate{Name: name + "-once", RunAt: ptr(time.Now().Add(time.Hour)), Target: httpTarget()})
		fire, err := c.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{})
		mustStatus(t, err, fire.StatusCode(), fire.Body, http.StatusAccepted)
		dead := h.insertEvent(id, s.Id, "", model.EventDead)
		held := h.insertEvent(id, s.Id, pol.Id, model.EventDelivered)
		return world{tenantID: id, key: key, ids: []string{pol.Id, s.Id, one.Id, fire.JSON202.Id, dead.ID, held.ID}}
	}
	a, b, c := setup("a"), setup("b"), setup("c")
	before := snapshot(t, h, c.tenantID, c.ids)

	pathIDs := slices.Concat(a.ids, b.ids, c.ids, []string{a.tenantID, b.tenantID, "x", "sch_missing", strings.Repeat("a", 300), "%00", "..", "%2F", "ü", "sch_" + strings.Repeat("0", 20)})
	keys := []string{a.key, a.key, a.key, a.key, b.key, b.key, testAdminKey, testAdminKey, "", "sk_wrong"}

	type op struct {
		method, path string
		o            *openapi3.Operation
	}
	var ops []op
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, o := range doc.Paths.Value(path).Operations() {
			ops = append(ops, op{method, path, o})
		}
	}
	slices.SortFunc(ops, func(x, y op) int { return strings.Compare(x.method+x.path, y.method+y.path) })

	statuses := map[int]int{}
	for i := range n {
		o := ops[r.IntN(len(ops))]
		path, namesC := o.path, false
		for strings.Contains(path, "{") {
			j, k := strings.Index(path, "{"), strings.Index(path, "}")
			id := pathIDs[r.IntN(len(pathIDs))]
			if o.path == "/v1/tenants/{id}" || strings.HasPrefix(o.path, "/v1/tenants/{id}/") {
				if r.IntN(2) == 0 {
					id = []string{a.tenantID, b.tenantID, "ten_missing"}[r.IntN(3)]
				}
			}
			namesC = namesC || slices.Contains(c.ids, id) || id == c.tenantID
			path = path[:j] + id + path[k+1:]
		}
		query := fuzzQuery(r, o.o)
		var body []byte
		if o.o.RequestBody != nil && r.IntN(8) != 0 {
			if mt := o.o.RequestBody.Value.Content.Get("application/json"); mt != nil {
				body = fuzzBody(r, mt.Schema.Value, pathIDs)
			}
		}
		key := keys[r.IntN(len(keys))]
		req, err := http.NewRequestWithContext(h.ctx, o.method, h.url+path+query, bytes.NewReader(body))
		if err != nil {
			continue // a path the test made unparseable: nothing was sent
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if r.IntN(4) == 0 {
			req.Header.Set("Idempotency-Key", fmt.Sprintf("k%d", r.IntN(20)))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d %s %s: %v", i, o.method, path, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		statuses[resp.StatusCode]++
		what := fmt.Sprintf("request %d: %s %s%s (body %.300s)", i, o.method, path, query, body)
		if resp.StatusCode >= 500 {
			t.Fatalf("%s: answered %d: %s", what, resp.StatusCode, got)
		}
		if resp.StatusCode >= 400 {
			if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/problem+json" {
				t.Fatalf("%s: answered %d as %q: %s", what, resp.StatusCode, resp.Header.Get("Content-Type"), got)
			}
		}
		if namesC && resp.StatusCode < 300 && key != testAdminKey {
			t.Fatalf("%s with another tenant's key reached tenant C's object: %d %s", what, resp.StatusCode, got)
		}
	}
	t.Logf("%d requests, statuses %v", n, statuses)
	if statuses[http.StatusOK]+statuses[http.StatusCreated]+statuses[http.StatusAccepted] == 0 {
		t.Error("no request succeeded: the draw does not reach the operations")
	}
	if after := snapshot(t, h, c.tenantID, c.ids); after != before {
		t.Fatalf("tenant C's objects changed:\nbefore %s\nafter  %s", before, after)
	}
}

// snapshot reads a tenant's objects straight from the store.
func snapshot(t *testing.T, h *harness, tenantID string, ids []string) string {
	t.Helper()
	var out []string
	for _, id := range ids {
		if s, err := h.st.ScheduleGet(h.ctx, tenantID, id); err == nil {
			out = append(out, fmt.Sprintf("%s %s v%d", id, s.State, s.Version))
		} else if p, err := h.st.PolicyGet(h.ctx, tenantID, id); err == nil {
			out = append(out, fmt.Sprintf("%s v%d", id, p.Version))
		} else if e, err := h.st.EventGet(h.ctx, tenantID, id); err == nil {
			out = append(out, fmt.Sprintf("%s %s", id, e.Status))
		} else if f, err := h.st.FireGet(h.ctx, tenantID, id); err == nil {
			out = append(out, fmt.Sprintf("%s %s", id, f.Decision))
		} else {
			out = append(out, id+" missing")
		}
	}
	return strings.Join(out, "; ")
}

func fuzzQuery(r *rand.Rand, o *openapi3.Operation) string {
	var q []string
	for _, p := range o.Parameters {
		if p.Value.In != "query" || r.IntN(3) == 0 {
			continue
		}
		v := ""
		if s := p.Value.Schema; s != nil {
			raw, _ := json.Marshal(fuzzValue(r, s.Value, nil, 0))
			v = strings.Trim(string(raw), `"`)
		}
		q = append(q, p.Value.Name+"="+urlEscape(v))
		if r.IntN(10) == 0 {
			q = append(q, p.Value.Name+"="+urlEscape(v)) // repeated
		}
	}
	if r.IntN(10) == 0 {
		q = append(q, "unknown=1")
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + strings.Join(q, "&")
}

func urlEscape(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "#", "%23", " ", "%20", "+", "%2B", "?", "%3F").Replace(s)
}

// fuzzBody draws a body for schema s: valid by the schema most of the
// time, with a member of another type, an unknown member, or garbage now
// and then.
func fuzzBody(r *rand.Rand, s *openapi3.Schema, ids []string) []byte {
	switch r.IntN(12) {
	case 0:
		return []byte(strings.Repeat("[", 1+r.IntN(200)))
	case 1:
		return []byte(`{"name":"\ud800","x":` + strconv.Itoa(r.IntN(10)))
	case 2:
		return []byte("null")
	}
	v := fuzzValue(r, s, ids, 0)
	if m, ok := v.(map[string]any); ok && r.IntN(6) == 0 {
		m["unknownMember"] = 1
	}
	raw, _ := json.Marshal(v)
	return raw
}

func fuzzValue(r *rand.Rand, s *openapi3.Schema, ids []string, depth int) any {
	if s == nil || depth > 6 {
		return nil
	}
	if r.IntN(25) == 0 { // a value of another type
		return []any{"x", 1.5, -1, true, nil, []any{}, map[string]any{}}[r.IntN(7)]
	}
	if len(s.OneOf) > 0 {
		return fuzzValue(r, s.OneOf[r.IntN(len(s.OneOf))].Value, ids, depth+1)
	}
	if len(s.AnyOf) > 0 {
		return fuzzValue(r, s.AnyOf[r.IntN(len(s.AnyOf))].Value, ids, depth+1)
	}
	if len(s.AllOf) > 0 {
		m := map[string]any{}
		for _, sub := range s.AllOf {
			if sm, ok := fuzzValue(r, sub.Value, ids, depth+1).(map[string]any); ok {
				for k, v := range sm {
					m[k] = v
				}
			}
		}
		return m
	}
	if len(s.Enum) > 0 {
		return s.Enum[r.IntN(len(s.Enum))]
	}
	typ := ""
	if s.Type != nil && len(*s.Type) > 0 {
		typ = (*s.Type)[r.IntN(len(*s.Type))]
	}
	switch typ {
	case "object", "":
		m := map[string]any{}
		for name, p := range s.Properties {
			if slices.Contains(s.Required, name) && r.IntN(10) != 0 || r.IntN(2) == 0 {
				m[name] = fuzzValue(r, p.Value, ids, depth+1)
			}
		}
		return m
	case "array":
		var out []any
		for range r.IntN(4) {
			var item *openapi3.Schema
			if s.Items != nil {
				item = s.Items.Value
			}
			out = append(out, fuzzValue(r, item, ids, depth+1))
		}
		return out
	case "integer":
		return []int{0, 1, 2, 5, 60, -1, 1000, 1 << 31, r.IntN(100)}[r.IntN(9)]
	case "number":
		return r.Float64() * 100
	case "boolean":
		return r.IntN(2) == 0
	case "string":
		switch s.Format {
		case "date-time":
			return time.Now().Add(time.Duration(r.IntN(48)-24) * time.Hour).UTC().Format(time.RFC3339)
		case "uri":
			return []string{"https://consumer.example.com/hook", "http://127.0.0.1:1/x", "ftp://x", "http://[64:ff9b::7f00:1]/"}[r.IntN(4)]
		}
		if len(ids) > 0 && r.IntN(4) == 0 {
			return ids[r.IntN(len(ids))]
		}
		return []string{"", "x", "0 3 * * *", "* * * * *", "Europe/Berlin", "15m", "1h", "Mars/Olympus", "61 * * * *", "sqs", "http", strings.Repeat("z", 300)}[r.IntN(12)]
	}
	return nil
}
