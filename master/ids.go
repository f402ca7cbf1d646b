package master

import (
	"bytes"
	"crypto/rand"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
)

// prefixAPIKey starts a clear API key.
const prefixAPIKey = "sk_"

// newAPIKey returns a clear API key: "sk_" + base64url of 32 random bytes.
func newAPIKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return prefixAPIKey + base64.RawURLEncoding.EncodeToString(b[:])
}

// decodeBody decodes the request body kept by validateRequest into v,
// rejecting unknown fields (the spec already did; this is the second line).
func decodeBody(c echo.Context, v any) error {
	raw, _ := c.Get(ctxRawBody).([]byte)
	return decodeJSON(raw, v)
}

// decodeJSON decodes raw into v like decodeBody; field names in its errors
// are relative to raw.
func decodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var (
			te *json.UnmarshalTypeError
			pe *time.ParseError
		)
		switch {
		case errors.As(err, &pe):
			// A date the schema's pattern let through ("2026-02-31T00:00:00Z").
			field, reason := orBody(fieldHolding(raw, pe.Value)), formatReason("date-time")
			if msg := strings.TrimPrefix(pe.Message, ": "); msg != "" {
				reason += ": " + msg
			}
			return badRequest(field+": "+reason, api.FieldProblem{Field: field, Reason: reason})
		case errors.As(err, &te):
			// The schema let it through: 1.0 for an integer, say.
			field, reason := orBody(te.Field), "must be "+jsonKind(te.Type)
			return badRequest(field+" "+reason, api.FieldProblem{Field: field, Reason: reason})
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return badRequest(err.Error(), api.FieldProblem{Field: name, Reason: "unknown field"})
		}
		return badRequest("the body could not be decoded: "+err.Error(), api.FieldProblem{Field: "body", Reason: err.Error()})
	}
	return nil
}

// jsonKind names the JSON values that decode into a value of type t.
func jsonKind(t reflect.Type) string {
	text := reflect.TypeFor[encoding.TextUnmarshaler]()
	if t.Implements(text) || reflect.PointerTo(t).Implements(text) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another type"
}

// fieldHolding names the member of a JSON object (dotted for nested objects)
// whose value is the string v, or returns "" when none is.
func fieldHolding(raw []byte, v string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return ""
	}
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		var s string
		if json.Unmarshal(obj[name], &s) == nil && s == v {
			return name
		}
		if inner := fieldHolding(obj[name], v); inner != "" {
			return name + "." + inner
		}
	}
	return ""
}

// Cursors are opaque to clients: base64url of cursorMark and the position.
// The mark tells a cursor of this API from any other base64url text, which
// would otherwise decode to a position past every item (an empty page).
const cursorMark = "c1:"

func encodeCursor(pos string) *string {
	s := base64.RawURLEncoding.EncodeToString([]byte(cursorMark + pos))
	return &s
}

// decodeCursor returns the position of cur; "" for no cursor.
func decodeCursor(cur *string) (string, error) {
	if cur == nil || *cur == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(*cur)
	pos, ok := strings.CutPrefix(string(b), cursorMark)
	if err != nil || !ok || pos == "" || !utf8.Valid(b) {
		return "", badCursor()
	}
	return pos, nil
}

// badCursor is the answer of every list operation to a cursor it did not
// hand out.
func badCursor() error {
	return badRequest("cursor: not a cursor returned by this API", api.FieldProblem{Field: "cursor", Reason: "not a cursor returned by this API"})
}

func (s *Server) pageSize(limit *int) int {
	if limit == nil {
		return s.cfg.PageDefault
	}
	return *limit
}

func callerOf(c echo.Context) *caller {
	who, _ := c.Get(ctxCaller).(*caller)
	if who == nil {
		// authenticate runs before every tenant operation; reaching this is a bug.
		panic("master: no caller on an authenticated route")
	}
	return who
}
