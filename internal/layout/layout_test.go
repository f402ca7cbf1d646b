package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// graph maps each package of the module, by its path inside the module
// ("store/mongo"), to the packages of the module its non-test files import.
// Test files are left out: tests may import anything.
type graph map[string][]string

// testHelpers are packages that exist only for tests.
var testHelpers = []string{
	"store/storetest",
	"store/mongo/mongotest",
	"internal/testkit/chaoskit",
	"internal/testkit/hangstore",
	"internal/testkit/smallfs",
	"internal/testkit/sqstest",
	"internal/testkit/testseed",
	"internal/testkit/throttletest",
}

// helperUsers are the production packages allowed to import a test helper.
var helperUsers = map[string][]string{
	// The benchmark tool drives a deployment with the chaos tests' client
	// and recording consumer.
	"cmd/schedbench": {"internal/testkit/chaoskit"},
	// FerretDB as a process of its own, started by the chaos tests; it is
	// the same embedded FerretDB the driver tests run in process.
	"cmd/ferretdb": {"store/mongo/mongotest"},
}

// rule checks g. It returns the violations found, or a reason to skip when
// the package it is about does not exist (yet).
type rule struct {
	name  string
	check func(g graph) (violations []string, skip string)
}

var rules = []rule{
	{"ModelImportsNothingOfOurs", onlyImports("model", false)},
	{"StoreImportsOnlyModel", onlyImports("store", false, "model")},
	{"EmbeddedDriverImportsOnlyModelAndStore", onlyImports("store/embedded", false, "model", "store")},
	{"MongoDriverImportsOnlyModelAndStore", onlyImports("store/mongo", false, "model", "store", "store/mongo/internal/doclock")},
	{"TestHelpersLiveInTestkit", helpersInTestkit},
	{"ScheduleImportsOnlyModelAndCron", onlyImports("schedule", true, "model", "cron")},
	{"CalendarImportsOnlyDomainPackages", onlyImports("calendar", true, "model", "cron", "schedule")},
	{"GuardImportsOnlyModel", onlyImports("internal/guard", false, "model")},
	{"IdempotencyImportsOnlyModel", onlyImports("internal/idempotency", false, "model")},
	// The create use case knows no HTTP, no driver and no emitter: those
	// are its caller and its ports.
	{"CreateImportsNoAdapter", onlyImports("create", false, "model", "store", "schedule", "cron", "internal/guard", "internal/idempotency")},
	// The finisher reaches the emitter and the store through its ports.
	{"FinishImportsOnlyModelAndStore", onlyImports("finish", false, "model", "store", "internal/logkey", "internal/startstop")},
	{"EmitterDoesNotImportHandler", neverReaches("emitter", "handler")},
	{"HandlerDoesNotImportEmitter", neverReaches("handler", "emitter")},
	{"MasterDoesNotImportHandler", neverReaches("master", "handler")},
	{"MasterDoesNotImportThrottle", neverReaches("master", "throttle")},
	{"ProductionDoesNotImportTestHelpers", noTestHelpers},
	// The consumer library is imported by other teams' services: it may
	// depend on the API's types, never on the server.
	{"ConsumerImportsNoServerPackage", onlyImports("consumer", false, "client")},
	{"SQSConsumerImportsNoServerPackage", onlyImports("consumer/sqsconsumer", false, "consumer", "client")},
}

// TestImportRules checks the rules against the module as it is.
func TestImportRules(t *testing.T) {
	g := load(t)
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			violations, skip := r.check(g)
			if skip != "" {
				t.Skip(skip)
			}
			for _, v := range violations {
				t.Error(v)
			}
		})
	}
}

// onlyImports: pkg imports no package of ours but allowed. An optional
// package that does not exist is skipped; a required one that does not
// exist is a violation, so that a rename cannot make the rule pass.
func onlyImports(pkg string, optional bool, allowed ...string) func(graph) ([]string, string) {
	return func(g graph) ([]string, string) {
		imports, ok := g[pkg]
		if !ok {
			if optional {
				return nil, fmt.Sprintf("package %s does not exist", pkg)
			}
			return []string{fmt.Sprintf("package %s does not exist", pkg)}, ""
		}
		var out []string
		for _, imp := range imports {
			if !slices.Contains(allowed, imp) {
				out = append(out, fmt.Sprintf("%s imports %s; it may import only %v of ours", pkg, imp, allowed))
			}
		}
		return out, ""
	}
}

