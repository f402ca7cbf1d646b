package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
)

// server is the real app on 127.0.0.1 over an embedded store in a temporary
// directory, with a consumer that accepts every delivery.
type server struct {
	url, adminKey, consumer string
}

func startServer(t *testing.T) *server {
	t.Helper()
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(consumer.Close)
	env := map[string]string{
		"SCHEDULER_LISTEN_ADDR":      "127.0.0.1:0",
		"SCHEDULER_DATA_DIR":         t.TempDir(),
		"SCHEDULER_HTTP_ALLOW_CIDRS": "127.0.0.1/32",
	}
	cfg, err := app.ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	a, err := app.New(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &server{url: "http://" + a.Addr(), adminKey: a.AdminKey(), consumer: consumer.URL + "/hook"}
}

// result is one run of the CLI.
type result struct {
	out, err string
	code     int
}

// cli runs schedctl in-process with SCHEDULER_URL and SCHEDULER_KEY set.
func cli(t *testing.T, url, key string, args ...string) result {
	t.Helper()
	env := map[string]string{"SCHEDULER_URL": url, "SCHEDULER_KEY": key}
	var out, errOut bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(""), &out, &errOut, func(k string) string { return env[k] })
	return result{out: out.String(), err: errOut.String(), code: code}
}

func (r result) ok(t *testing.T) result {
	t.Helper()
	if r.code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.out, r.err)
	}
	return r
}

// fails checks the exit status and that stderr matches each pattern.
func (r result) fails(t *testing.T, code int, patterns ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.out, r.err)
	}
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(r.err) {
			t.Fatalf("stderr does not match %q:\n%s", p, r.err)
		}
	}
}

// has checks that stdout matches each pattern.
func (r result) has(t *testing.T, patterns ...string) result {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(r.out) {
			t.Fatalf("stdout does not match %q:\n%s", p, r.out)
		}
	}
	return r
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.out), &v); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, r.out)
	}
	return v
}

type idOnly struct {
	ID string `json:"id"`
}

