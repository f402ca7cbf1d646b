package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const applyPolicy = `apiVersion: schedulerd.io/v1
kind: Policy
metadata:
  name: reports
  labels: {team: reports}
spec:
  maxInFlight: 5
  tokenTimeout: 10m
  limits:
    - when: {days: [mon, tue, wed, thu, fri], from: "09:00", to: "18:00", timezone: Europe/Berlin}
      maxInFlight: 2
`

const applyCalendar = `apiVersion: schedulerd.io/v1
kind: Calendar
metadata:
  name: de-holidays
spec:
  timezone: Europe/Berlin
  dates: [2027-12-25, 2027-12-26]
  ranges:
    - {from: "2027-12-31T18:00", to: "2028-01-01T06:00"}
  weekly:
    - days: [sat, sun]
`

// applySchedules is the schedules file with nightly's event count and the
// weekly schedule's document (empty for none).
func applySchedules(consumer, count, weekly string) string {
	return `apiVersion: schedulerd.io/v1
kind: Schedule
metadata:
  name: nightly
  labels: {team: reports}
spec:
  cron: "0 3 * * MON-FRI"
  timezone: Europe/Berlin
  eventCount: ` + count + `
  window: 60m
  jitter: 1m
  target: {type: http, url: "` + consumer + `"}
  payload: {job: report, formats: [pdf, csv]}
  policy: reports
  excludeCalendars: [de-holidays]
` + weekly
}

