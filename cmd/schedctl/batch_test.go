package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tenantKey creates a tenant with a key on s and returns the key.
func tenantKey(t *testing.T, s *server) string {
	t.Helper()
	tenant := decode[idOnly](t, cli(t, s.url, s.adminKey, "tenants", "create", "--name", "batch", "--json").ok(t)).ID
	return decode[struct {
		Key string `json:"key"`
	}](t, cli(t, s.url, s.adminKey, "keys", "create", tenant, "--json").ok(t)).Key
}

// cliStdin is cli with stdin.
func cliStdin(t *testing.T, url, key, stdin string, args ...string) result {
	t.Helper()
	env := map[string]string{"SCHEDULER_URL": url, "SCHEDULER_KEY": key}
	var out, errOut bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(stdin), &out, &errOut, func(k string) string { return env[k] })
	return result{out: out.String(), err: errOut.String(), code: code}
}

func TestSchedulesCreateBatch(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	item := func(name string) string {
		return `{"name":"` + name + `","runAt":"2099-01-02T03:04:05Z","target":{"type":"http","url":"` + s.consumer + `"}}`
	}
	count := func(prefix string) int {
		t.Helper()
		return len(decode[struct{ Items []idOnly }](t, cli(t, s.url, key, "schedules", "ls", "--name-prefix", prefix, "--json").ok(t)).Items)
	}

	t.Run("NDJSONInChunksWithBadItems", func(t *testing.T) {
		in := strings.Join([]string{
			item("nd-0"),
			item("nd-1"),
			`{"name":"nd-2","cron":"not a cron","target":{"type":"http","url":"` + s.consumer + `"}}`,
			item("nd-3"),
			`{"name":"nd-4","colour":"red","runAt":"2099-01-02T03:04:05Z","target":{"type":"http","url":"` + s.consumer + `"}}`,
		}, "\n") + "\n"
		r := cliStdin(t, s.url, key, in, "schedules", "create-batch", "-f", "-", "--chunk", "2")
		r.fails(t, exitFail, `2 of 5 items failed`)
		r.has(t, `(?m)^INDEX\s+STATUS\s+ID\s+NAME OR PROBLEM$`,
			`(?m)^0\s+201\s+sch_\S+\s+nd-0$`, `(?m)^1\s+201\s+sch_\S+\s+nd-1$`,
			`(?m)^2\s+422\s+-\s+cron: \S`, `(?m)^3\s+201\s+sch_\S+\s+nd-3$`,
			`(?m)^4\s+400\s+-\s+colour: unknown field$`, `(?m)^created 3, replayed 0, failed 2$`)
		if n := count("nd-"); n != 3 {
			t.Fatalf("%d schedules named nd-*, want 3", n)
		}
	})

	t.Run("ArrayFileJSON", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "items.json")
		body := "[\n " + item("arr-0") + ",\n " + item("arr-1") + ",\n " +
			`{"name":"arr-2","cron":"0 3 * * *","timezone":"Mars/Olympus","target":{"type":"http","url":"` + s.consumer + `"}}` + "\n]\n"
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		r := cli(t, s.url, key, "schedules", "create-batch", "--file", file, "--chunk", "2", "--json")
		r.fails(t, exitFail, `1 of 3 items failed`)
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		if len(lines) != 3 {
			t.Fatalf("--json: %d lines, want one per item:\n%s", len(lines), r.out)
		}
		for i, want := range []string{`"status":201`, `"status":201`, `"status":422`} {
			res := decode[struct {
				Index  int `json:"index"`
				Status int `json:"status"`
			}](t, result{out: lines[i]})
			if res.Index != i || !strings.Contains(lines[i], want) {
				t.Fatalf("line %d: %s, want index %d and %s", i, lines[i], i, want)
			}
		}
		// The third item went in the second chunk as its item 0: the
		// problem names it by its index in the input.
		if !strings.Contains(lines[2], `"field":"items[2].timezone"`) || !strings.Contains(lines[2], `"detail":"items[2]: `) {
			t.Fatalf("the problem does not name items[2]: %s", lines[2])
		}
		if n := count("arr-"); n != 2 {
			t.Fatalf("%d schedules named arr-*, want 2", n)
		}
	})

	t.Run("AllCreated", func(t *testing.T) {
		var in strings.Builder
		in.WriteString("[")
		for i := range 25 {
			if i > 0 {
				in.WriteString(",")
			}
			in.WriteString(item(fmt.Sprintf("all-%02d", i)))
		}
		in.WriteString("]")
		cliStdin(t, s.url, key, in.String(), "schedules", "create-batch", "-f", "-", "--chunk", "10").ok(t).has(t, `(?m)^24\s+201\s+sch_\S+\s+all-24$`, `(?m)^created 25, replayed 0, failed 0$`)
		if n := count("all-"); n != 25 {
			t.Fatalf("%d schedules named all-*, want 25", n)
		}
	})

	t.Run("ItemOverTheBodyLimitFailsAlone", func(t *testing.T) {
		huge := `{"name":"big-1","runAt":"2099-01-02T03:04:05Z","target":{"type":"http","url":"` + s.consumer + `"},"payload":"` + strings.Repeat("x", 9<<20) + `"}`
		in := item("big-0") + "\n" + huge + "\n" + item("big-2") + "\n"
		r := cliStdin(t, s.url, key, in, "schedules", "create-batch", "-f", "-")
		r.fails(t, exitFail, `1 of 3 items failed`)
		r.has(t, `(?m)^0\s+201\s`, `(?m)^1\s+413\s+-\s`, `(?m)^2\s+201\s`)
		if n := count("big-"); n != 2 {
			t.Fatalf("%d schedules named big-*, want 2", n)
		}
	})

	t.Run("BadInputSendsNothingAfterIt", func(t *testing.T) {
		in := item("syn-0") + "\n" + item("syn-1") + "\n" + item("syn-2") + "\n{\"name\": oops}\n" + item("syn-4") + "\n"
		r := cliStdin(t, s.url, key, in, "schedules", "create-batch", "-f", "-", "--chunk", "2")
		r.fails(t, exitFail, `input item 3: not valid JSON`, `items from 2 on were not sent`)
		r.has(t, `(?m)^1\s+201\s`, `(?m)^created 2, replayed 0, failed 0$`)
		if n := count("syn-"); n != 2 {
			t.Fatalf("%d schedules named syn-*, want 2", n)
		}
	})

	t.Run("RepeatedFailuresCounted", func(t *testing.T) {
		var in strings.Builder
		for i := range 6 {
			fmt.Fprintf(&in, `{"name":"rep-%d","cron":"not a cron","target":{"type":"http","url":"%s"}}`+"\n", i, s.consumer)
		}
		in.WriteString(item("rep-ok") + "\n")
		in.WriteString(`{"name":"rep-tz","cron":"0 3 * * *","timezone":"Mars/Olympus","target":{"type":"http","url":"` + s.consumer + `"}}` + "\n")
		r := cliStdin(t, s.url, key, in.String(), "schedules", "create-batch", "-f", "-", "--chunk", "4")
		r.fails(t, exitFail, `7 of 8 items failed`)
		// One row for the first item of each distinct problem, then the
		// count of each.
		r.has(t, `(?m)^0\s+422\s+-\s+cron: \S`, `(?m)^6\s+201\s+sch_\S+\s+rep-ok$`, `(?m)^7\s+422\s+-\s+timezone: `,
			`(?m)^created 1, replayed 0, failed 7$`, `(?m)^FAILED\s+STATUS\s+FIRST INDEX\s+PROBLEM$`,
			`(?m)^6\s+422\s+0\s+cron: \S`, `(?m)^1\s+422\s+7\s+timezone: `)
		if n := strings.Count(r.out, "cron: "); n != 2 {
			t.Fatalf("the repeated problem is printed %d times, want its row and its count:\n%s", n, r.out)
		}
	})

	t.Run("IdempotentReplaysCountedApart", func(t *testing.T) {
		var in strings.Builder
		for i := range 3 {
			fmt.Fprintf(&in, `{"idempotencyKey":"idem-%d","name":"idem-%d","runAt":"2099-01-02T03:04:05Z","target":{"type":"http","url":"%s"}}`+"\n", i, i, s.consumer)
		}
		cliStdin(t, s.url, key, in.String(), "schedules", "create-batch", "-f", "-").ok(t).has(t, `(?m)^created 3, replayed 0, failed 0$`)
		cliStdin(t, s.url, key, in.String(), "schedules", "create-batch", "-f", "-").ok(t).has(t,
			`(?m)^0\s+201\s+sch_\S+\s+idem-0 \(replayed\)$`, `(?m)^created 0, replayed 3, failed 0$`)
		if n := count("idem-"); n != 3 {
			t.Fatalf("%d schedules named idem-*, want 3", n)
		}
	})

	t.Run("Usage", func(t *testing.T) {
		cli(t, s.url, key, "schedules", "create-batch").fails(t, exitUsage, `--file is required`)
		cli(t, s.url, key, "schedules", "create-batch", "-f", "-", "--chunk", "1001").fails(t, exitUsage, `--chunk 1001: want 1 to 1000`)
		cliStdin(t, s.url, key, " \n", "schedules", "create-batch", "-f", "-").fails(t, exitFail, `the input holds no items`)
		cli(t, s.url, key, "schedules", "create-batch", "-f", filepath.Join(t.TempDir(), "missing.json")).fails(t, exitFail, `no such file`)
	})
}

