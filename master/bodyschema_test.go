package master

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/schedulerd/schedulerd/api"
)

// TestBodySchemaAgreesWithKin checks the precompiled body schemas against
// kin-openapi's validation of the same requests: whatever bodySchema
// accepts, kin-openapi accepts, and the valid bodies of the hot operations
// take the precompiled path.
func TestBodySchemaAgreesWithKin(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	routes := buildRoutes(spec)
	const target = `"target":{"type":"http","url":"https://consumer.example.com/hook"}`
	for _, tc := range []struct {
		route, path, ct, body string
		valid                 bool // the precompiled schema must accept it
	}{
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a","runAt":"2030-01-02T03:04:05Z",` + target + `,"payload":{"x":[1,2]}}`, true},
		{"POST /v1/schedules", "/v1/schedules", "application/json; charset=utf-8", `{"name":"a","cron":"*/5 * * * *",` + target + `,"eventCount":3}`, true},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a","runAt":"2030-01-02T03:04:05.123Z",` + target + `}`, true},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a"}`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a",` + target + `,"bogus":1}`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a","runAt":"tomorrow",` + target + `}`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a","runAt":"2030-01-02 03:04:05",` + target + `}`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a",` + target + `,"eventCount":0}`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a",` + target + `,"eventCount":"3"}`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a",` + target + `,"maxAttempts":101}`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a","target":"https://consumer.example.com/hook"}`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a","target":{"type":"carrier-pigeon","url":"https://x.example"}}`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `[]`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", `{"name":"a",` + target + `} {}`, false},
		{"POST /v1/schedules", "/v1/schedules", "text/plain", `{"name":"a",` + target + `}`, false},
		{"POST /v1/schedules", "/v1/schedules", "application/json", ``, false},
		{"POST /v1/schedules/batch", "/v1/schedules/batch", "application/json", `{"items":[{"name":"a",` + target + `},{"name":"b","idempotencyKey":"k","cron":"0 3 * * *",` + target + `}]}`, true},
		{"POST /v1/schedules/batch", "/v1/schedules/batch", "application/json", `{"items":[{"name":"a",` + target + `},{"name":"b"}]}`, false},
		{"POST /v1/schedules/batch", "/v1/schedules/batch", "application/json", `{"items":[],"more":1}`, false},
		// A JSON Schema 2020-12 body (no component references).
		{"POST /v1/policies", "/v1/policies", "application/json", `{"name":"p","maxInFlight":5,"tokenTimeout":"1m","autoRelease":true}`, true},
		{"POST /v1/policies", "/v1/policies", "application/json", `{"name":"p","maxInFlight":0}`, false},
		{"POST /v1/policies", "/v1/policies", "application/json", `{"name":"p","maxInFlight":1.5}`, false},
		{"POST /v1/policies", "/v1/policies", "application/json", `{"name":"","maxInFlight":5}`, false},
		{"POST /v1/policies", "/v1/policies", "application/json", `{"maxInFlight":5}`, false},
		{"POST /v1/policies", "/v1/policies", "application/json", `{"name":"p","maxInFlight":5,"extra":true}`, false},
	} {
		rt := routes[tc.route]
		if rt == nil {
			t.Fatalf("no route %s", tc.route)
		}
		req := httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader([]byte(tc.body)))
		req.Header.Set("Content-Type", tc.ct)
		got := rt.body.accepts(rt, req, []byte(tc.body))
		if got != tc.valid {
			t.Errorf("%s %s: precompiled schema accepts = %v, want %v", tc.route, tc.body, got, tc.valid)
		}
		req = httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader([]byte(tc.body)))
		req.Header.Set("Content-Type", tc.ct)
		kinErr := openapi3filter.ValidateRequest(t.Context(), &openapi3filter.RequestValidationInput{
			Request: req, PathParams: map[string]string{},
			Route:   &routers.Route{Spec: rt.spec, Path: rt.path, PathItem: rt.pathItem, Method: rt.method, Operation: rt.operation},
			Options: validationOptions,
		})
		if got && kinErr != nil {
			t.Errorf("%s %s: precompiled schema accepts what kin-openapi refuses: %v", tc.route, tc.body, kinErr)
		}
		if tc.valid && kinErr != nil {
			t.Errorf("%s %s: a case meant valid is refused by kin-openapi: %v", tc.route, tc.body, kinErr)
		}
	}
	if b := &routes["POST /v1/schedules"].body; b.legacy == nil {
		t.Error("no OpenAPI 3.0 validator for the create body: creates go through kin-openapi's per request compilation")
	}
	if b := &routes["POST /v1/policies"].body; b.schema == nil {
		t.Error("the policy body schema did not compile")
	}
}