func applyWeekly(consumer string) string {
	return `---
apiVersion: schedulerd.io/v1
kind: Schedule
metadata:
  name: weekly
  labels: {team: reports}
spec:
  fields: {minute: "30", hour: "6", dayOfWeek: "SUN"}
  target: {type: http, url: "` + consumer + `"}
`
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// versions is every policy, calendar and schedule of the tenant with its
// version, by kind/name.
func versions(t *testing.T, tk func(...string) result) map[string]int64 {
	t.Helper()
	type item struct {
		Name    string `json:"name"`
		Version int64  `json:"version"`
	}
	out := map[string]int64{}
	for kind, args := range map[string][]string{
		"policy":   {"policies", "ls", "--json"},
		"calendar": {"calendars", "list", "--json"},
		"schedule": {"schedules", "ls", "--json"},
	} {
		for _, it := range decode[struct{ Items []item }](t, tk(args...).ok(t)).Items {
			out[kind+"/"+it.Name] = it.Version
		}
	}
	return out
}

// TestApply applies a directory against the real server: created, then
// unchanged on a second apply with no write, one update for one changed
// field, a dry run and diff that change nothing, and a prune that deletes
// only the schedule the files dropped within its selector.
func TestApply(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "policy.yaml"), applyPolicy)
	writeFile(t, filepath.Join(dir, "calendar.yml"), applyCalendar)
	writeFile(t, filepath.Join(dir, "schedules.yaml"), applySchedules(s.consumer, "3", applyWeekly(s.consumer)))
	writeFile(t, filepath.Join(dir, "notes.txt"), "not a manifest")
	spare := filepath.Join(dir, "spare.yaml")
	writeFile(t, spare, strings.ReplaceAll(applyPolicy, "name: reports", "name: spare"))

	tk("apply", "-f", dir).ok(t).has(t, `(?m)^policy/reports created$`, `(?m)^calendar/de-holidays created$`,
		`(?m)^schedule/nightly created$`, `(?m)^schedule/weekly created$`)

	// The names resolved to ids, and apply's label is set.
	pols := decode[struct{ Items []idOnly }](t, tk("policies", "ls", "--json").ok(t)).Items
	cals := decode[struct{ Items []idOnly }](t, tk("calendars", "list", "--json").ok(t)).Items
	nightly := decode[struct {
		Items []struct {
			ID               string            `json:"id"`
			PolicyID         string            `json:"policyId"`
			ExcludeCalendars []string          `json:"excludeCalendars"`
			Labels           map[string]string `json:"labels"`
		}
	}](t, tk("schedules", "ls", "--name-prefix", "nightly", "--json").ok(t)).Items
	if len(pols) != 2 || len(cals) != 1 || len(nightly) != 1 || nightly[0].PolicyID != pols[0].ID ||
		len(nightly[0].ExcludeCalendars) != 1 || nightly[0].ExcludeCalendars[0] != cals[0].ID ||
		!maps.Equal(nightly[0].Labels, map[string]string{"team": "reports", managedByKey: managedByValue}) {
		t.Fatalf("after apply: policies %+v, calendars %+v, nightly %+v", pols, cals, nightly)
	}

	// Applied twice: nothing changes, nothing is written.
	before := versions(t, tk)
	again := tk("apply", "-f", dir).ok(t)
	for _, ref := range []string{"policy/reports", "calendar/de-holidays", "schedule/nightly", "schedule/weekly"} {
		again.has(t, `(?m)^`+ref+` unchanged$`)
	}
	if strings.Contains(again.out, "created") || strings.Contains(again.out, "updated") {
		t.Fatalf("second apply changed something:\n%s", again.out)
	}
	if after := versions(t, tk); !maps.Equal(before, after) {
		t.Fatalf("second apply wrote: versions %v, then %v", before, after)
	}

	// Objects prune must leave alone: one with the selector's label that
	// apply did not write, and one apply wrote outside the selector.
	tk("schedules", "create", "--name", "handmade", "--cron", "0 4 * * *", "--target", s.consumer, "--label", "team=reports").ok(t)
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "billing.yaml"), strings.ReplaceAll(strings.ReplaceAll(applyWeekly(s.consumer), "weekly", "invoices"), "team: reports", "team: billing"))
	tk("apply", "-f", other).ok(t).has(t, `(?m)^schedule/invoices created$`)

	// One field changed, weekly and the spare policy dropped: a dry run and
	// diff print the update and the deletions and write nothing.
	writeFile(t, filepath.Join(dir, "schedules.yaml"), applySchedules(s.consumer, "5", ""))
	if err := os.Remove(spare); err != nil {
		t.Fatal(err)
	}
	before = versions(t, tk)
	for _, args := range [][]string{
		{"apply", "-f", dir, "--prune", "--selector", "team=reports", "--dry-run"},
		{"diff", "-f", dir, "--prune", "--selector", "team=reports"},
	} {
		r := tk(args...).ok(t).has(t, `(?m)^schedule/nightly would be updated$`, `(?m)^  eventCount:\s+3\s+->\s+5$`, `(?m)^schedule/weekly would be deleted$`, `(?m)^policy/spare would be deleted$`)
		if strings.Count(r.out, "would be") != 3 {
			t.Fatalf("%v: want one update and two deletions:\n%s", args, r.out)
		}
	}
	if after := versions(t, tk); !maps.Equal(before, after) {
		t.Fatalf("dry run wrote: versions %v, then %v", before, after)
	}

	r := tk("apply", "-f", dir, "--prune", "--selector", "team=reports").ok(t).has(t,
		`(?m)^schedule/nightly updated$`, `(?m)^  eventCount:\s+3\s+->\s+5$`, `(?m)^schedule/weekly deleted$`, `(?m)^policy/spare deleted$`,
		`(?m)^policy/reports unchanged$`, `(?m)^calendar/de-holidays unchanged$`)
	if strings.Count(r.out, "deleted") != 2 || len(regexp.MustCompile(`(?m)^  \S`).FindAllString(r.out, -1)) != 1 {
		t.Fatalf("apply --prune: want one field updated and two deletions:\n%s", r.out)
	}
	after := versions(t, tk)
	want := maps.Clone(before)
	want["schedule/nightly"]++
	delete(want, "schedule/weekly")
	delete(want, "policy/spare")
	if !maps.Equal(after, want) {
		t.Fatalf("after apply --prune: versions %v, want %v", after, want)
	}
	tk("apply", "-f", dir, "--prune", "--selector", "team=reports").ok(t).has(t, `(?m)^schedule/nightly unchanged$`)

	// Fields the file no longer sets are removed: the policy, the window.
	body := applySchedules(s.consumer, "5", "")
	body = strings.Replace(strings.Replace(body, "  policy: reports\n", "", 1), "  window: 60m\n", "", 1)
	writeFile(t, filepath.Join(dir, "schedules.yaml"), body)
	tk("apply", "-f", dir).ok(t).has(t, `(?m)^schedule/nightly updated$`, `(?m)^  window:\s+\S+\s+->\s+-$`, `(?m)^  policy:\s+reports\s+->\s+-$`)
	stored := decode[struct {
		Items []struct {
			PolicyID *string `json:"policyId"`
			Window   *string `json:"window"`
		}
	}](t, tk("schedules", "ls", "--name-prefix", "nightly", "--json").ok(t)).Items
	if len(stored) != 1 || stored[0].PolicyID != nil || stored[0].Window != nil {
		t.Fatalf("after removing policy and window: %+v", stored)
	}
	r = tk("apply", "-f", dir, "--json").ok(t).has(t, `(?m)^\{"kind":"Schedule","name":"nightly","id":"sch_\w+","action":"unchanged"\}$`)
	if strings.Count(r.out, `"action":"unchanged"`) != 3 {
		t.Fatalf("apply --json: want three objects unchanged:\n%s", r.out)
	}

	// A policy and a calendar are updated in the fields that changed only.
	writeFile(t, filepath.Join(dir, "policy.yaml"), strings.Replace(applyPolicy, "maxInFlight: 5", "maxInFlight: 7", 1))
	writeFile(t, filepath.Join(dir, "calendar.yml"), strings.Replace(applyCalendar, "2027-12-26]", "2027-12-26, 2027-12-31]", 1))
	before = versions(t, tk)
	r = tk("apply", "-f", dir).ok(t).has(t, `(?m)^policy/reports updated\n  maxInFlight:\s+5\s+->\s+7\n\S`,
		`(?m)^calendar/de-holidays updated\n  dates:\s+\["2027-12-25","2027-12-26"\]\s+->\s+\["2027-12-25","2027-12-26","2027-12-31"\]\n\S`,
		`(?m)^schedule/nightly unchanged$`)
	want = maps.Clone(before)
	want["policy/reports"]++
	want["calendar/de-holidays"]++
	if after := versions(t, tk); !maps.Equal(after, want) {
		t.Fatalf("after the policy and calendar changed: versions %v, want %v", after, want)
	}
	tk("apply", "-f", dir).ok(t).has(t, `(?m)^policy/reports unchanged$`, `(?m)^calendar/de-holidays unchanged$`)
}

