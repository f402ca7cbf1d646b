package layout

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// clean is an import graph that keeps every rule: the intended layout.
func clean() graph {
	return graph{
		"api":                           {},
		"cron":                          {},
		"model":                         {},
		"store":                         {"model"},
		"schedule":                      {"model", "cron"},
		"calendar":                      {"model", "cron", "schedule"},
		"delivery":                      {"model"},
		"emitter":                       {"calendar", "cron", "model", "store"},
		"finish":                        {"internal/logkey", "internal/startstop", "model", "store"},
		"internal/startstop":            {},
		"throttle":                      {"model", "store"},
		"handler":                       {"delivery", "model", "store", "throttle"},
		"master":                        {"api", "calendar", "create", "cron", "internal/guard", "internal/idempotency", "model", "schedule", "store"},
		"create":                        {"cron", "internal/guard", "internal/idempotency", "model", "schedule", "store"},
		"internal/idempotency":          {"model"},
		"app":                           {"emitter", "finish", "handler", "internal/guard", "master", "store", "throttle", "ui"},
		"internal/guard":                {"model"},
		"ui":                            {}, // the console: embedded files, no package of ours
		"cmd/schedbench":                {"app", "internal/testkit/chaoskit"},
		"cmd/ferretdb":                  {"store/mongo/mongotest"},
		"internal/testkit/chaoskit":     {"delivery"},
		"internal/testkit/sqstest":      {},
		"internal/testkit/smallfs":      {},
		"internal/testkit/throttletest": {"model", "store"},
		"store/mongo/mongotest":         {},
		"store/embedded":                {"model", "store"},
		"store/mongo":                   {"model", "store", "store/mongo/internal/doclock"},
		"store/mongo/internal/doclock":  {},
		"internal/testkit/hangstore":    {"model", "store"},
		"internal/testkit/testseed":     {},
		"store/storetest":               {"model", "store", "internal/testkit/sqstest"}, // helpers may use helpers
		"client":                        {},
		"consumer":                      {"client"},
		"consumer/sqsconsumer":          {"consumer"},
	}
}

func TestRulesPassTheIntendedLayout(t *testing.T) {
	g := clean()
	for _, r := range rules {
		if v, skip := r.check(g); len(v) > 0 || skip != "" {
			t.Errorf("%s on the intended layout: violations %q, skip %q", r.name, v, skip)
		}
	}
}

// violationCase breaks the intended layout one way.
type violationCase struct {
	rule   string
	name   string
	mutate func(graph)
	want   string // in the rule's violation
}

func edge(from, to string) func(graph) {
	return func(g graph) { g[from] = append(g[from], to) }
}

