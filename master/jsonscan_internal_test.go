package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/api"
)

var (
	scanSeed  = flag.Uint64("master.scanseed", 1, "seed of TestScanBodyAgreesWithTokens")
	scanCases = flag.Int("master.scancases", 20000, "number of random bodies TestScanBodyAgreesWithTokens scans")
)

// TestScanBodyAgreesWithTokens checks scanBody, on jsontext, against
// scanTokens, the same checks on encoding/json's tokens, on random bodies: valid ones,
// ones with duplicated keys, invalid UTF-8, U+0000, escapes, data after the
// value, and byte-level mutations of all of these (syntax errors). Both
// must give the same answer (nil, or the same problem naming the same
// field). A failure prints the seed to rerun it with -master.scanseed.
func TestScanBodyAgreesWithTokens(t *testing.T) {
	r := rand.New(rand.NewPCG(*scanSeed, 0))
	for i := range *scanCases {
		var b strings.Builder
		genValue(r, &b, 0)
		body := []byte(b.String())
		if r.IntN(3) == 0 {
			body = mutate(r, body)
		}
		got, want := scanBody(body), scanTokens(body)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d of seed %d: body %q:\nscanBody   %v\nscanTokens %v", i, *scanSeed, body, got, want)
		}
	}
}

// TestScanBodyPassesRequestBodies checks that the bodies of the hot
// operations pass, and that what it refuses names the field.
func TestScanBodyPassesRequestBodies(t *testing.T) {
	const item = `{"name":"job-1","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":{"order":1,"tags":["a","b\u00e9\n"],"x":null,"y":true,"z":-1.5e3}}`
	batch := `{"items":[` + strings.Repeat(item+",", 99) + item + "]}\n"
	for _, body := range []string{item, batch, "", " \n", `[]`, `{}`, `"x"`} {
		if err := scanBody([]byte(body)); err != nil {
			t.Errorf("scanBody refused %.80q: %v", body, err)
		}
	}
	for _, tc := range []struct{ body, field string }{
		{`{"name":"a","name":"b"}`, "name"},
		{`{"items":[{"a":1},{"a":1,"b":{"c":1,"c":2}}]}`, "items.1.b.c"},
		{`{"a":"\u0000"}`, "a"},
		{"{\"a\":\"\xff\"}", "a"},
		{`{"a":1} {}`, "body"},
	} {
		err := scanBody([]byte(tc.body))
		p, ok := err.(*problem)
		if !ok || len(p.fields) != 1 || p.fields[0].Field != tc.field {
			t.Errorf("scanBody(%q) = %v, want a problem naming %q", tc.body, err, tc.field)
		}
	}
}

// manyKeys is how many keys make an object large in genValue (once the
// point where the hand scanner's duplicate check moved to a map).
const manyKeys = 32

// genValue writes a random JSON value, small enough to scan quickly, with
// the kinds of keys and strings scanBody looks at.
func genValue(r *rand.Rand, b *strings.Builder, depth int) {
	n := r.IntN(10)
	if depth > 4 {
		n = 5 + r.IntN(5)
	}
	switch n {
	case 0, 1:
		b.WriteByte('{')
		keys := r.IntN(6)
		if r.IntN(20) == 0 || depth == 0 && r.IntN(4) == 0 {
			keys = manyKeys + r.IntN(10) // the map path of the duplicate check
		}
		for i := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			space(r, b)
			if keys > manyKeys && i < manyKeys {
				// Distinct, so that a repeat comes on the map path.
				b.WriteString(`"k` + strconv.Itoa(i) + `"`)
			} else {
				genString(r, b, true, keys)
			}
			space(r, b)
			b.WriteByte(':')
			space(r, b)
			genValue(r, b, depth+1)
		}
		b.WriteByte('}')
	case 2, 3:
		b.WriteByte('[')
		for i := range r.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			space(r, b)
			genValue(r, b, depth+1)
			space(r, b)
		}
		b.WriteByte(']')
	case 4, 5, 6:
		genString(r, b, false, 0)
	case 7:
		b.WriteString(strconv.FormatFloat(r.NormFloat64()*1e3, 'g', -1, 64))
	case 8:
		b.WriteString(strconv.Itoa(r.IntN(2000) - 1000))
	default:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	}
	if depth == 0 && r.IntN(30) == 0 {
		b.WriteString([]string{" {}", "x", " 1", "\n"}[r.IntN(4)])
	}
}