func TestOperatorWorkflow(t *testing.T) {
	s := startServer(t)
	admin := func(args ...string) result { return cli(t, s.url, s.adminKey, args...) }

	// Tenant and key, with the admin key.
	tenant := decode[idOnly](t, admin("tenants", "create", "--name", "acme", "--json").ok(t)).ID
	if tenant == "" {
		t.Fatal("tenants create --json: no id")
	}
	admin("tenants", "ls").ok(t).has(t, `(?m)^ID\s+NAME\s+WEIGHT\s+CREATED$`, `(?m)^`+tenant+`\s+acme\s+\d+\s`)
	admin("tenants", "get", tenant).ok(t).has(t, `(?m)^name\s+acme$`)
	admin("tenants", "patch", tenant, "--name", "acme-2", "--max-schedules", "5").ok(t).has(t, `(?m)^name\s+acme-2$`, `(?m)^maxSchedules\s+5$`)
	admin("tenants", "patch", tenant, "--weight", "0").fails(t, exitFail, `400`, `(?m)^  weight: `)
	admin("tenants", "create", "--name", "").fails(t, exitFail, `name: `)
	created := decode[struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}](t, admin("keys", "create", tenant, "--json").ok(t))
	if !strings.HasPrefix(created.Key, "sk_") {
		t.Fatalf("keys create: key %q", created.Key)
	}
	admin("keys", "ls", tenant).ok(t).has(t, `(?m)^`+created.ID+`\s+sk_\S+\s+\S+\s+-$`)

	tk := func(args ...string) result { return cli(t, s.url, created.Key, args...) }
	tk("tenants", "ls").fails(t, exitFail, `403`)

	// Policy and schedule, with the tenant key.
	policy := decode[idOnly](t, tk("policies", "create", "--name", "narrow", "--max-in-flight", "2", "--json").ok(t)).ID
	tk("policies", "get", policy).ok(t).has(t, `(?m)^`+policy+`\s+narrow\s+2\s+`)
	tk("policies", "ls").ok(t).has(t, `(?m)^ID\s+NAME\s+MAX IN FLIGHT`, policy)
	tk("policies", "create", "--name", "zero", "--max-in-flight", "0").fails(t, exitFail, `maxInFlight: `)

	bad := tk("schedules", "create", "--name", "bad", "--cron", "not a cron", "--target", s.consumer)
	bad.fails(t, exitFail, `^schedctl schedules create: 422 Invalid request\n  cron: \S`)
	if n := strings.Count(bad.err, "cron: "); n != 1 {
		t.Fatalf("the field is printed %d times:\n%s", n, bad.err)
	}
	tk("schedules", "create", "--name", "bad", "--cron", "0 3 * * *", "--tz", "Mars/Olympus", "--target", s.consumer).fails(t, exitFail, `timezone: `)
	sched := decode[idOnly](t, tk("schedules", "create", "--name", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Berlin",
		"--count", "3", "--target", s.consumer, "--policy", policy, "--payload", `{"job":"report"}`, "--json").ok(t)).ID
	tk("schedules", "get", sched).ok(t).has(t, `(?m)^name\s+nightly$`, `(?m)^state\s+active$`, `(?m)^when\s+0 3 \* \* \*$`, `(?m)^events\s+3$`)
	tk("schedules", "ls", "--state", "active").ok(t).has(t, `(?m)^`+sched+`\s+nightly\s+active\s+`)

	// Preview: table and JSON agree on three fire times at 03:00 Berlin time.
	tk("schedules", "preview", sched, "--n", "3").ok(t).has(t, `(?m)^UTC\s+LOCAL \(Europe/Berlin\)\s+LAUNCH\s+DST$`, `(?m)^\S+Z\s+\S+T03:00:00\+0[12]:00\s+-\s+-$`)
	preview := decode[struct {
		FireTimes []struct{ Local string } `json:"fireTimes"`
	}](t, tk("schedules", "preview", sched, "--n", "3", "--json").ok(t))
	if len(preview.FireTimes) != 3 {
		t.Fatalf("preview --n 3 --json: %d fire times", len(preview.FireTimes))
	}

	// Trigger, fires and events.
	fire := decode[idOnly](t, tk("schedules", "trigger", sched, "--json").ok(t)).ID
	tk("fires", "ls", sched).ok(t).has(t, `(?m)^ID\s+FIRE TIME\s+DECISION`, `(?m)^`+regexp.QuoteMeta(fire)+`\s+\S+\s+triggered\s+3\s`)
	tk("fires", "get", fire).ok(t).has(t, regexp.QuoteMeta(fire)+`\s+\S+\s+triggered\s+3\s`)
	events := decode[struct {
		Items []struct {
			ID     string `json:"id"`
			FireID string `json:"fireId"`
		} `json:"items"`
	}](t, tk("events", "ls", "--fire", fire, "--json").ok(t))
	if len(events.Items) != 3 {
		t.Fatalf("events ls --fire: %d events, want 3", len(events.Items))
	}
	for _, e := range events.Items {
		if e.FireID != fire {
			t.Fatalf("events ls --fire %s listed an event of %s", fire, e.FireID)
		}
	}
	tk("events", "ls", "--schedule", sched).ok(t).has(t, `(?m)^ID\s+STATUS\s+SCHEDULE`, regexp.QuoteMeta(events.Items[0].ID))
	tk("events", "get", events.Items[0].ID).ok(t).has(t, `(?m)^fire\s+`+regexp.QuoteMeta(fire)+`$`, `(?m)^index\s+\d of 3$`)
	tk("events", "ls", "--from", "yesterday").fails(t, exitUsage, `--from "yesterday": not an RFC 3339 time`)
	tk("events", "redrive").fails(t, exitUsage, `give an EVENT_ID, or select dead events with --fire, --schedule, --from, --to or --all`)
	tk("events", "redrive", "--schedule", sched).ok(t).has(t, `(?m)^redriven\s+0$`)
	tk("events", "redrive", events.Items[0].ID).fails(t, exitFail, `409`, `only dead or expired events`)
	tk("fires", "cancel", fire).ok(t).has(t, regexp.QuoteMeta(fire)+`\s+\S+\s+triggered\s+3\s`)

	// Summary: every event of the fire is counted once.
	sum := decode[struct {
		Counts    map[string]int `json:"counts"`
		Schedules struct{ Active, Paused int }
		Policies  []struct{ ID string }
	}](t, tk("summary", "--json").ok(t))
	total := 0
	for _, n := range sum.Counts {
		total += n
	}
	if total != 3 || sum.Schedules.Active != 1 || sum.Schedules.Paused != 0 || len(sum.Policies) != 1 || sum.Policies[0].ID != policy {
		t.Fatalf("summary --json: %+v", sum)
	}
	tk("summary").ok(t).has(t, `(?m)^WAITING\s+IN FLIGHT`, `(?m)^schedules\s+1 active, 0 paused$`, `(?m)^lateness\s+p50 `)

	// Pause, resume, pause again, then delete.
	tk("schedules", "pause", sched).ok(t).has(t, `(?m)^state\s+paused$`)
	tk("schedules", "resume", sched).ok(t).has(t, `(?m)^state\s+active$`)
	tk("schedules", "pause", sched).ok(t).has(t, `(?m)^state\s+paused$`)
	tk("summary").ok(t).has(t, `(?m)^schedules\s+0 active, 1 paused$`)

	// A body from a file, or from stdin; the server names a bad field.
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	body := `{"name":"from-file","runAt":"2099-01-02T03:04:05Z","target":{"type":"http","url":"` + s.consumer + `"}}`
	if err := os.WriteFile(good, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	tk("schedules", "create", "--file", good).ok(t).has(t, `(?m)^name\s+from-file$`, `(?m)^when\s+at 2099-01-02T03:04:05Z$`)
	var stdout, stderr bytes.Buffer
	env := map[string]string{"SCHEDULER_URL": s.url, "SCHEDULER_KEY": created.Key}
	code := run(t.Context(), []string{"schedules", "create", "--file", "-"}, strings.NewReader(`{"name":"x","colour":"red","target":{"type":"http","url":"`+s.consumer+`"}}`),
		&stdout, &stderr, func(k string) string { return env[k] })
	result{out: stdout.String(), err: stderr.String(), code: code}.fails(t, exitFail, `400`, `(?m)^  colour: `)
	listed := decode[struct{ Items []idOnly }](t, tk("schedules", "ls", "--name-prefix", "from-", "--json").ok(t))
	if len(listed.Items) != 1 {
		t.Fatalf("schedules ls --name-prefix from-: %+v", listed)
	}
	tk("schedules", "delete", listed.Items[0].ID).ok(t)
	tk("schedules", "delete", "").fails(t, exitUsage, `empty argument`)
	tk("schedules", "delete", sched).ok(t).has(t, `(?m)^deleted `+sched+`$`)
	tk("schedules", "get", sched).fails(t, exitFail, `404`)

	tk("policies", "delete", policy, "--json").ok(t).has(t, `"result":"deleted"`)
	admin("keys", "revoke", tenant, created.ID).ok(t).has(t, `(?m)^revoked `+created.ID+`$`)
	tk("summary").fails(t, exitFail, `401`)
}

