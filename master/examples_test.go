package master_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestPolicyExamplesAreAccepted posts every request example of createPolicy
// in openapi.yaml and checks that the created policy says what the example
// asked for, so the documented examples stay true.
func TestPolicyExamplesAreAccepted(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var op struct {
		RequestBody struct {
			Content map[string]struct {
				Examples map[string]struct {
					Value map[string]any `yaml:"value"`
				} `yaml:"examples"`
			} `yaml:"content"`
		} `yaml:"requestBody"`
	}
	node := doc.Paths["/v1/policies"]["post"]
	if err := node.Decode(&op); err != nil {
		t.Fatal(err)
	}
	examples := op.RequestBody.Content["application/json"].Examples
	// The examples must show each kind of policy.
	for _, field := range []string{"concurrencyKey", "ratePerSecond", "adaptive"} {
		found := false
		for _, ex := range examples {
			_, ok := ex.Value[field]
			found = found || ok
		}
		if !found {
			t.Errorf("no createPolicy example sets %s", field)
		}
	}

	h := newHarness(t)
	_, c := h.tenant("examples")
	for name, ex := range examples {
		body, err := json.Marshal(ex.Value)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, h.url+"/v1/policies", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, got := h.send(c, req)
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("example %s: status %d: %s", name, resp.StatusCode, got)
			continue
		}
		var policy map[string]any
		if err := json.Unmarshal(got, &policy); err != nil {
			t.Fatalf("example %s: %v", name, err)
		}
		for field, want := range ex.Value {
			if !sameJSONValue(t, field, want, policy[field]) {
				t.Errorf("example %s: %s = %v in the created policy, want %v", name, field, policy[field], want)
			}
		}
	}
}

// sameJSONValue compares an example's value with the API's answer, as JSON,
// durations by their length.
func sameJSONValue(t *testing.T, field string, want, got any) bool {
	t.Helper()
	if field == "tokenTimeout" {
		w, err1 := time.ParseDuration(want.(string))
		g, ok := got.(string)
		d, err2 := time.ParseDuration(g)
		return ok && err1 == nil && err2 == nil && w == d
	}
	norm := func(v any) any {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	w, g := norm(want), norm(got)
	if wm, ok := w.(map[string]any); ok {
		// An object in an example names some of the answer's fields.
		gm, ok := g.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range wm {
			if !reflect.DeepEqual(v, gm[k]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(w, g)
}
