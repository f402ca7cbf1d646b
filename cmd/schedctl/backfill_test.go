package main

import (
	"testing"
	"time"
)

// TestBackfill: schedules backfill against the real server records one
// fire per past instant, a repeat creates nothing, and bad ranges and
// missing flags are refused.
func TestBackfill(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }
	created := decode[idOnly](t, tk("schedules", "create", "--name", "hourly", "--cron", "0 * * * *", "--target", s.consumer, "--json").ok(t))
	to := time.Now().UTC().Truncate(time.Hour)
	from := to.Add(-3 * time.Hour).Format(time.RFC3339)
	rng := []string{"schedules", "backfill", created.ID, "--from", from, "--to", to.Format(time.RFC3339)}
	tk(rng...).ok(t).has(t, `(?m)^instants\s+3$`, `(?m)^fires\s+3$`, `(?m)^existing\s+0$`, `(?m)^events\s+3$`)
	tk(rng...).ok(t).has(t, `(?m)^fires\s+0$`, `(?m)^existing\s+3$`)
	tk("fires", "ls", created.ID).ok(t).has(t, `(?m)\sbackfill\s`)
	tk(append(rng, "--max-fires", "2")...).fails(t, exitFail, `to: the range holds 3 fires, more than maxFires \(2\)`)
	tk("schedules", "backfill", created.ID, "--from", from).fails(t, exitUsage, `--from and --to are required`)
	tk("schedules", "backfill", created.ID, "--from", from, "--to", "tomorrow").fails(t, exitUsage, `--to "tomorrow": not an RFC 3339 time`)
}
