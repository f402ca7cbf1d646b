package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPolicyLimitsAndBrake: --limits sends the limit schedule; a consumer
// key issued with consumer-key holds, reads the status and unholds, and
// is refused elsewhere.
func TestPolicyLimitsAndBrake(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }

	file := filepath.Join(t.TempDir(), "limits.json")
	rules := `[{"when": {"days": ["sat","sun"], "timezone": "Europe/Paris"}, "maxInFlight": 2},
		{"when": {"days": ["mon","tue","wed","thu","fri"], "timezone": "Europe/Paris"}, "maxInFlight": 2}]`
	if err := os.WriteFile(file, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := decode[struct {
		ID             string `json:"id"`
		EffectiveLimit int    `json:"effectiveLimit"`
		LimitSource    string `json:"limitSource"`
		Limits         []any  `json:"limits"`
	}](t, tk("policies", "create", "--name", "office", "--max-in-flight", "10", "--limits", file, "--json").ok(t))
	if len(pol.Limits) != 2 || pol.EffectiveLimit != 2 || (pol.LimitSource != "limits[0]" && pol.LimitSource != "limits[1]") {
		t.Fatalf("policies create --limits: %+v", pol)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"when": {"days": ["mon"], "timezone": "Mars/Base"}, "maxInFlight": 1}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tk("policies", "create", "--name", "bad", "--max-in-flight", "10", "--limits", bad).fails(t, exitFail, `limits\[0\]\.when\.timezone`)

	ck := decode[struct {
		Key string `json:"key"`
	}](t, tk("policies", "consumer-key", pol.ID, "--json").ok(t)).Key
	ct := func(args ...string) result { return cli(t, s.url, ck, args...) }
	ct("policies", "hold", pol.ID, "--max-in-flight", "0", "--for", "30m").ok(t).has(t, `(?m)^effective limit\s+0 \(hold\)$`)
	ct("policies", "hold", pol.ID, "--max-in-flight", "11", "--for", "30m").fails(t, exitFail, `maxInFlight`)
	ct("policies", "status", pol.ID).ok(t).has(t, `(?m)^hold\s+0 until `)
	ct("policies", "unhold", pol.ID).ok(t).has(t, `(?m)^effective limit\s+2 \(limits\[\d\]\)$`)
	ct("policies", "get", pol.ID).fails(t, exitFail, `consumer key`)
	tk("policies", "consumer-keys", pol.ID).ok(t).has(t, `ck_`)
}