// neverReaches: from does not import to, directly or through other
// packages of ours (a wrapper in between would defeat the rule).
func neverReaches(from, to string) func(graph) ([]string, string) {
	return func(g graph) ([]string, string) {
		if _, ok := g[from]; !ok {
			return []string{fmt.Sprintf("package %s does not exist", from)}, ""
		}
		if path := importPath(g, from, to); path != nil {
			return []string{fmt.Sprintf("%s imports %s: %s", from, to, strings.Join(path, " -> "))}, ""
		}
		return nil, ""
	}
}

// importPath returns a chain of imports from one package to another, or
// nil if there is none.
func importPath(g graph, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g[p] {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = p
			if imp == to {
				var path []string
				for q := to; q != ""; q = prev[q] {
					path = append([]string{q}, path...)
				}
				return path
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

// helpersInTestkit: every test helper of internal/ is under
// internal/testkit/, and every package there is listed in testHelpers, so
// that the production import rule covers it.
func helpersInTestkit(g graph) ([]string, string) {
	var out []string
	for _, pkg := range sortedKeys(g) {
		inKit := strings.HasPrefix(pkg, "internal/testkit/")
		listed := slices.Contains(testHelpers, pkg)
		switch {
		case inKit && !listed:
			out = append(out, fmt.Sprintf("%s is under internal/testkit but not a listed test helper", pkg))
		case listed && strings.HasPrefix(pkg, "internal/") && !inKit:
			out = append(out, fmt.Sprintf("the test helper %s is not under internal/testkit", pkg))
		}
	}
	for _, h := range testHelpers {
		if _, ok := g[h]; !ok {
			out = append(out, fmt.Sprintf("listed test helper %s does not exist", h))
		}
	}
	return out, ""
}

// noTestHelpers: no production package imports a test helper, except the
// uses listed in helperUsers. Helpers may import each other.
func noTestHelpers(g graph) ([]string, string) {
	var out []string
	for _, pkg := range sortedKeys(g) {
		if slices.Contains(testHelpers, pkg) {
			continue
		}
		for _, imp := range g[pkg] {
			if slices.Contains(testHelpers, imp) && !slices.Contains(helperUsers[pkg], imp) {
				out = append(out, fmt.Sprintf("%s imports the test helper %s outside its tests", pkg, imp))
			}
		}
	}
	return out, ""
}

func sortedKeys(g graph) []string {
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// load builds the graph of the module this test is in from `go list`.
func load(t *testing.T) graph {
	t.Helper()
	out, err := goCmd("", "list", "-m", "-f", "{{.Path}} {{.Dir}}")
	if err != nil {
		t.Fatal(err)
	}
	module, dir, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok {
		t.Fatalf("go list -m printed %q, want \"PATH DIR\"", out)
	}
	out, err = goCmd(dir, "list", "-e", "-json=ImportPath,Imports,Error", "./...")
	if err != nil {
		t.Fatal(err)
	}
	g, err := parse(module, bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// parse reads the JSON stream of `go list -json` and keeps the packages
// and imports of module.
func parse(module string, r io.Reader) (graph, error) {
	ours := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		return strings.CutPrefix(p, module+"/")
	}
	g := graph{}
	dec := json.NewDecoder(r)
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkg, ok := ours(p.ImportPath)
		if !ok {
			continue
		}
		imports := []string{}
		for _, imp := range p.Imports {
			if rel, ok := ours(imp); ok {
				imports = append(imports, rel)
			}
		}
		g[pkg] = imports
	}
	if len(g) == 0 {
		return nil, fmt.Errorf("go list found no packages of %s", module)
	}
	return g, nil
}

func goCmd(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
