package master

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/schedulerd/schedulerd/api"
)

// decodeBatchItem is decodeBatch for a body of the one item raw.
func decodeBatchItem(raw []byte, in *api.ScheduleBatchItem) bool {
	if !jsontext.Value(raw).IsValid() {
		return false // what scanBody refuses, or raw is not one value
	}
	items, ok := decodeBatch([]byte(`{"items":[` + string(raw) + `]}`))
	if !ok || len(items) != 1 {
		return false
	}
	*in = items[0]
	return true
}

// bodyValidator validates a body of the route as validateBatch does;
// quick says a body is valid (true) or not known to be (the prepared
// validator).
func bodyValidator(t *testing.T, route string) (validate func(body []byte) error, quick func(body []byte) bool) {
	t.Helper()
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	rt := buildRoutes(spec)[route]
	schema := batchBodySchema(rt)
	if schema == nil {
		t.Fatal("no batch body schema")
	}
	opts := []openapi3.SchemaValidationOption{openapi3.VisitAsRequest(), openapi3.MultiErrors()}
	if spec.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	quick = func(body []byte) bool {
		var v any
		return json.Unmarshal(body, &v) == nil && rt.body.acceptsValue(rt, v)
	}
	return func(body []byte) error {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		if rt.body.acceptsValue(rt, v) {
			return nil
		}
		return schema.VisitJSON(v, opts...)
	}, quick
}

// TestDecodeScheduleCreateOnlyAcceptsValidBodies is
// TestDecodeBatchItemOnlyAcceptsValidItems for the body of createSchedule.
func TestDecodeScheduleCreateOnlyAcceptsValidBodies(t *testing.T) {
	validate, quick := bodyValidator(t, "POST /v1/schedules")
	r := rand.New(rand.NewPCG(*scanSeed, 3))
	accepted, valid := 0, 0
	for i := range *scanCases / 10 {
		body := []byte(randomItem(r))
		var got api.ScheduleCreate
		ok := decodeScheduleCreate(body, &got)
		var want api.ScheduleCreate
		derr := decodeJSON(body, &want)
		if derr == nil && quick(body) {
			valid++
		}
		if !ok {
			continue
		}
		accepted++
		if verr := validate(body); verr != nil || derr != nil {
			t.Fatalf("case %d of seed %d: decodeScheduleCreate accepted %s\nvalidator: %v\ndecoder: %v", i, *scanSeed, body, verr, derr)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Fatalf("case %d of seed %d: %s decoded to\n%s, want\n%s", i, *scanSeed, body, a, b)
		}
	}
	t.Logf("%d of %d bodies valid, %d accepted", valid, *scanCases/10, accepted)
	if accepted < valid/2 {
		t.Fatalf("decodeScheduleCreate accepted %d of %d valid bodies", accepted, valid)
	}
}

// TestDecodeBatchItemOnlyAcceptsValidItems checks decodeBatchItem against
// the spec's validator on random items, valid ones and ones broken in one
// or more ways: whatever it accepts, the validator accepts and the decoder
// decodes to the same value; and it accepts the plainly valid ones. A
// failure prints the seed to rerun it with -master.scanseed.
func TestDecodeBatchItemOnlyAcceptsValidItems(t *testing.T) {
	validate, quick := bodyValidator(t, "POST /v1/schedules/batch")
	r := rand.New(rand.NewPCG(*scanSeed, 2))
	accepted, valid := 0, 0
	for i := range *scanCases / 10 {
		item := randomItem(r)
		var got api.ScheduleBatchItem
		ok := decodeBatchItem([]byte(item), &got)
		body := []byte(`{"items":[` + item + `]}`)
		var want api.ScheduleBatchItem
		derr := decodeJSON([]byte(item), &want)
		if derr == nil && quick(body) {
			valid++
		}
		if !ok {
			continue
		}
		verr := validate(body)
		accepted++
		if verr != nil || derr != nil {
			t.Fatalf("case %d of seed %d: decodeBatchItem accepted %s\nvalidator: %v\ndecoder: %v", i, *scanSeed, item, verr, derr)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Fatalf("case %d of seed %d: %s decoded to\n%s, want\n%s", i, *scanSeed, item, a, b)
		}
	}
	t.Logf("%d of %d items valid, %d accepted", valid, *scanCases/10, accepted)
	if accepted < valid/2 {
		t.Fatalf("decodeBatchItem accepted %d of %d valid items", accepted, valid)
	}
	for _, item := range []string{
		`{"name":"a","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":{"order":1}}`,
		`{"name":"b","cron":"0 3 * * *","timezone":"Europe/Berlin","eventCount":5,"target":{"type":"sqs","queueUrl":"https://sqs.example.com/1/q"},"idempotencyKey":"k-1","maxAttempts":100,"overlap":"skip","misfire":"fire_all","startAt":"2030-01-02T03:04:05.5+02:00"}`,
		`{"name":"c","runAt":"2030-01-02T03:04:05Z","target":{"type":"http_batch","url":"https://consumer.example.com/batch"}}`,
	} {
		var in api.ScheduleBatchItem
		if !decodeBatchItem([]byte(item), &in) {
			t.Errorf("decodeBatchItem refused %s", item)
		}
	}
}