var violationCases = []violationCase{
	{"ModelImportsNothingOfOurs", "ModelImportsCron", edge("model", "cron"), "model imports cron"},
	{"ModelImportsNothingOfOurs", "ModelMissing", func(g graph) { delete(g, "model") }, "model does not exist"},
	{"StoreImportsOnlyModel", "StoreImportsDriver", edge("store", "store/embedded"), "store imports store/embedded"},
	{"ScheduleImportsOnlyModelAndCron", "ScheduleImportsStore", edge("schedule", "store"), "schedule imports store"},
	{"CalendarImportsOnlyDomainPackages", "CalendarImportsStore", edge("calendar", "store"), "calendar imports store"},
	{"GuardImportsOnlyModel", "GuardImportsStore", edge("internal/guard", "store"), "internal/guard imports store"},
	{"IdempotencyImportsOnlyModel", "ImportsStore", edge("internal/idempotency", "store"), "internal/idempotency imports store"},
	{"CreateImportsNoAdapter", "ImportsAPI", edge("create", "api"), "create imports api"},
	{"CreateImportsNoAdapter", "ImportsEmitter", edge("create", "emitter"), "create imports emitter"},
	{"FinishImportsOnlyModelAndStore", "ImportsEmitter", edge("finish", "emitter"), "finish imports emitter"},
	{"EmitterDoesNotImportHandler", "Directly", edge("emitter", "handler"), "emitter -> handler"},
	{"EmitterDoesNotImportHandler", "ThroughAnotherPackage", func(g graph) {
		g["emitter/hooks"] = []string{"handler"}
		g["emitter"] = append(g["emitter"], "emitter/hooks")
	}, "emitter -> emitter/hooks -> handler"},
	{"HandlerDoesNotImportEmitter", "Directly", edge("handler", "emitter"), "handler -> emitter"},
	{"MasterDoesNotImportHandler", "Directly", edge("master", "handler"), "master -> handler"},
	{"MasterDoesNotImportThrottle", "Directly", edge("master", "throttle"), "master -> throttle"},
	{"MasterDoesNotImportThrottle", "ThroughHandler", edge("master", "handler"), "master -> handler -> throttle"},
	{"EmbeddedDriverImportsOnlyModelAndStore", "ImportsSchedule", edge("store/embedded", "schedule"), "store/embedded imports schedule"},
	{"MongoDriverImportsOnlyModelAndStore", "ImportsCron", edge("store/mongo", "cron"), "store/mongo imports cron"},
	{"TestHelpersLiveInTestkit", "UnlistedKitPackage", func(g graph) { g["internal/testkit/newkit"] = nil }, "internal/testkit/newkit is under internal/testkit but not a listed test helper"},
	{"TestHelpersLiveInTestkit", "ListedHelperMissing", func(g graph) { delete(g, "internal/testkit/testseed") }, "listed test helper internal/testkit/testseed does not exist"},
	{"ProductionDoesNotImportTestHelpers", "AppImportsStoretest", edge("app", "store/storetest"), "app imports the test helper store/storetest"},
	{"ProductionDoesNotImportTestHelpers", "SchedbenchImportsSqstest", edge("cmd/schedbench", "internal/testkit/sqstest"), "cmd/schedbench imports the test helper internal/testkit/sqstest"},
	{"ConsumerImportsNoServerPackage", "ImportsDelivery", edge("consumer", "delivery"), "consumer imports delivery"},
	{"ConsumerImportsNoServerPackage", "ConsumerMissing", func(g graph) { delete(g, "consumer") }, "consumer does not exist"},
	{"SQSConsumerImportsNoServerPackage", "ImportsModel", edge("consumer/sqsconsumer", "model"), "consumer/sqsconsumer imports model"},
	{"ProductionDoesNotImportTestHelpers", "MasterImportsInternalThrottletest", edge("master", "internal/testkit/throttletest"), "master imports the test helper internal/testkit/throttletest"},
}

// TestRulesCatchViolations checks that each broken layout is reported by the
// rule about it, naming the offending import.
func TestRulesCatchViolations(t *testing.T) {
	for _, tc := range violationCases {
		t.Run(tc.rule+"/"+tc.name, func(t *testing.T) {
			g := clean()
			for k, v := range g {
				g[k] = slices.Clone(v)
			}
			tc.mutate(g)
			violations, skip := ruleNamed(t, tc.rule).check(g)
			if skip != "" {
				t.Fatalf("skipped (%s), want a violation containing %q", skip, tc.want)
			}
			if !slices.ContainsFunc(violations, func(v string) bool { return strings.Contains(v, tc.want) }) {
				t.Fatalf("violations %q, want one containing %q", violations, tc.want)
			}
		})
	}
}

// TestEveryRuleHasAViolationCase keeps a new rule from going unproven.
func TestEveryRuleHasAViolationCase(t *testing.T) {
	for _, r := range rules {
		if !slices.ContainsFunc(violationCases, func(c violationCase) bool { return c.rule == r.name }) {
			t.Errorf("rule %s has no case in violationCases", r.name)
		}
	}
}

func TestScheduleRuleSkipsUntilThePackageExists(t *testing.T) {
	g := clean()
	delete(g, "schedule")
	violations, skip := ruleNamed(t, "ScheduleImportsOnlyModelAndCron").check(g)
	if len(violations) > 0 || skip == "" {
		t.Fatalf("without package schedule: violations %q, skip %q; want a skip", violations, skip)
	}
}

func TestParse(t *testing.T) {
	const stream = `{"ImportPath": "example.com/m", "Imports": ["fmt", "example.com/m/model"]}
{"ImportPath": "example.com/m/model", "Imports": ["time", "example.com/mother"]}
{"ImportPath": "example.com/m/store", "Imports": ["example.com/m/model", "github.com/x/y"]}`
	g, err := parse("example.com/m", strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	want := graph{".": {"model"}, "model": {}, "store": {"model"}}
	if !maps.EqualFunc(g, want, slices.Equal) {
		t.Fatalf("parse = %v, want %v", g, want)
	}

	_, err = parse("example.com/m", strings.NewReader(`{"ImportPath": "example.com/m/bad", "Error": {"Err": "no Go files"}}`))
	if err == nil || !strings.Contains(err.Error(), "example.com/m/bad") {
		t.Fatalf("parse of a package with an error: %v, want an error naming it", err)
	}
}

func ruleNamed(t *testing.T, name string) rule {
	t.Helper()
	for _, r := range rules {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("no rule %s", name)
	return rule{}
}