// genString writes a string; keys come from a small set (so objects repeat
// them) sized by how many keys the object has.
func genString(r *rand.Rand, b *strings.Builder, key bool, keys int) {
	b.WriteByte('"')
	if key && r.IntN(8) != 0 {
		b.WriteString("k" + strconv.Itoa(r.IntN(keys*3+1)))
	} else {
		for range r.IntN(6) {
			switch r.IntN(60) {
			case 0:
				b.WriteString(`\u0000`)
			case 1:
				b.WriteString(`\n`)
			case 2:
				b.WriteString(`\u00e9`)
			case 3:
				b.WriteString(`\"`)
			case 4:
				b.WriteString("\xff") // invalid UTF-8
			case 5:
				b.WriteString("é€")
			case 6:
				b.WriteString(`\ud800`) // a lone surrogate: refused
			case 7:
				b.WriteString(`\ud83d\ude00`) // a pair: U+1F600
			case 8:
				b.WriteString(`\udc00\ud800`) // the halves the wrong way round
			default:
				b.WriteByte(byte('a' + r.IntN(26)))
			}
		}
	}
	b.WriteByte('"')
}

func space(r *rand.Rand, b *strings.Builder) {
	if r.IntN(4) == 0 {
		b.WriteString([]string{" ", "\n", "\t ", "\r\n"}[r.IntN(4)])
	}
}

// mutate changes a few bytes of body: deletes, duplicates or replaces them
// with JSON punctuation.
func mutate(r *rand.Rand, body []byte) []byte {
	out := append([]byte(nil), body...)
	for range 1 + r.IntN(3) {
		if len(out) == 0 {
			return out
		}
		i := r.IntN(len(out))
		switch r.IntN(3) {
		case 0:
			out = slices.Delete(out, i, i+1)
		case 1:
			out = slices.Insert(out, i, out[i])
		default:
			const punct = `{}[]":,\ 0ae`
			out[i] = punct[r.IntN(len(punct))]
		}
	}
	return out
}

// BenchmarkScanBody scans a batch body of 1,000 one-offs: jsontext against
// encoding/json's tokens.
//
//	go test -run '^$' -bench ScanBody ./master/
func BenchmarkScanBody(b *testing.B) {
	var body strings.Builder
	body.WriteString(`{"items":[`)
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString(`{"name":"job-` + strconv.Itoa(i) + `","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":{"order":` + strconv.Itoa(i) + `}}`)
	}
	body.WriteString(`]}`)
	raw := []byte(body.String())
	for _, bc := range []struct {
		name string
		scan func([]byte) error
	}{{"scanBody", scanBody}, {"scanTokens", scanTokens}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.scan(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// compareArrayMember reports whether batchItemsOf answered for body and,
// if so, how it disagrees with decoding body into a struct with a
// []json.RawMessage field.
func compareArrayMember(body []byte) (answered bool, problem string) {
	got, ok := batchItemsOf(body)
	if !ok {
		return false, ""
	}
	var env struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := decodeJSON(body, &env); err != nil || !reflect.DeepEqual(got, env.Items) {
		return true, fmt.Sprintf("body %q:\nbatchItemsOf %q\ndecoder          %q (%v)", body, got, env.Items, err)
	}
	return true, ""
}

// TestArrayMemberAgreesWithDecoder checks batchItemsOf against decoding the
// body into a struct with a []json.RawMessage field (what the batch handler
// did before): wherever batchItemsOf answers, the decoder gives the same
// elements. Batch bodies must get an answer.
func TestArrayMemberAgreesWithDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(*scanSeed, 1))
	answered := 0
	for i := range *scanCases / 4 {
		var b strings.Builder
		b.WriteString([]string{`{"items":[`, `{ "items" : [`, `{"items":`, `{"other":1,"items":[`, `{"it\u0065ms":[`}[r.IntN(5)])
		for j := range r.IntN(5) {
			if j > 0 {
				b.WriteString([]string{",", " , ", "\n,"}[r.IntN(3)])
			}
			genValue(r, &b, 1)
		}
		b.WriteString([]string{"]}", " ] }\n", "]", "],\"x\":2}", "]}x"}[r.IntN(5)])
		body := []byte(b.String())
		if r.IntN(4) == 0 {
			body = mutate(r, body)
		}
		ok, problem := compareArrayMember(body)
		if problem != "" {
			t.Fatalf("case %d of seed %d: %s", i, *scanSeed, problem)
		}
		if ok {
			answered++
		}
	}
	if answered < *scanCases/4/20 {
		t.Fatalf("batchItemsOf answered %d of %d bodies", answered, *scanCases/4)
	}
	const item = `{"name":"a","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://x.example.com/"}}`
	for _, body := range []string{`{"items":[]}`, `{"items":[` + item + `]}`, " {\n \"items\" : [ " + item + " ,\n" + item + " ] }\n"} {
		var env struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := decodeJSON([]byte(body), &env); err != nil {
			t.Fatal(err)
		}
		if got, ok := batchItemsOf([]byte(body)); !ok || !reflect.DeepEqual(got, env.Items) {
			t.Errorf("batchItemsOf(%q) = %q, %v; want %q", body, got, ok, env.Items)
		}
	}
}

