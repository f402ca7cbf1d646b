package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/api"
)

// maxBodyDepth is how deeply the objects and arrays of a request body may
// nest. What reads a body after checkDepth (scanTokens, the validators,
// encoding/json) does work in the depth for each value, so that without a
// bound a body costs time quadratic in its size.
const maxBodyDepth = 64

// checkDepth answers 400 for a body whose objects and arrays nest deeper
// than maxBodyDepth, in one pass over its bytes, before anything decodes
// it. Brackets inside strings do not count; a malformed body is left to
// the decoders, which stop at the first error.
func checkDepth(body []byte) error {
	depth, inString := 0, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > maxBodyDepth {
				reason := "objects and arrays nest deeper than " + strconv.Itoa(maxBodyDepth) + " levels"
				return badRequest("body: "+reason, api.FieldProblem{Field: "body", Reason: reason})
			}
		case '}', ']':
			depth = max(depth-1, 0) // a stray one: the decoders stop there
		}
	}
	return nil
}

// scanBody checks what encoding/json and the schema validator let through:
// a duplicated key (the last one would silently win), data after the JSON
// value, and strings (keys or values) with invalid UTF-8, U+0000 or an
// unpaired surrogate escape (which encoding/json turns into U+FFFD).
// Syntax errors inside the value are left to the validator, which reports
// them.
//
// A body that scanClean passes is answered at once; any other goes through
// scanTokens, which names the problem.
func scanBody(body []byte) error {
	if scanClean(body) {
		return nil
	}
	return scanTokens(body)
}

// scanTokens is scanBody token by token with encoding/json's decoder,
// tracking the path of every value: several times slower than scanClean,
// and only needed to name what is wrong.
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

// scanClean reports whether body is one JSON value, with nothing but white
// space after it, whose keys are all distinct within their object and whose
// strings are valid UTF-8 without U+0000 or an unpaired surrogate escape:
// a body scanTokens passes. false means "not known to be clean" (a problem,
// a syntax error, a key with an escape, nesting deeper than maxScanDepth);
// scanTokens then decides.
func scanClean(body []byte) bool {
	s := cleanScanner{b: body}
	s.space()
	if s.i == len(s.b) {
		return true // empty: nothing to check
	}
	if !s.value(0) {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

// maxScanDepth bounds the nesting scanClean follows; deeper bodies are
// left to scanTokens. The server refuses them before (checkDepth).
const maxScanDepth = 512

// cleanScanner is the state of scanClean: the body, the position, and the
// keys of the objects being read (keys[from:] for the innermost one).
type cleanScanner struct {
	b    []byte
	i    int
	keys [][]byte
}

func (s *cleanScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *cleanScanner) value(depth int) bool {
	if s.i >= len(s.b) || depth > maxScanDepth {
		return false
	}
	switch s.b[s.i] {
	case '{':
		return s.object(depth + 1)
	case '[':
		return s.array(depth + 1)
	case '"':
		_, _, ok := s.str()
		return ok
	}
	for _, lit := range []string{"true", "false", "null"} {
		if end := s.i + len(lit); end <= len(s.b) && string(s.b[s.i:end]) == lit {
			s.i += len(lit)
			return true
		}
	}
	return s.number()
}

// number reads a number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *cleanScanner) number() bool {
	digits := func() bool {
		start := s.i
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i > start
	}
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case !digits():
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !digits() {
			return false
		}
	}
	return true
}

// str reads a string at s.i: its raw content (between the quotes) and
// whether it has escapes. ok is false for invalid UTF-8, U+0000, a control
// character, a malformed escape or an unpaired surrogate escape.
func (s *cleanScanner) str() (raw []byte, escaped, ok bool) {
	s.i++ // the opening quote
	start := s.i
	ascii := true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped, (ascii || utf8.Valid(raw)) && !(escaped && loneSurrogate(raw))
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return nil, false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return nil, false, false
				}
				hex := s.b[s.i+2 : s.i+6]
				for _, h := range hex {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return nil, false, false
					}
				}
				if string(hex) == "0000" {
					return nil, false, false
				}
				s.i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			if c >= 0x80 {
				ascii = false
			}
			s.i++
		}
	}
	return nil, false, false
}

func (s *cleanScanner) array(depth int) bool {
	s.i++ // [
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth) {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// manyKeys is where an object's duplicate check moves from comparing with
// each earlier key to a map.
const manyKeys = 32

func (s *cleanScanner) object(depth int) bool {
	s.i++ // {
	from := len(s.keys)
	defer func() { s.keys = s.keys[:from] }()
	var seen map[string]bool
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		key, escaped, ok := s.str()
		if !ok || escaped {
			return false
		}
		switch {
		case seen != nil:
			if seen[string(key)] {
				return false
			}
			seen[string(key)] = true
		case len(s.keys)-from < manyKeys:
			for _, k := range s.keys[from:] {
				if bytes.Equal(k, key) {
					return false
				}
			}
			s.keys = append(s.keys, key)
		default:
			seen = make(map[string]bool, 2*manyKeys)
			for _, k := range s.keys[from:] {
				seen[string(k)] = true
			}
			if seen[string(key)] {
				return false
			}
			seen[string(key)] = true
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if !s.value(depth) {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			return true
		default:
			return false
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

// arrayMember returns the elements of the array that is the member name of
// the JSON object body, each as it appears in body, as decoding body into
// a struct with a []json.RawMessage field would, without the decoder's
// copies. ok is false when body is not an object with that one member, or
// not as plainly as scanClean reads it (a key with an escape, say): the
// caller decodes it.
func arrayMember(body []byte, name string) (elems []json.RawMessage, ok bool) {
	s := cleanScanner{b: body}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, false
	}
	s.i++
	found := false
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return nil, false
		}
		key, escaped, ok := s.str()
		if !ok || escaped {
			return nil, false
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return nil, false
		}
		s.i++
		s.space()
		// Another member is for the decoder, which may refuse it.
		if string(key) != name || found || s.i >= len(s.b) || s.b[s.i] != '[' {
			return nil, false
		}
		found = true
		if elems, ok = s.elements(); !ok {
			return nil, false
		}
		s.space()
		if s.i >= len(s.b) {
			return nil, false
		}
		if s.b[s.i] == '}' {
			s.i++
			break
		}
		if s.b[s.i] != ',' {
			return nil, false
		}
		s.i++
	}
	s.space()
	return elems, found && s.i == len(s.b)
}

// elements reads the array at s.i and returns its elements as they appear.
func (s *cleanScanner) elements() ([]json.RawMessage, bool) {
	s.i++ // [
	elems := []json.RawMessage{}
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return elems, true
	}
	for {
		start := s.i
		if !s.value(1) {
			return nil, false
		}
		elems = append(elems, s.b[start:s.i:s.i])
		s.space()
		if s.i >= len(s.b) {
			return nil, false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			return elems, true
		default:
			return nil, false
		}
	}
}
