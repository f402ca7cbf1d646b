package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAPIPathsExist checks that every "METHOD /v1/..." the documentation
// names is an operation of openapi.yaml: a path with its parameters in
// braces ({id}), or with example ids in their place.
func TestAPIPathsExist(t *testing.T) {
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// paths maps "/v1/schedules/{}" to its methods, read from the spec's
	// "  /path:" and "    get:" lines.
	paths := map[string]map[string]bool{}
	var cur map[string]bool
	inPaths := false
	for _, line := range strings.Split(string(spec), "\n") {
		switch {
		case line == "paths:":
			inPaths = true
		case inPaths && line != "" && !strings.HasPrefix(line, " "):
			inPaths = false
		case inPaths && strings.HasPrefix(line, "  /"):
			cur = map[string]bool{}
			paths[braces.ReplaceAllString(strings.TrimSuffix(strings.TrimSpace(line), ":"), "{}")] = cur
		case inPaths && cur != nil && method.MatchString(line):
			cur[strings.ToUpper(strings.Trim(strings.TrimSpace(line), ":"))] = true
		}
	}
	if len(paths) < 10 {
		t.Fatalf("read %d paths from openapi.yaml", len(paths))
	}
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mention.FindAllStringSubmatch(string(text), -1) {
			if !known(paths, m[1], strings.TrimRight(m[2], ".,)")) {
				t.Errorf("%s: %s %s is not an operation of openapi.yaml", f, m[1], m[2])
			}
		}
	}
}

var (
	braces  = regexp.MustCompile(`\{[^}]*\}`)
	method  = regexp.MustCompile(`^    (get|post|put|patch|delete):$`)
	mention = regexp.MustCompile(`\b(GET|POST|PUT|PATCH|DELETE) (/v1/[A-Za-z0-9_{}./:-]*)`)
)

// known reports whether path (with {params} or example ids) is one of
// paths with that method.
func known(paths map[string]map[string]bool, verb, path string) bool {
	path = braces.ReplaceAllString(path, "{}")
	if paths[path][verb] {
		return true
	}
	// Example ids in place of parameters: match segment by segment.
	segs := strings.Split(path, "/")
	for p, methods := range paths {
		if !methods[verb] {
			continue
		}
		ps := strings.Split(p, "/")
		if len(ps) != len(segs) {
			continue
		}
		ok := true
		for i := range ps {
			if ps[i] != segs[i] && ps[i] != "{}" && segs[i] != "{}" {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
