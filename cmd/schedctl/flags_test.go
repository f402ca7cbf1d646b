package main

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDocsUseHelpFlags checks that docs/cli.md and the commands' help spell
// the same flags: every --flag the page names is a flag of some command,
// and every flag a command's help lists is on the page, as --flag.
func TestDocsUseHelpFlags(t *testing.T) {
	page, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?:^|[\s(\[|`+"`"+`])--([a-z][a-z-]*)`).FindAllStringSubmatch(string(page), -1) {
		documented[m[1]] = true
	}
	helpFlag := regexp.MustCompile(`(?m)^  (--?)([a-z][a-z-]*)\b`)
	inHelp := map[string]bool{}
	for _, c := range commands() {
		args := []string{c.group}
		if c.verb != "" {
			args = append(args, c.verb)
		}
		r := cli(t, "http://127.0.0.1:1", "", append(args, "-h")...)
		if r.code != exitOK {
			t.Fatalf("%v -h: exit %d\n%s", args, r.code, r.err)
		}
		for _, m := range helpFlag.FindAllStringSubmatch(r.err, -1) {
			dash, name := m[1], m[2]
			if len(name) == 1 {
				continue // -f, short for --file
			}
			if dash != "--" {
				t.Errorf("%v -h spells --%s as %s%s", args, name, dash, name)
			}
			inHelp[name] = true
			if !documented[name] {
				t.Errorf("%v -h lists --%s, which docs/cli.md does not name", args, name)
			}
		}
	}
	var unknown []string
	for name := range documented {
		if !inHelp[name] {
			unknown = append(unknown, "--"+name)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("docs/cli.md names flags no command has: %s", strings.Join(unknown, " "))
	}
}