// TestApplyRefusesBadDocuments checks that a bad document is refused
// before any change, naming its file, its index and the field.
func TestApplyRefusesBadDocuments(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }
	good := applyWeekly(s.consumer)
	for _, tc := range []struct {
		name, doc, err string
	}{
		{"UnknownKind", "apiVersion: schedulerd.io/v1\nkind: Job\nmetadata: {name: x}\nspec: {}\n", `kind: "Job" is not Policy, Calendar or Schedule`},
		{"UnknownAPIVersion", "apiVersion: schedulerd.io/v2\nkind: Policy\nmetadata: {name: x}\nspec: {maxInFlight: 1}\n", `apiVersion: "schedulerd.io/v2" is not schedulerd.io/v1`},
		{"UnknownSpecField", strings.Replace(good, "type: http,", "type: http, colour: red,", 1), `spec\.target\.colour: unknown field`},
		{"UnknownTopField", strings.Replace(good, "spec:", "status: {}\nspec:", 1), `status: unknown field`},
		{"UnknownMetadataField", strings.Replace(good, "  name: weekly", "  name: weekly\n  namespace: x", 1), `metadata\.namespace: unknown field`},
		{"NameInSpec", strings.Replace(good, "spec:\n", "spec:\n  name: other\n", 1), `spec\.name: unknown field`},
		{"LabelsInSpec", strings.Replace(strings.Replace(good, "  labels: {team: reports}\n", "", 1), "spec:\n", "spec:\n  labels: {a: b}\n", 1), `spec\.labels: unknown field \(metadata\.labels`},
		{"WrongType", strings.Replace(good, "spec:\n", "spec:\n  eventCount: many\n", 1), `spec\.eventCount: want a int`},
		{"NotAnEnumValue", strings.Replace(good, "spec:\n", "spec:\n  overlap: sometimes\n", 1), `spec\.overlap: value is not one of the allowed values`},
		{"OutOfBounds", strings.Replace(good, "spec:\n", "spec:\n  eventCount: 0\n", 1), `spec\.eventCount: number must be at least 1`},
		{"MissingRequired", "apiVersion: schedulerd.io/v1\nkind: Policy\nmetadata: {name: x}\nspec: {tokenTimeout: 1m}\n", `spec\.maxInFlight: property "maxInFlight" is missing`},
		{"UnknownPolicy", strings.Replace(good, "spec:\n", "spec:\n  policy: nonesuch\n", 1), `policy "nonesuch": the tenant has none`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := tenantKey(t, s) // a tenant of its own: nothing created before
			tk := func(args ...string) result { return cli(t, s.url, key, args...) }
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a.yaml"), applyPolicy)
			// The bad document is the second of its file, after a good one.
			writeFile(t, filepath.Join(dir, "b.yaml"), strings.ReplaceAll(good, "weekly", "first")+"---\n"+strings.TrimPrefix(tc.doc, "---\n"))
			tk("apply", "-f", dir).fails(t, exitFail, `b\.yaml, document 2 \(line \d+\): `+tc.err)
			if v := versions(t, tk); len(v) != 0 {
				t.Fatalf("a refused apply created %v", v)
			}
		})
	}
	t.Run("Stdin", func(t *testing.T) {
		cliStdin(t, s.url, key, "apiVersion: schedulerd.io/v1\nkind: Job\n", "apply", "-f", "-").fails(t, exitFail, `^schedctl apply: stdin, document 1 \(line 1\): kind: "Job"`)
	})
	t.Run("SameNameTwice", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a.yaml"), good)
		writeFile(t, filepath.Join(dir, "b.yaml"), applyPolicy+"---\n"+strings.TrimPrefix(good, "---\n"))
		tk("apply", "-f", dir).fails(t, exitFail, `b\.yaml, document 2 \(line \d+\): schedule/weekly is also defined in .*a\.yaml, document 1`)
		if v := versions(t, tk); len(v) != 0 {
			t.Fatalf("a refused apply created %v", v)
		}
	})
	tk("apply").fails(t, exitUsage, `-f is required`)
	tk("apply", "-f", "x.yaml", "--prune").fails(t, exitUsage, `--prune needs --selector`)
}
