package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// bodySchema validates an operation's JSON body with the validator
// kin-openapi would pick, prepared once: kin-openapi compiles a JSON Schema
// 2020-12 validator on every validation of an OpenAPI 3.1 body (even for a
// schema it then validates with its OpenAPI 3.0 validator), which costs
// more than the rest of a create.
//
// It only ever accepts: a body it accepts is one kin-openapi accepts too
// (the same validator on the same schema), and any other body goes through
// kin-openapi, whose answer (the 400 and its field names) stays the one the
// client gets.
type bodySchema struct {
	once   sync.Once
	schema *jsonschema.Schema // JSON Schema 2020-12, compiled
	legacy *openapi3.Schema   // kin-openapi's OpenAPI 3.0 validator on this schema
}

// accepts reports whether the body of r (raw) is valid for rt. false means
// "not known to be valid", not "invalid".
func (b *bodySchema) accepts(rt *route, r *http.Request, raw []byte) bool {
	b.once.Do(func() { b.schema, b.legacy = compileBodySchema(rt) })
	if b.schema == nil && b.legacy == nil || len(raw) == 0 {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType)); err != nil || mt != echo.MIMEApplicationJSON {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // as kin-openapi decodes bodies
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return false
	}
	return b.acceptsValue(rt, v)
}

// acceptsValue is accepts for a decoded body.
func (b *bodySchema) acceptsValue(rt *route, v any) bool {
	b.once.Do(func() { b.schema, b.legacy = compileBodySchema(rt) })
	if b.legacy != nil {
		return b.legacy.VisitJSON(v, openapi3.VisitAsRequest(), openapi3.MultiErrors()) == nil
	}
	return b.schema != nil && b.schema.Validate(v) == nil
}

// bodySchemaURL names the spec inside the compiler.
const bodySchemaURL = "https://schedulerd.invalid/openapi.json"

// compileBodySchema prepares the validator kin-openapi uses for rt's
// application/json body (an OpenAPI 3.1 spec): its OpenAPI 3.0 validator
// for a schema with component references and no JSON Schema 2020-12
// keywords, else JSON Schema 2020-12, compiled here with the spec as the
// resource that references point into. Both nil: leave it to kin-openapi.
func compileBodySchema(rt *route) (*jsonschema.Schema, *openapi3.Schema) {
	if rt.spec == nil || !rt.spec.IsOpenAPI31OrLater() || rt.operation.RequestBody == nil || rt.operation.RequestBody.Value == nil {
		return nil, nil
	}
	content := rt.operation.RequestBody.Value.Content
	mt := content.Get(echo.MIMEApplicationJSON)
	if len(content) != 1 || mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return nil, nil
	}
	own, err := json.Marshal(mt.Schema.Value)
	if err != nil {
		return nil, nil
	}
	if !uses2020Keywords(mt.Schema.Value) {
		if bytes.Contains(own, []byte(`"$ref":"#/components/schemas/`)) {
			return nil, mt.Schema.Value
		}
	}
	raw, err := json.Marshal(rt.spec)
	if err != nil {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	formats := map[string]struct{}{}
	collectFormats(doc, formats)
	for f := range formats {
		c.RegisterFormat(&jsonschema.Format{Name: f, Validate: formatCheck(f)})
	}
	c.AssertFormat()
	if err := c.AddResource(bodySchemaURL, doc); err != nil {
		return nil, nil
	}
	ptr := "/paths/" + escapePointer(rt.path) + "/" + strings.ToLower(rt.method) +
		"/requestBody/content/" + escapePointer(echo.MIMEApplicationJSON) + "/schema"
	s, err := c.Compile(bodySchemaURL + "#" + ptr)
	if err != nil {
		return nil, nil
	}
	return s, nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// uses2020Keywords reports whether s uses a keyword that keeps kin-openapi
// on its JSON Schema 2020-12 validator when s has component references.
func uses2020Keywords(s *openapi3.Schema) bool {
	found := errors.New("found")
	err := openapi3.NewSchemaRef("", s).WalkSubtree(func(_ string, ref *openapi3.SchemaRef) error {
		v := ref.Value
		if v != nil && (v.Const != nil || len(v.PrefixItems) != 0 || v.Contains != nil ||
			len(v.PatternProperties) != 0 || len(v.DependentSchemas) != 0 || v.PropertyNames != nil ||
			v.UnevaluatedItems.Has != nil || v.UnevaluatedItems.Schema != nil ||
			v.UnevaluatedProperties.Has != nil || v.UnevaluatedProperties.Schema != nil ||
			v.If != nil || v.Then != nil || v.Else != nil ||
			len(v.DependentRequired) != 0 || len(v.Defs) != 0 || v.ContentSchema != nil) {
			return found
		}
		return nil
	})
	return errors.Is(err, found)
}

func collectFormats(node any, out map[string]struct{}) {
	switch n := node.(type) {
	case map[string]any:
		if f, ok := n["format"].(string); ok && f != "" {
			out[f] = struct{}{}
		}
		for _, v := range n {
			collectFormats(v, out)
		}
	case []any:
		for _, v := range n {
			collectFormats(v, out)
		}
	}
}

// formatCheck checks a format with kin-openapi's registered validators,
// as kin-openapi's own JSON Schema validator does.
func formatCheck(format string) func(any) error {
	return func(v any) error {
		switch v := v.(type) {
		case string:
			if f, ok := openapi3.SchemaStringFormats[format]; ok {
				return f.Validate(v)
			}
		case json.Number:
			if n, err := v.Float64(); err == nil {
				return numberFormatCheck(format, n)
			}
		case float64:
			return numberFormatCheck(format, v)
		}
		return nil
	}
}

func numberFormatCheck(format string, v float64) error {
	if v == math.Trunc(v) && !math.IsInf(v, 0) {
		if f, ok := openapi3.SchemaIntegerFormats[format]; ok {
			return f.Validate(int64(v))
		}
	}
	if f, ok := openapi3.SchemaNumberFormats[format]; ok {
		return f.Validate(v)
	}
	return nil
}
