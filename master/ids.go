package master

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding"
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
)

// ID prefixes.
const (
	prefixSchedule = "sch_"
	prefixPolicy   = "pol_"
	prefixTenant   = "ten_"
	prefixKey      = "key_"
	prefixAPIKey   = "sk_"
)

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// orderedEncoding is idEncoding's alphabet in byte order, so that the
// text of two ids sorts as their bytes do.
var orderedEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// idSource makes the ids of new objects: prefix + 16 characters of the
// same alphabet as before from 10 bytes, the creation second (4 bytes) and
// a counter (6 bytes) that starts at a random value below 2^47 each new
// second and counts up. Ids made in one second therefore sort together and
// in order: the rows of a batch, and their fires and events (whose ids
// start with the schedule's), go into a few neighbouring pages of the
// store's B+trees rather than one page each, which is most of what a
// commit of random ids writes. Two instances (or a restart) in the same
// second collide only if their counters' ranges overlap: about n/2^46 for
// n ids a second.
type idSource struct {
	clock clockwork.Clock
	mu    sync.Mutex
	begun bool
	sec   uint32 // of the counter
	next  uint64
}

func (g *idSource) newID(prefix string) string {
	return g.newIDAt(prefix, g.clock.Now())
}

// newIDAt is newID at now, the time of the clock a caller read for many
// ids at once.
func (g *idSource) newIDAt(prefix string, now time.Time) string {
	sec, n := g.reserve(now, 1)
	return formatID(prefix, sec, n)
}

// newIDsAt returns n new ids at now, consecutive: a batch's rows go into
// the store's pages in one run even while other batches take ids, instead
// of interleaving with theirs (which leaves pages split half full).
func (g *idSource) newIDsAt(prefix string, now time.Time, n int) []string {
	sec, first := g.reserve(now, n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = formatID(prefix, sec, first+uint64(i))
	}
	return ids
}

// reserve takes n counter values of the second of now and returns the
// second and the first value. A second before the counter's (a batch
// begun before another's, or the clock set back) takes the counter's: ids
// never repeat a second's counter range, and sort in the order they are
// made.
func (g *idSource) reserve(now time.Time, n int) (sec uint32, first uint64) {
	sec = uint32(now.Unix())
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.begun || sec > g.sec {
		var r [8]byte
		_, _ = rand.Read(r[:])
		g.begun, g.sec, g.next = true, sec, binary.BigEndian.Uint64(r[:])>>17
	}
	first = g.next
	g.next += uint64(n)
	return g.sec, first
}

// formatID is the id of counter value n of second sec.
func formatID(prefix string, sec uint32, n uint64) string {
	var b [10]byte
	binary.BigEndian.PutUint32(b[:4], sec)
	binary.BigEndian.PutUint16(b[4:6], uint16(n>>32))
	binary.BigEndian.PutUint32(b[6:], uint32(n))
	return prefix + orderedEncoding.EncodeToString(b[:])
}

// idFor returns the deterministic id of the object created under an
// Idempotency-Key: concurrent retries of one create collide on it in the
// store instead of making duplicates.
func idFor(prefix, scope, key string) string {
	sum := sha256.Sum256([]byte("idempotency\x00" + scope + "\x00" + key))
	return prefix + idEncoding.EncodeToString(sum[:10])
}

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
