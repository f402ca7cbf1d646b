package master

import (
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/schedulerd/schedulerd/api"
)

// Routes whose parameters are all plain path strings skip kin-openapi's
// parameter validation; the check that replaces it must refuse what the
// spec refuses.
func TestPlainPathParams(t *testing.T) {
	loader := openapi3.NewLoader()
	spec, err := loader.LoadFromData([]byte(`openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /a/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string, minLength: 1, maxLength: 5}}
    post:
      responses: {'200': {description: ok}}
  /b/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string, pattern: '^x'}}
    get:
      responses: {'200': {description: ok}}
  /c:
    get:
      parameters:
        - {name: q, in: query, schema: {type: string}}
      responses: {'200': {description: ok}}
`))
	if err != nil {
		t.Fatal(err)
	}
	routes := buildRoutes(spec)
	a, b, c := routes["POST /a/:id"], routes["GET /b/:id"], routes["GET /c"]
	if a == nil || b == nil || c == nil {
		t.Fatalf("routes %v", routes)
	}
	if !a.pathOnly || b.pathOnly || c.pathOnly {
		t.Fatalf("pathOnly: a %v (want true), b %v (pattern: want false), c %v (query: want false)", a.pathOnly, b.pathOnly, c.pathOnly)
	}
	for v, want := range map[string]bool{"": false, "x": true, "abcde": true, "abcdef": false, "ééééé": true} {
		if got := a.plainParamsValid(map[string]string{"id": v}); got != want {
			t.Errorf("id %q: valid %v, want %v", v, got, want)
		}
	}
	if a.plainParamsValid(map[string]string{}) {
		t.Error("a missing id is valid")
	}
	// The real spec: the release route (the hot one) takes the fast path.
	full, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	real := buildRoutes(full)
	if r := real["POST /v1/events/:id/release"]; r == nil || !r.pathOnly {
		t.Fatalf("release route pathOnly: %+v", r)
	}
	if r := real["GET /v1/schedules"]; r == nil || r.pathOnly {
		t.Fatal("GET /v1/schedules (query parameters) takes the fast path")
	}
}
