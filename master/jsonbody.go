package master

import (
	"bytes"
	encjson "encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/master/internal/batchanswer"
	"github.com/schedulerd/schedulerd/master/internal/jsoncheck"
)

// maxBodyDepth is how deeply the objects and arrays of a request body may
// nest. What reads a body after checkDepth (the validators, the decoders)
// does work in the depth for each value, so that without a bound a body
// costs time quadratic in its size.
const maxBodyDepth = 64

// checkDepth answers 400 for a body whose objects and arrays nest deeper
// than maxBodyDepth, before anything decodes it.
func checkDepth(body []byte) error {
	if !jsoncheck.TooDeep(body, maxBodyDepth) {
		return nil
	}
	reason := "objects and arrays nest deeper than " + strconv.Itoa(maxBodyDepth) + " levels"
	return badRequest("body: "+reason, api.FieldProblem{Field: "body", Reason: reason})
}

// scanBody checks what encoding/json and the schema validator let through:
// a duplicated key (the last one would silently win), data after the JSON
// value, and strings (keys or values) with invalid UTF-8, U+0000 or an
// unpaired surrogate escape. jsontext refuses all of these but U+0000.
// Syntax errors inside the value are left to the validator, which reports
// them.
func scanBody(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if jsontext.Value(body).IsValid() {
		if bytes.Contains(body, []byte(`\u0000`)) {
			return stringProblem(body, -1)
		}
		return nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	_, err := dec.ReadValue()
	if err == nil {
		if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
			if p := stringProblem(body, -1); p != nil {
				return p
			}
			return badRequest("the body has data after the JSON value",
				api.FieldProblem{Field: "body", Reason: "data after the JSON value"})
		}
		return nil
	}
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return nil
	}
	// The first problem in the body's order: a string with U+0000 before
	// the one jsontext refused, or that one if it was its text (not its
	// syntax) that jsontext refused.
	if p := stringProblem(body, se.ByteOffset); p != nil {
		return p
	}
	if errors.Is(err, jsontext.ErrDuplicateName) {
		name, in := se.JSONPointer.LastToken(), pointerField(se.JSONPointer.Parent())
		field := pointerField(se.JSONPointer)
		if name == "" {
			field = in // the object, rather than a field ending in "."
		}
		return badRequest("duplicate key "+strconv.Quote(name)+" in "+in,
			api.FieldProblem{Field: field, Reason: "duplicate key " + strconv.Quote(name)})
	}
	return nil // a syntax error: the validator names it
}

// stringProblem names the first string of body's first value (a key or a
// value) that contains U+0000 and ends before offset bad (-1: anywhere),
// or the string that holds the byte at bad if jsontext refused it there
// for invalid UTF-8 or an unpaired surrogate escape. nil if there is
// neither.
func stringProblem(body []byte, bad int64) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	for {
		before := dec.InputOffset()
		if bad >= 0 && before >= bad {
			return nil
		}
		tok, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		if tok.Kind() == '"' {
			field := pointerField(dec.StackPointer())
			inBad := bad > before && bad < dec.InputOffset()
			switch {
			case inBad && !utf8.Valid(body[before:dec.InputOffset()]):
				return badRequest(field+": not valid UTF-8", api.FieldProblem{Field: field, Reason: "not valid UTF-8"})
			case strings.ContainsRune(tok.String(), 0):
				return badRequest(field+": contains U+0000", api.FieldProblem{Field: field, Reason: "contains U+0000 (NUL)"})
			case inBad:
				if lone, ok := surrogateEscape(body[bad:]); ok && lone {
					return badRequest(field+": contains an unpaired surrogate escape",
						api.FieldProblem{Field: field, Reason: "contains an unpaired UTF-16 surrogate escape (such as \\ud800)"})
				}
				return nil
			}
		}
		if dec.StackDepth() == 0 {
			return nil // the end of the first value
		}
	}
}

// surrogateEscape reports whether b starts with a \u escape of half a
// UTF-16 surrogate pair, where jsontext stops at one that is unpaired.
func surrogateEscape(b []byte) (lone, ok bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return false, false
	}
	n, err := strconv.ParseUint(string(b[2:6]), 16, 16)
	return utf16.IsSurrogate(rune(n)), err == nil
}

// pointerField writes the JSON Pointer p as the API names fields:
// "items.3.cron" ("body" for the whole body).
func pointerField(p jsontext.Pointer) string {
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, tok)
	}
	return orBody(strings.Join(parts, "."))
}

// Schedule bodies are validated and decoded once: decodeBatchItem and
// decodeScheduleCreate decode a body into its Go type and check there what
// its schema (ScheduleBatchItem, ScheduleCreate) says, instead of decoding
// it a second time, untyped, for the schema validator. Like bodySchema they
// only ever accept: a body they accept is one the schema accepts, and any
// other goes through the validator, whose answers (the 400s and their field
// names) stay the ones the client gets, and through decodeJSON.

// errNull and errNotDateTime refuse what the decoder would take and the
// schema does not: a null (no property is nullable; the decoder would
// take it for an absent member) and an instant outside the schema's
// date-time format (time.Parse accepts more).
var (
	errNull        = errors.New("null")
	errNotDateTime = errors.New("not a date-time")
)

