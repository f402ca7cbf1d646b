package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/api"
)

// scanBody checks what encoding/json and the schema validator let through:
// a duplicated key (the last one would silently win), data after the JSON
// value, and strings (keys or values) with invalid UTF-8 or U+0000. Syntax
// errors inside the value are left to the validator, which reports them.
func scanBody(body []byte) error {
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
