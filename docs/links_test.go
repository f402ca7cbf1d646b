package docs

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// notYet lists repository paths the documentation names that a parallel
// refactor creates. They are tolerated only while they do not exist; remove
// each entry once its path is in the tree.
var notYet = map[string]bool{
	"bin": true,
}

func TestLinks(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	mds, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mds {
		rel, _ := filepath.Rel(root, m)
		files = append(files, filepath.ToSlash(rel))
	}
	if len(files) < 2 {
		t.Fatalf("found only %v: is the test running in docs/?", files)
	}
	problems, pending := check(root, files, notYet)
	for _, p := range problems {
		t.Error(p)
	}
	for _, p := range pending {
		t.Logf("allowed although missing (see notYet): %s", p)
	}
}

// TestCheckFindsBrokenReferences runs the checker on a small tree with one
// good and one broken reference of each kind.
func TestCheckFindsBrokenReferences(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("store/embedded/event.go", "package embedded\n")
	write("scripts/test.sh", "#!/bin/sh\n")
	write("docs/api.md", "# API\n\n## Errors and limits\n\n### Walk-through (commands `actually` run)\n\n## Errors and limits\n")
	write("README.md", strings.Join([]string{
		"# Title",
		"## A 5-minute tour",
		"[ok](docs/api.md#errors-and-limits) [ok](docs/api.md#errors-and-limits-1)",
		"[ok](docs/api.md#walk-through-commands-actually-run) [ok](#a-5-minute-tour)",
		"[ok](store/embedded/) [ok](../shared/DESIGN.md) [ok](https://example.com/x)",
		"`store/embedded/event.go` `./scripts/test.sh` `go test ./store/...` `schedule/`",
		"`application/problem+json` `/v1/events/{id}` `data/admin.key`",
		"[bad file](docs/nothing.md) [bad anchor](docs/api.md#no-such-heading)",
		"[bad local](#nowhere) `store/embedded/gone.go` `scripts/chaos-long.sh`",
		"```sh",
		"./scripts/missing.sh --flag",
		"# a comment, not a heading",
		"```",
		"[bad after fence](#a-comment-not-a-heading)",
	}, "\n"))
	problems, pending := check(root, []string{"README.md", "docs/api.md"}, map[string]bool{"schedule": true})
	want := []string{
		"docs/nothing.md",
		"#no-such-heading",
		"#nowhere",
		"store/embedded/gone.go",
		"scripts/chaos-long.sh",
		"scripts/missing.sh",
		"#a-comment-not-a-heading",
	}
	if len(problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	for _, w := range want {
		found := false
		for _, p := range problems {
			if strings.Contains(p, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem reported for %s", w)
		}
	}
	if len(pending) != 1 || !strings.Contains(pending[0], "schedule") {
		t.Errorf("pending = %v, want the one allowed missing path schedule", pending)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Cron expressions, time zones and DST":     "cron-expressions-time-zones-and-dst",
		"Walk-through (commands actually run)":     "walk-through-commands-actually-run",
		"Limits (configurable in `master.Config`)": "limits-configurable-in-masterconfig",
		"The emitter: windows, misfires, overlap":  "the-emitter-windows-misfires-overlap",
		"A 5-minute tour":                          "a-5-minute-tour",
		"[Link](x.md) and *stress*":                "link-and-stress",
		"Lateness at 1,000/s":                      "lateness-at-1000s",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

var (
	linkRE    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	codeRE    = regexp.MustCompile("`([^`]+)`")
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	fenceRE   = regexp.MustCompile("^\\s*(```|~~~)")
	pathRE    = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.*-]+)*/?$`)
)

// doc is a Markdown file split into the lines outside and inside fenced
// code blocks.
type doc struct {
	prose, fenced []line
}

type line struct {
	n    int
	text string
}

func read(root, name string) (doc, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		return doc{}, err
	}
	var d doc
	in := false
	for i, l := range strings.Split(string(b), "\n") {
		if fenceRE.MatchString(l) {
			in = !in
			continue
		}
		if in {
			d.fenced = append(d.fenced, line{i + 1, l})
		} else {
			d.prose = append(d.prose, line{i + 1, l})
		}
	}
	return d, nil
}

// anchors returns the GitHub anchors of a document's headings.
func (d doc) anchors() map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range d.prose {
		m := headingRE.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// slug follows GitHub: the heading's rendered text, lower case, with
// everything but letters, digits, spaces, hyphens and underscores dropped and
// spaces turned into hyphens.
func slug(h string) string {
	h = linkRE.ReplaceAllStringFunc(h, func(s string) string { return s[1:strings.Index(s, "](")] })
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// check returns every reference in files (relative to root) that does not
// resolve, and the allowed missing paths that were referenced.
func check(root string, files []string, allowed map[string]bool) (problems, pending []string) {
	docs := map[string]doc{}
	load := func(name string) (doc, error) {
		if d, ok := docs[name]; ok {
			return d, nil
		}
		d, err := read(root, name)
		if err == nil {
			docs[name] = d
		}
		return d, err
	}
	top := map[string]bool{}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		top[e.Name()] = true
	}
	for p := range allowed {
		top[strings.SplitN(p, "/", 2)[0]] = true
	}
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
		return err == nil
	}
	pendingSet := map[string]bool{}
	// resolve reports a missing repository path p (clean, relative to root).
	resolve := func(where, ref, p string) {
		if exists(p) {
			return
		}
		for a := p; a != "." && a != ""; a = path.Dir(a) {
			if allowed[a] {
				pendingSet[p] = true
				return
			}
		}
		problems = append(problems, fmt.Sprintf("%s: %s: no such file or directory %s", where, ref, p))
	}
	// repoPath turns a word from inline code into a repository path, or "".
	repoPath := func(w string) string {
		w = strings.TrimPrefix(w, "./")
		w = strings.TrimRight(w, ".,;:)")
		w = strings.TrimSuffix(w, "/...")
		if w == "..." || !strings.Contains(w, "/") || !pathRE.MatchString(w) || strings.Contains(w, "*") {
			return ""
		}
		if !top[strings.SplitN(w, "/", 2)[0]] {
			return ""
		}
		return path.Clean(w)
	}
	for _, name := range files {
		d, err := load(name)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		dir := path.Dir(name)
		for _, l := range d.prose {
			where := fmt.Sprintf("%s:%d", name, l.n)
			text := l.text
			for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
				ref := m[1]
				if strings.Contains(ref, "://") || strings.HasPrefix(ref, "mailto:") {
					continue
				}
				target, anchor, _ := strings.Cut(ref, "#")
				file := name
				if target != "" {
					file = path.Clean(path.Join(dir, target))
					if file == ".." || strings.HasPrefix(file, "../") {
						continue // outside the repository
					}
					if !exists(file) {
						resolve(where, ref, file)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(file, ".md") {
					continue
				}
				td, err := load(file)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: %s: %v", where, ref, err))
					continue
				}
				if !td.anchors()[anchor] {
					problems = append(problems, fmt.Sprintf("%s: %s: no heading #%s in %s", where, ref, anchor, file))
				}
			}
			for _, m := range codeRE.FindAllStringSubmatch(linkRE.ReplaceAllString(text, ""), -1) {
				for _, w := range strings.Fields(m[1]) {
					if p := repoPath(w); p != "" {
						resolve(where, "`"+m[1]+"`", p)
					}
				}
			}
			// A link's text may be inline code too.
			for _, m := range linkRE.FindAllString(text, -1) {
				for _, c := range codeRE.FindAllStringSubmatch(m[:strings.Index(m, "](")], -1) {
					for _, w := range strings.Fields(c[1]) {
						if p := repoPath(w); p != "" {
							resolve(where, "`"+c[1]+"`", p)
						}
					}
				}
			}
		}
		for _, l := range d.fenced {
			for _, w := range strings.Fields(l.text) {
				if strings.HasPrefix(w, "./") {
					if p := repoPath(w); p != "" {
						resolve(fmt.Sprintf("%s:%d", name, l.n), w, p)
					}
				}
			}
		}
	}
	for p := range pendingSet {
		pending = append(pending, p)
	}
	sort.Strings(pending)
	return problems, pending
}
