package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestJitterPreviewTrigger: --jitter on create, schedules preview of a
// stored schedule and of a definition (flags or --file) that is not
// saved, and trigger with its own count, payload and note, against the
// real server.
func TestJitterPreviewTrigger(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }

	created := decode[struct {
		ID     string `json:"id"`
		Jitter string `json:"jitter"`
	}](t, tk("schedules", "create", "--name", "hourly", "--cron", "0 * * * *", "--target", s.consumer, "--jitter", "15m", "--json").ok(t))
	if created.Jitter != "15m0s" {
		t.Fatalf("created jitter %q", created.Jitter)
	}
	tk("schedules", "get", created.ID).ok(t).has(t, `(?m)^jitter\s+15m0s$`)
	tk("schedules", "preview", created.ID, "-n", "3").ok(t).has(t,
		`(?m)^fires at minute 0 past every hour every day \(UTC\)$`, `(?m)^jitter up to 15m0s$`,
		`(?m)^\S+:00:00Z\s+\S+\s+\S+ \(\+[0-9.ms]+\)\s+-$`)
	tk("schedules", "preview", created.ID, "--cron", "0 3 * * *").fails(t, exitUsage, `--cron: a stored schedule is previewed as it is`)

	// A definition: 02:30 does not exist in Berlin on 2027-03-28.
	flags := []string{"schedules", "preview", "-n", "3", "--name", "berlin", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
		"--start-at", "2027-03-27T00:00:00Z", "--target", s.consumer, "--jitter", "10m"}
	out := tk(flags...).ok(t).has(t, `(?m)^fires at 02:30 every day \(Europe/Berlin\)$`,
		`jitter up to 10m0s; the offsets are fixed when the schedule gets its id`,
		`(?m)^2027-03-28T01:00:00Z\s+2027-03-28T03:00:00\+02:00\s+-\s+skipped$`)
	file := filepath.Join(t.TempDir(), "spec.json")
	body := `{"name":"berlin","cron":"30 2 * * *","timezone":"Europe/Berlin","startAt":"2027-03-27T00:00:00Z","jitter":"10m","target":{"type":"http","url":"` + s.consumer + `"}}`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if again := tk("schedules", "preview", "-n", "3", "--file", file); again.ok(t).out != out.out {
		t.Fatalf("--file preview:\n%s\nflags preview:\n%s", again.out, out.out)
	}
	tk("schedules", "preview", "--name", "x", "--cron", "*/5 * * * *", "--target", s.consumer, "--jitter", "5m").fails(t, exitFail, `jitter: must be shorter than the smallest gap between fires \(5m0s`)
	if n := len(decode[struct {
		Items []idOnly `json:"items"`
	}](t, tk("schedules", "ls", "--json").ok(t)).Items); n != 1 {
		t.Fatalf("%d schedules after the previews, want 1", n)
	}

	fire := decode[struct {
		ID      string         `json:"id"`
		N       int            `json:"n"`
		Note    string         `json:"note"`
		Payload map[string]int `json:"payload"`
		Jitter  string         `json:"jitter"`
	}](t, tk("schedules", "trigger", created.ID, "--count", "3", "--payload", `{"invoice":42}`, "--note", "re-run invoice 42", "--json").ok(t))
	if fire.N != 3 || fire.Note != "re-run invoice 42" || fire.Payload["invoice"] != 42 || fire.Jitter != "" {
		t.Fatalf("triggered fire %+v", fire)
	}
	tk("fires", "get", fire.ID).ok(t).has(t, `(?m)^note: re-run invoice 42$`)
	tk("events", "ls", "--fire", fire.ID).ok(t).has(t, `(?s)`+fire.ID+`\.0.*`+fire.ID+`\.2`)
	tk("schedules", "trigger", created.ID, "--payload", "{").fails(t, exitUsage, `--payload is not JSON`)
}
