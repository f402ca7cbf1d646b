package master_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/schedulerd/schedulerd/api"
)

// TestSpec keeps openapi.yaml and the server from drifting apart: the spec is
// valid OpenAPI and every operation in it is served (and nothing else).
func TestSpec(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("IsValidOpenAPI", func(t *testing.T) {
		if err := spec.Validate(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("EveryOperationIsServed", func(t *testing.T) {
		h := newHarness(t)
		served := map[string]bool{}
		for _, r := range h.srv.Echo().Routes() {
			served[r.Method+" "+r.Path] = true
		}
		param := regexp.MustCompile(`\{([^}]+)\}`)
		want := map[string]bool{}
		for path, item := range spec.Paths.Map() {
			for method := range item.Operations() {
				key := method + " " + param.ReplaceAllString(path, ":$1")
				want[key] = true
				if !served[key] {
					t.Errorf("%s is in openapi.yaml but not served", key)
				}
			}
		}
		for key := range served {
			if !want[key] && key != http.MethodGet+" /healthz" && key != http.MethodGet+" /openapi.yaml" {
				t.Errorf("%s is served but not in openapi.yaml", key)
			}
		}
	})
	t.Run("EveryClientErrorIsProblemJSON", func(t *testing.T) {
		for path, item := range spec.Paths.Map() {
			for method, op := range item.Operations() {
				for code, resp := range op.Responses.Map() {
					if code[0] != '4' && code != "default" {
						continue
					}
					if resp.Value.Content.Get("application/problem+json") == nil {
						t.Errorf("%s %s %s: no application/problem+json", method, path, code)
					}
				}
			}
		}
	})
}