// unmarshalDateTime decodes an instant the schema's date-time format
// accepts as encoding/json decodes a time.Time.
func unmarshalDateTime(dec *jsontext.Decoder, t *time.Time) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if len(v) < 2 || v[0] != '"' || !jsoncheck.DateTime(v[1:len(v)-1]) {
		return errNotDateTime
	}
	return t.UnmarshalJSON(v)
}

// refuseNull refuses a null anywhere but inside a payload (a raw value).
func refuseNull(dec *jsontext.Decoder, _ any) error {
	if dec.PeekKind() == 'n' {
		return errNull
	}
	return json.SkipFunc
}

var (
	// createOptions decode a schedule body without a null in it: members
	// the Go type has, in the case it spells them.
	createOptions = json.JoinOptions(json.RejectUnknownMembers(true),
		json.WithUnmarshalers(json.UnmarshalFromFunc(unmarshalDateTime)))
	// createOptionsNull are createOptions for a body with "null" in it.
	createOptionsNull = json.JoinOptions(json.RejectUnknownMembers(true),
		json.WithUnmarshalers(json.JoinUnmarshalers(json.UnmarshalFromFunc(refuseNull), json.UnmarshalFromFunc(unmarshalDateTime))))
)

// decodeStrict decodes raw into v with createOptions; false if it refused.
func decodeStrict(raw []byte, v any) bool {
	opts := createOptions
	if bytes.Contains(raw, []byte("null")) {
		opts = createOptionsNull
	}
	return json.Unmarshal(raw, v, opts) == nil
}

// decodeBatch decodes a batch body that scanBody passed and reports
// whether all its items are valid for the schema, in one pass: false means
// "not known to be valid", and the items are then validated one by one.
func decodeBatch(raw []byte) ([]api.ScheduleBatchItem, bool) {
	var env api.ScheduleBatchCreate
	if !decodeStrict(raw, &env) {
		return nil, false
	}
	for i := range env.Items {
		if !validItem(&env.Items[i]) {
			return nil, false
		}
	}
	return env.Items, true
}

// validItem checks what the decoder does not of a batch item.
func validItem(in *api.ScheduleBatchItem) bool {
	// minLength 1, maxLength 255 characters: bytes bound characters
	// however the validator counts them.
	if in.IdempotencyKey != nil && (*in.IdempotencyKey == "" || len(*in.IdempotencyKey) > 255) {
		return false
	}
	return validCreate(in.Name, in.Target, in.EventCount, in.MaxAttempts, in.Overlap, in.Misfire)
}

// decodeScheduleCreate is decodeBatchItem for the body of createSchedule.
func decodeScheduleCreate(raw []byte, in *api.ScheduleCreate) bool {
	*in = api.ScheduleCreate{}
	if !decodeStrict(raw, in) {
		return false
	}
	return validCreate(in.Name, in.Target, in.EventCount, in.MaxAttempts, in.Overlap, in.Misfire)
}

// validCreate checks the decoded members that carry a bound, an enum or
// are required (the decoder leaves a missing one zero).
func validCreate(name string, target api.Target, eventCount, maxAttempts *int, overlap *api.Overlap, misfire *api.Misfire) bool {
	switch {
	case name == "",
		target.Type != api.Http && target.Type != api.Sqs && target.Type != api.HttpBatch,
		eventCount != nil && *eventCount < 1,
		maxAttempts != nil && (*maxAttempts < 1 || *maxAttempts > 100),
		overlap != nil && *overlap != api.OverlapAllow && *overlap != api.OverlapSkip && *overlap != api.OverlapCancel,
		misfire != nil && *misfire != api.MisfireFireOnce && *misfire != api.MisfireFireAll && *misfire != api.MisfireSkip:
		return false
	}
	return true
}

// batchItemsOf returns the items of a batch body that is an object of one
// member, items, an array; ok is false for any other body (the caller
// decodes it, or refuses it, with its errors).
func batchItemsOf(raw []byte) (items []encjson.RawMessage, ok bool) {
	var env struct {
		Items []encjson.RawMessage `json:"items"`
	}
	if json.Unmarshal(raw, &env, json.RejectUnknownMembers(true)) != nil || env.Items == nil {
		return nil, false
	}
	return env.Items, true
}

// writeBatchResult answers a batch with out, the bytes c.JSON would write
// (see batchanswer). The buffer goes back to pool once written (the
// response copies it), so that a batch's half-megabyte answer does not add
// to the garbage. A pretty printed answer is left to c.JSON.
func writeBatchResult(c echo.Context, out *api.ScheduleBatchResult, pool *sync.Pool) error {
	if _, pretty := c.QueryParams()["pretty"]; pretty || c.Echo().Debug {
		return c.JSON(http.StatusOK, out)
	}
	bp, _ := pool.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b, err := batchanswer.AppendBatchResult(slices.Grow((*bp)[:0], 512*len(out.Items)+64), out)
	if err != nil {
		return err
	}
	err = c.JSONBlob(http.StatusOK, append(b, '\n'))
	if cap(b) <= maxPooledAnswer {
		*bp = b[:0]
		pool.Put(bp)
	}
	return err
}

// maxPooledAnswer bounds the buffers writeBatchResult keeps: an answer of
// 1,000 schedules with long strings is not held for the next batch.
const maxPooledAnswer = 1 << 20
