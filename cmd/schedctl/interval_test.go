package main

import (
	"testing"
)

// TestIntervalAndCronsFlags: --interval and repeated --crons on create and
// preview, against the real server, and the server's refusal of both.
func TestIntervalAndCronsFlags(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }

	iv := decode[struct {
		ID       string `json:"id"`
		Interval string `json:"interval"`
	}](t, tk("schedules", "create", "--name", "every90", "--interval", "90m", "--start-at", "2030-01-01T00:00:00Z",
		"--target", s.consumer, "--json").ok(t))
	if iv.Interval != "1h30m0s" {
		t.Fatalf("created interval %q", iv.Interval)
	}
	tk("schedules", "preview", iv.ID, "-n", "2").ok(t).has(t,
		`(?m)^fires every 90 minutes from 2030-01-01T00:00:00Z \(UTC\)$`,
		`(?m)^2030-01-01T01:30:00Z\s`)

	cr := decode[struct {
		ID    string   `json:"id"`
		Crons []string `json:"crons"`
	}](t, tk("schedules", "create", "--name", "two", "--crons", "0 9 * * 1-5", "--crons", "30 12 * * 6",
		"--target", s.consumer, "--json").ok(t))
	if len(cr.Crons) != 2 || cr.Crons[1] != "30 12 * * 6" {
		t.Fatalf("created crons %q", cr.Crons)
	}
	tk("schedules", "ls").ok(t).has(t, `0 9 \* \* 1-5 \| 30 12 \* \* 6`, `every 1h30m0s`)
	tk("schedules", "create", "--name", "both", "--cron", "0 3 * * *", "--interval", "1h", "--target", s.consumer).
		fails(t, exitFail, `interval: cron, fields, crons, interval, runAt and after are mutually exclusive`)
	tk("schedules", "create", "--name", "short", "--interval", "30s", "--target", s.consumer).
		fails(t, exitFail, `interval: must be at least 1m0s`)
}