// scanTokens is the oracle of scanBody: the same checks on encoding/json's
// tokens, tracking the path of every value. encoding/json takes invalid
// UTF-8, U+0000 and unpaired surrogate escapes (as U+FFFD) in its stride:
// the raw bytes of each string are checked.
func scanTokens(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	type frame struct {
		object  bool
		keys    map[string]bool
		wantKey bool   // object: the next string is a key
		key     string // object: the current member's key
		index   int    // array: the current element's index
	}
	var stack []*frame
	path := func(last string) string {
		parts := make([]string, 0, len(stack)+1)
		for _, f := range stack {
			switch {
			case f.object && !f.wantKey:
				parts = append(parts, f.key)
			case !f.object:
				parts = append(parts, strconv.Itoa(f.index))
			}
		}
		if last != "" {
			parts = append(parts, last)
		}
		return orBody(strings.Join(parts, "."))
	}
	// valueDone advances the enclosing container past one value.
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		if f := stack[len(stack)-1]; f.object {
			f.wantKey = true
		} else {
			f.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil // a syntax error: the validator names it
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, &frame{object: t == '{', keys: map[string]bool{}, wantKey: t == '{'})
			case '}', ']':
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			// The decoder replaces invalid UTF-8 with U+FFFD: check the raw bytes.
			raw := body[before:dec.InputOffset()]
			isKey := top != nil && top.object && top.wantKey
			field := path("")
			if isKey {
				field = path(t)
			}
			switch {
			case !utf8.Valid(raw):
				return badRequest(field+": not valid UTF-8", api.FieldProblem{Field: field, Reason: "not valid UTF-8"})
			case strings.ContainsRune(t, 0):
				return badRequest(field+": contains U+0000", api.FieldProblem{Field: field, Reason: "contains U+0000 (NUL)"})
			case loneSurrogate(raw):
				return badRequest(field+": contains an unpaired surrogate escape",
					api.FieldProblem{Field: field, Reason: "contains an unpaired UTF-16 surrogate escape (such as \\ud800)"})
			}
			if isKey {
				if top.keys[t] {
					return badRequest("duplicate key "+strconv.Quote(t)+" in "+path(""),
						api.FieldProblem{Field: field, Reason: "duplicate key " + strconv.Quote(t)})
				}
				top.keys[t] = true
				top.key, top.wantKey = t, false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
		if len(stack) == 0 {
			// Look past the value: only whitespace may follow.
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				return badRequest("the body has data after the JSON value",
					api.FieldProblem{Field: "body", Reason: "data after the JSON value"})
			}
			return nil
		}
	}
}

// loneSurrogate reports whether the JSON string text raw (with or without
// its quotes) has a \u escape of a UTF-16 surrogate that is not the first
// of a pair followed by the second: text that decodes to no character.
func loneSurrogate(raw []byte) bool {
	// hexAt returns the code unit of the \uXXXX escape at i, or -1.
	hexAt := func(i int) rune {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return -1
		}
		n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(n)
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r := hexAt(i)
		switch {
		case r < 0:
			i++ // another escape: skip the escaped byte
		case !utf16.IsSurrogate(r):
			i += 5
		case r >= 0xdc00: // a second half with no first
			return true
		default:
			if utf16.DecodeRune(r, hexAt(i+6)) == utf8.RuneError {
				return true
			}
			i += 11
		}
	}
	return false
}

// BenchmarkDecodeBatch decodes and checks a batch body of 1,000 one-offs
// as the batch endpoint does before compiling its items (scanBody, then
// decodeBatch), and reports the bytes allocated per byte of body.
//
//	go test -run '^$' -bench DecodeBatch -benchmem ./master/
func BenchmarkDecodeBatch(b *testing.B) {
	var body strings.Builder
	body.WriteString(`{"items":[`)
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString(`{"name":"job-` + strconv.Itoa(i) + `","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":{"order":` + strconv.Itoa(i) + `}}`)
	}
	body.WriteString(`]}`)
	raw := []byte(body.String())
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	for b.Loop() {
		if err := scanBody(raw); err != nil {
			b.Fatal(err)
		}
		if items, ok := decodeBatch(raw); !ok || len(items) != 1000 {
			b.Fatalf("decodeBatch: %d items, %v", len(items), ok)
		}
	}
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.TotalAlloc-before)/float64(b.N)/float64(len(raw)), "alloc-B/body-B")
}
