package api_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	schedulerd "github.com/schedulerd/schedulerd"
	"github.com/schedulerd/schedulerd/api"
)

// TestGeneratedFromOpenAPI: the code in api.gen.go was generated from
// the openapi.yaml of the repository. The server validates requests with
// the document embedded in api.gen.go, so an openapi.yaml changed without
// `go generate ./api/... ./client/...` would otherwise go unnoticed.
func TestGeneratedFromOpenAPI(t *testing.T) {
	embedded, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	repo, err := openapi3.NewLoader().LoadFromData(schedulerd.OpenAPI)
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	// The generator embeds operation ids with their first letter upper case.
	for _, item := range repo.Paths.Map() {
		for _, op := range item.Operations() {
			if op.OperationID != "" {
				op.OperationID = strings.ToUpper(op.OperationID[:1]) + op.OperationID[1:]
			}
		}
	}
	got, err := json.Marshal(embedded)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(repo)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("api.gen.go is not generated from openapi.yaml: run `go generate ./api/... ./client/...` and commit the generated files")
	}
}
