package main

import (
	"strconv"
	"testing"
)

func TestLabelsAndBulkActions(t *testing.T) {
	s := startServer(t)
	admin := func(args ...string) result { return cli(t, s.url, s.adminKey, args...) }
	tenant := decode[idOnly](t, admin("tenants", "create", "--name", "acme", "--json").ok(t)).ID
	key := decode[struct {
		Key string `json:"key"`
	}](t, admin("keys", "create", tenant, "--json").ok(t)).Key
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }

	for i := range 3 {
		tk("schedules", "create", "--name", "bill-"+strconv.Itoa(i), "--cron", "0 3 * * *", "--target", s.consumer,
			"--label", "team=billing", "--label", "app.example.com/tier=gold").ok(t).has(t, `(?m)^labels\s+app.example.com/tier=gold,team=billing$`)
	}
	tk("schedules", "create", "--name", "ops", "--cron", "0 3 * * *", "--target", s.consumer, "--label", "team=ops").ok(t)
	tk("schedules", "create", "--name", "bad", "--cron", "0 3 * * *", "--target", s.consumer, "--label", "team").fails(t, exitUsage, `--label "team": want key=value`)
	tk("schedules", "create", "--name", "bad", "--cron", "0 3 * * *", "--target", s.consumer, "--label", "team=a b").fails(t, exitFail, `422`, `(?m)^  labels.team: `)

	listed := decode[struct{ Items []idOnly }](t, tk("schedules", "ls", "--label", "team=billing", "--label", "app.example.com/tier", "--json").ok(t))
	if len(listed.Items) != 3 {
		t.Fatalf("schedules ls --label team=billing: %d schedules, want 3", len(listed.Items))
	}
	tk("schedules", "ls", "--label", "team=ops").ok(t).has(t, `(?m)^\S+\s+ops\s+active\s.*team=ops$`)

	tk("schedules", "actions", "--action", "pause", "--label", "team=billing", "--note", "freeze").ok(t).has(t, `(?m)^matched\s+3$`, `(?m)^changed\s+3$`)
	tk("schedules", "actions", "--action", "pause", "--label", "team=billing").ok(t).has(t, `(?m)^matched\s+3$`, `(?m)^changed\s+0$`)
	paused := decode[struct{ Items []idOnly }](t, tk("schedules", "ls", "--state", "paused", "--json").ok(t))
	if len(paused.Items) != 3 {
		t.Fatalf("paused after the bulk pause: %d, want 3", len(paused.Items))
	}
	res := decode[struct {
		Matched, Changed int
	}](t, tk("schedules", "actions", "--action", "delete", "--id", paused.Items[0].ID, "--id", "sch_nope", "--json").ok(t))
	if res.Matched != 1 || res.Changed != 1 {
		t.Fatalf("actions delete --id --json: %+v", res)
	}
	tk("policies", "create", "--name", "p", "--max-in-flight", "1", "--label", "team=billing").ok(t).has(t, `(?m)^labels team=billing$`)
	tk("schedules", "actions", "--action", "pause").fails(t, exitFail, `400`, `(?m)^  selector: `)
	tk("schedules", "actions", "--label", "team=ops").fails(t, exitUsage, `--action is required`)
}
