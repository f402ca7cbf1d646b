package main

import "testing"

// TestAuditCommands runs audit ls, schedules versions and policies
// forecast against the real server.
func TestAuditCommands(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }

	pol := decode[idOnly](t, tk("policies", "create", "--name", "feed", "--max-in-flight", "10", "--rate-per-second", "1", "--auto-release", "--json").ok(t)).ID
	sched := decode[idOnly](t, tk("schedules", "create", "--name", "nightly", "--cron", "0 6 * * *", "--tz", "UTC", "--count", "600",
		"--window", "5m", "--policy", pol, "--target", s.consumer, "--json").ok(t)).ID
	tk("schedules", "pause", sched, "--note", "maintenance").ok(t)
	tk("schedules", "versions", sched).ok(t).has(t, `(?m)^VERSION\s+STORED`, `(?m)^2\s+\S+\s+pauseSchedule\s+sk_\S+\s+paused\s+nightly\s+maintenance$`,
		`(?m)^1\s+\S+\s+createSchedule\s+sk_\S+\s+active\s+nightly\s+-$`)
	tk("audit", "ls", "--object", sched).ok(t).has(t, `(?m)^\S+\s+pauseSchedule\s+`+sched+`\s+2\s+sk_\S+\s+pausedAt: ∅ → .*maintenance$`)
	tk("audit", "ls", "--tenant", "ten_x").fails(t, exitFail, `tenantId: `)
	tk("schedules", "resume", sched).ok(t)
	tk("policies", "forecast", pol, "--from", "2030-01-01T05:59:00Z", "--to", "2030-01-01T07:00:00Z").ok(t).has(t,
		`(?m)^events\s+600$`, `(?m)^capacity\s+60\.0 events/minute$`, `(?m)^drained by\s+2030-01-01T06:10:00Z$`, `(?m)^missed deadlines\s+1$`,
		`(?m)^2030-01-01T06:00:00Z\s+600\s+540$`)
	tk("policies", "forecast", pol, "--from", "2030-01-01T00:00:00Z", "--to", "2030-01-09T00:00:00Z").fails(t, exitFail, `to: at most 7 days`)
}
