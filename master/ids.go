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
	prefixCalendar = "cal_"
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
// a counter (6 bytes) of the creating scope (a tenant, or the admin key):
// each scope that creates in a second gets a lane of its own (the first 2
// bytes, random and distinct among the scopes of that second) whose
// counter (4 bytes) starts at a random value below 2^31 and counts that
// scope's ids only. Ids made in one second therefore sort together and, in
// a scope, in order: the rows of a batch, and their fires and events
// (whose ids start with the schedule's), go into a few neighbouring pages
// of the store's B+trees rather than one page each, which is most of what
// a commit of random ids writes. And a tenant comparing its own ids learns
// nothing of what other tenants created meanwhile. Two instances (or a
// restart) in the same second collide only if they give two scopes the
// same lane and the counters' ranges overlap: about n/2^47 for n ids a
// second.
type idSource struct {
	clock clockwork.Clock
	mu    sync.Mutex
	sec   uint32                // the latest second ids were made in
	lanes map[string]*idCounter // by scope, in sec
	used  map[uint16]bool       // lanes given out in sec
}

// idCounter is a scope's lane and its next counter value.
type idCounter struct {
	lane uint16
	next uint32
}

func (g *idSource) newID(scope, prefix string) string {
	return g.newIDAt(scope, prefix, g.clock.Now())
}

// newIDAt is newID at now, the time of the clock a caller read for many
// ids at once.
func (g *idSource) newIDAt(scope, prefix string, now time.Time) string {
	sec, lane, n := g.reserve(scope, now, 1)
	return formatID(prefix, sec, lane, n)
}

// newIDsAt returns n new ids of scope at now, consecutive: a batch's rows
// go into the store's pages in one run even while other batches take ids,
// instead of interleaving with theirs (which leaves pages split half
// full).
func (g *idSource) newIDsAt(scope, prefix string, now time.Time, n int) []string {
	sec, lane, first := g.reserve(scope, now, n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = formatID(prefix, sec, lane, first+uint32(i))
	}
	return ids
}

// reserve takes n counter values of scope in the second of now and returns
// the second, the scope's lane and the first value. A second before the
// latest one ids were made in (a batch begun before another's, or the
// clock set back) takes the latest: ids never repeat a lane's range, and a
// scope's sort in the order they are made.
func (g *idSource) reserve(scope string, now time.Time, n int) (sec uint32, lane uint16, first uint32) {
	sec = uint32(now.Unix())
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lanes == nil || sec > g.sec {
		g.sec, g.lanes, g.used = sec, map[string]*idCounter{}, map[uint16]bool{}
	}
	c := g.lanes[scope]
	if c == nil {
		c = g.newCounter()
		g.lanes[scope] = c
	}
	first = c.next
	c.next += uint32(n)
	return g.sec, c.lane, first
}

// newCounter is a scope's counter in a new lane. Past 2^16 scopes in one
// second (a lane each) a scope shares the counter of another.
func (g *idSource) newCounter() *idCounter {
	var r [6]byte
	_, _ = rand.Read(r[:])
	lane := binary.BigEndian.Uint16(r[:2])
	if len(g.used) == 1<<16 {
		for _, c := range g.lanes {
			return c
		}
	}
	for g.used[lane] {
		lane++
	}
	g.used[lane] = true
	return &idCounter{lane: lane, next: binary.BigEndian.Uint32(r[2:]) >> 1}
}

// formatID is the id of counter value n of lane in second sec.
func formatID(prefix string, sec uint32, lane uint16, n uint32) string {
	var b [10]byte
	binary.BigEndian.PutUint32(b[:4], sec)
	binary.BigEndian.PutUint16(b[4:6], lane)
	binary.BigEndian.PutUint32(b[6:], n)
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