func TestCommandLine(t *testing.T) {
	const url = "http://127.0.0.1:1" // nothing listens there
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"NoArguments", nil, exitUsage, `usage: schedctl <command>`},
		{"UnknownCommand", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"UnknownVerb", []string{"schedules", "explode"}, exitUsage, `unknown command "explode"`},
		{"GroupWithoutVerb", []string{"events"}, exitUsage, `(?m)^  redrive \[EVENT_ID\]`},
		{"MissingArgument", []string{"schedules", "get"}, exitUsage, `want 1 argument\(s\) \(SCHEDULE_ID\), got 0`},
		{"UnknownFlag", []string{"summary", "--colour"}, exitUsage, `flag provided but not defined: -colour`},
		{"RedriveIDAndFilter", []string{"events", "redrive", "ev_1", "--all"}, exitUsage, `not both`},
		{"FileAndFlags", []string{"schedules", "create", "--file", "x.json", "--name", "n"}, exitUsage, `--file and --name`},
		{"Unreachable", []string{"summary"}, exitFail, `connect|refused`},
		{"RedriveWithoutSelector", []string{"events", "redrive"}, exitUsage, `give an EVENT_ID, or select dead events with --fire`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli(t, url, "k", tc.args...).fails(t, tc.code, tc.err)
		})
	}
	t.Run("MissingKey", func(t *testing.T) {
		cli(t, url, "", "summary").fails(t, exitUsage, `^schedctl summary: no API key: give --key or set SCHEDULER_KEY`)
	})
	t.Run("Help", func(t *testing.T) {
		r := cli(t, url, "", "-h")
		if r.code != exitOK || !strings.Contains(r.err, "schedules preview [SCHEDULE_ID]") || !strings.Contains(r.err, "SCHEDULER_KEY") {
			t.Fatalf("schedctl -h: exit %d\n%s", r.code, r.err)
		}
		r = cli(t, url, "", "events", "ls", "-h")
		if r.code != exitOK || !strings.Contains(r.err, "usage: schedctl events ls") || !strings.Contains(r.err, "\n  --status string\n") {
			t.Fatalf("schedctl events ls -h: exit %d\n%s", r.code, r.err)
		}
		r = cli(t, url, "", "schedules", "create-batch", "-h")
		if r.code != exitOK || !strings.Contains(r.err, "\n  -f string\n") || !strings.Contains(r.err, "\n  --chunk int\n") {
			t.Fatalf("schedctl schedules create-batch -h: exit %d\n%s", r.code, r.err)
		}
	})
}