// randomItem writes a batch item: valid members, then (two times in three)
// one member set to a value of its list, valid or not, or a required one
// left out; each check of decodeBatchItem then meets items that only it
// would refuse.
func randomItem(r *rand.Rand) string {
	values := map[string][]string{ // the first of each is valid
		"name":           {`"job"`, `"é"`, `""`, `null`, `1`},
		"target":         {`{"type":"http","url":"https://consumer.example.com/hook"}`, `{"type":"sqs","queueUrl":"q"}`, `{"type":"http_batch","url":"https://consumer.example.com/batch"}`, `{"type":"http_batch"}`, `{"type":"HTTP_BATCH","url":"https://x"}`, `{"type":"ftp"}`, `{"url":"x"}`, `{"type":"http","url":null}`, `{"type":"http","extra":1}`, `"https://x"`, `null`, `{}`},
		"runAt":          {`"2030-01-02T03:04:05Z"`, `"2030-01-02T03:04:05.123+05:30"`, `"2030-01-02T03:04:05,123Z"`, `"2030-01-02t03:04:05Z"`, `"2030-01-02T03:04:05"`, `"2030-02-31T00:00:00Z"`, `"2030-01-02T23:59:60Z"`, `"tomorrow"`, `"2030-01-02T03:04:05\u005a"`, `1`, `null`},
		"startAt":        {`"2030-01-02T03:04:05Z"`, `"2030-13-02T03:04:05Z"`, `"2030-01-02T03:04:05,5Z"`, `null`},
		"endAt":          {`"2031-01-02T03:04:05Z"`, `"2031-01-02T03:04:05z"`, `"2031-01-02T03:04:05,5+01:00"`},
		"cron":           {`"0 3 * * *"`, `"x"`, `3`, `null`},
		"fields":         {`{"minute":"0","hour":"3"}`, `{"minute":null}`, `{"second":"1"}`, `{}`, `[]`},
		"timezone":       {`"UTC"`, `"Mars/Olympus"`, `null`},
		"eventCount":     {`1`, `5`, `0`, `-1`, `1.5`, `2.0`, `1e2`, `"3"`, `null`, `99999999999999999999`},
		"policyId":       {`"pol_1"`, `null`, `""`},
		"window":         {`"10m"`, `5`},
		"spread":         {`true`, `false`, `"true"`, `null`},
		"priority":       {`0`, `-5`, `1000000`, `1.5`, `null`},
		"overlap":        {`"allow"`, `"skip"`, `"cancel"`, `"ALLOW"`, `""`, `null`},
		"misfire":        {`"fire_once"`, `"fire_all"`, `"skip"`, `"never"`, `null`},
		"payload":        {`{"a":[1,null]}`, `"text"`, `0`, `[]`, `null`, `false`},
		"maxAttempts":    {`1`, `100`, `0`, `101`, `null`},
		"idempotencyKey": {`"k"`, `""`, `"` + strings.Repeat("k", 255) + `"`, `"` + strings.Repeat("k", 256) + `"`, `"` + strings.Repeat("é", 200) + `"`, `null`},
		"colour":         {`"red"`},
	}
	names := slices.Sorted(maps.Keys(values))
	members := map[string]string{"name": values["name"][0], "target": values["target"][0]}
	for _, name := range names {
		if name != "colour" && r.IntN(4) == 0 {
			members[name] = values[name][0]
		}
	}
	switch r.IntN(3) {
	case 0: // valid
	case 1:
		name := names[r.IntN(len(names))]
		members[name] = values[name][r.IntN(len(values[name]))]
	default:
		if r.IntN(4) == 0 {
			delete(members, []string{"name", "target"}[r.IntN(2)])
		} else {
			name := names[r.IntN(len(names))]
			members[name] = values[name][r.IntN(len(values[name]))]
		}
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, name := range slices.Sorted(maps.Keys(members)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(name) + ":" + members[name])
	}
	b.WriteByte('}')
	return b.String()
}

// TestCreateBodyDecodedByTheMiddleware checks that the middleware hands a
// plainly valid createSchedule body to the handler decoded, and leaves
// any other body to the handler's own decoding after kin-openapi.
func TestCreateBodyDecodedByTheMiddleware(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{routes: buildRoutes(spec)}
	e := echo.New()
	e.HTTPErrorHandler = s.handleError
	var got *api.ScheduleCreate
	e.POST("/v1/schedules", func(c echo.Context) error {
		got, _ = c.Get(ctxScheduleCreate).(*api.ScheduleCreate)
		return c.NoContent(http.StatusNoContent)
	}, s.validateRequest)
	for _, tc := range []struct {
		body, ct string
		decoded  bool
		status   int
	}{
		{`{"name":"a","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://x.example.com/"}}`, "application/json", true, http.StatusNoContent},
		{`{"name":"a","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://x.example.com/"}}`, "application/json; charset=utf-8", true, http.StatusNoContent},
		{`{"name":"a","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://x.example.com/"}}`, "text/plain", false, http.StatusBadRequest},
		{`{"name":"a","cron":null,"target":{"type":"http","url":"https://x.example.com/"}}`, "application/json", false, http.StatusBadRequest},
		{`{"name":"a","maxAttempts":101,"target":{"type":"http"}}`, "application/json", false, http.StatusBadRequest},
	} {
		got = nil
		req := httptest.NewRequest(http.MethodPost, "/v1/schedules", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.ct)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s (%s): status %d, want %d", tc.body, tc.ct, rec.Code, tc.status)
		}
		if (got != nil) != tc.decoded {
			t.Errorf("%s (%s): decoded by the middleware %v, want %v", tc.body, tc.ct, got != nil, tc.decoded)
		}
		if got != nil && (got.Name != "a" || got.RunAt == nil || got.Target.Type != api.Http) {
			t.Errorf("%s: decoded %+v", tc.body, got)
		}
	}
}
