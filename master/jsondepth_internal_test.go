package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// decodedDepth is the deepest nesting encoding/json's decoder reaches in
// body before its first error: what a decoder would work through.
func decodedDepth(body []byte) int {
	dec := json.NewDecoder(bytes.NewReader(body))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// checkDepthAgrees reports what is wrong with checkDepth's answer on body:
// it must refuse a valid body exactly when the decoder would nest deeper
// than maxBodyDepth, and never let a decoder nest deeper in another one.
func checkDepthAgrees(body []byte) string {
	err := checkDepth(body)
	depth := decodedDepth(body)
	var p *problem
	switch {
	case err != nil && (!errors.As(err, &p) || len(p.fields) != 1 || p.fields[0].Field != "body"):
		return "the refusal does not name the body: " + err.Error()
	case err == nil && depth > maxBodyDepth:
		return "passed, but a decoder nests " + itoa(depth) + " levels"
	case err != nil && json.Valid(body) && depth <= maxBodyDepth:
		return "refused a valid body of " + itoa(depth) + " levels"
	}
	return ""
}

func nested(open, close string, levels int, inner string) string {
	return strings.Repeat(open, levels) + inner + strings.Repeat(close, levels)
}

func TestCheckDepth(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		refuse bool
	}{
		{"Empty", "", false},
		{"Scalar", `1`, false},
		{"ObjectsAtTheLimit", nested(`{"a":`, `}`, maxBodyDepth, `1`), false},
		{"ObjectsOverTheLimit", nested(`{"a":`, `}`, maxBodyDepth+1, `1`), true},
		{"ArraysAtTheLimit", nested(`[`, `]`, maxBodyDepth, ``), false},
		{"ArraysOverTheLimit", nested(`[`, `]`, maxBodyDepth+1, ``), true},
		{"MixedOverTheLimit", nested(`[{"a":`, `}]`, maxBodyDepth/2+1, `1`), true},
		{"SiblingsDoNotAdd", `[` + strings.Repeat(nested(`[`, `]`, maxBodyDepth-1, ``)+",", 100) + `1]`, false},
		{"BracketsInStrings", `{"a":"` + strings.Repeat(`[{`, 1000) + `"}`, false},
		{"EscapedQuoteInString", `{"a":"\"` + strings.Repeat(`[`, 1000) + `"}`, false},
		{"EscapedBackslashEndsString", `["\\",` + nested(`[`, `]`, maxBodyDepth, ``) + `]`, true},
		{"StrayClosersDoNotLowerIt", strings.Repeat(`]`, 100) + nested(`[`, `]`, maxBodyDepth+1, ``), true},
		{"UnclosedDeep", strings.Repeat(`[`, 1<<20), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkDepth([]byte(tc.body))
			if (err != nil) != tc.refuse {
				t.Fatalf("checkDepth = %v, want refused %v", err, tc.refuse)
			}
			if problem := checkDepthAgrees([]byte(tc.body)); problem != "" {
				t.Fatal(problem)
			}
		})
	}
}

// TestScanBodyAtTheDepthLimit: a body checkDepth just passes is still
// answered by scanBody, which names a problem at the deepest level.
func TestScanBodyAtTheDepthLimit(t *testing.T) {
	body := []byte(nested(`{"a":`, `}`, maxBodyDepth, `"\u0000"`))
	if err := checkDepth(body); err != nil {
		t.Fatalf("checkDepth refused a body of %d levels: %v", maxBodyDepth, err)
	}
	want := "a" + strings.Repeat(".a", maxBodyDepth-1)
	var p *problem
	if err := scanBody(body); !errors.As(err, &p) || len(p.fields) != 1 || p.fields[0].Field != want {
		t.Fatalf("scanBody = %v, want the NUL named at %s", err, want)
	}
}

func TestLoneSurrogate(t *testing.T) {
	cases := []struct {
		raw  string
		lone bool
	}{
		{`"abc"`, false},
		{`"\u00e9\n\"\\"`, false},
		{`"\ud83d\ude00"`, false},        // a pair
		{`"x\uD83D\uDE00y"`, false},      // upper-case hex
		{`"\\ud800"`, false},             // an escaped backslash, then text
		{`"\ud800"`, true},               // first half alone
		{`"\udc00"`, true},               // second half alone
		{`"\ud800x"`, true},              // first half, then text
		{`"\ud800\n"`, true},             // first half, then another escape
		{`"\ud800\u0041"`, true},         // first half, then not a second
		{`"\ud800\ud800\udc00"`, true},   // two firsts, one second
		{`"\udc00\ud800"`, true},         // the wrong way round
		{`"\ud83d\ude00\ud83d"`, true},   // a pair, then a first
		{`"\\\ud800"`, true},             // an escaped backslash, then a lone half
		{`"\u12"`, false},                // malformed: the decoder's to refuse
		{`"\ud800\u12"`, true},           // first half, then a malformed escape
		{`"\ud83d\ude00\\ud800"`, false}, // text after an escaped backslash
		{`"\uD7FF\uE000"`, false},        // just outside the surrogates
		{`"\uDBFF\uDFFF"`, false},        // the last pair
		{`"\uDBFF\uDFFF\uDBFF"`, true},   // the last first half, alone
		{`"\u0000\ud800\udc00\u0020"`, false},
	}
	for _, tc := range cases {
		if got := loneSurrogate([]byte(tc.raw)); got != tc.lone {
			t.Errorf("loneSurrogate(%s) = %v, want %v", tc.raw, got, tc.lone)
		}
	}
}

// TestScanBodyRefusesLoneSurrogates: both scanners refuse a lone surrogate
// escape and name where it is, in keys and values alike.
func TestScanBodyRefusesLoneSurrogates(t *testing.T) {
	cases := []struct{ body, field string }{
		{`{"name":"x\ud800"}`, "name"},
		{`{"payload":{"a":["ok","\udc00"]}}`, "payload.a.1"},
		{`{"payload":{"k\ud800":1}}`, "payload.k\ufffd"},
		{`"\ud800"`, "body"},
	}
	for _, tc := range cases {
		for name, scan := range map[string]func([]byte) error{"scanBody": scanBody, "scanTokens": scanTokens} {
			var p *problem
			if err := scan([]byte(tc.body)); !errors.As(err, &p) || len(p.fields) != 1 || p.fields[0].Field != tc.field {
				t.Errorf("%s(%s) = %v, want a problem naming %q", name, tc.body, err, tc.field)
			}
		}
	}
	if err := scanBody([]byte(`{"name":"\ud83d\ude00"}`)); err != nil {
		t.Errorf("a surrogate pair refused: %v", err)
	}
}