// TestSchedulesCreateBatchStopsAtQuota checks that a quota refusal ends the
// run after its chunk: the next chunks are not sent.
func TestSchedulesCreateBatchStopsAtQuota(t *testing.T) {
	s := startServer(t)
	tenant := decode[idOnly](t, cli(t, s.url, s.adminKey, "tenants", "create", "--name", "small", "--json").ok(t)).ID
	cli(t, s.url, s.adminKey, "tenants", "patch", tenant, "--max-schedules", "3").ok(t)
	key := decode[struct {
		Key string `json:"key"`
	}](t, cli(t, s.url, s.adminKey, "keys", "create", tenant, "--json").ok(t)).Key

	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, `{"name":"q-%d","runAt":"2099-01-02T03:04:05Z","target":{"type":"http","url":"%s"}}`+"\n", i, s.consumer)
	}
	r := cliStdin(t, s.url, key, in.String(), "schedules", "create-batch", "-f", "-", "--chunk", "2")
	r.fails(t, exitFail, `1 of 4 items failed; the tenant's maxSchedules quota refused items`, `the items from 4 on were not sent`)
	r.has(t, `(?m)^2\s+201\s`, `(?m)^3\s+422\s+-\s+maxSchedules: `, `(?m)^created 3, replayed 0, failed 1$`)
	if strings.Contains(r.out, "\n4 ") {
		t.Fatalf("item 4 was sent:\n%s", r.out)
	}

	// With --json the run stops the same way.
	r = cliStdin(t, s.url, key, in.String(), "schedules", "create-batch", "-f", "-", "--chunk", "2", "--json")
	r.fails(t, exitFail, `2 of 2 items failed; the tenant's maxSchedules quota`, `the items from 2 on were not sent`)
	if lines := strings.Split(strings.TrimSpace(r.out), "\n"); len(lines) != 2 {
		t.Fatalf("--json: %d lines, want the first chunk's 2:\n%s", len(lines), r.out)
	}
}
