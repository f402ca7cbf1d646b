// Package schedulerd holds what must live at the repository root: the
// OpenAPI document, embedded so that the server can serve it (go:embed
// cannot reach a parent directory).
package schedulerd

import _ "embed"

// OpenAPI is openapi.yaml, the API's contract.
//
//go:embed openapi.yaml
var OpenAPI []byte
