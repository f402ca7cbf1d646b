package app_test

import (
	"net/http"
	"testing"
)

// TestDenyCIDRsRefuseTargetsOnSave checks the wiring of the SSRF rule: the
// deny list the deliverer is given also refuses, on save, a target whose
// host is an address literal inside it.
func TestDenyCIDRsRefuseTargetsOnSave(t *testing.T) {
	env := map[string]string{
		"SCHEDULER_HTTP_DENY_CIDRS": "127.0.0.0/8",
	}
	a, call := runApp(t, env)
	key := tenantKey(a, call)
	schedule := func(url string) map[string]any {
		return map[string]any{"name": "s", "cron": "0 3 * * *", "target": map[string]any{"type": "http", "url": url}}
	}

	p := call(http.MethodPost, key, "/v1/schedules", schedule("http://127.1:8080/hook"), http.StatusUnprocessableEntity)
	errs, _ := p["errors"].([]any)
	if len(errs) != 1 || errs[0].(map[string]any)["field"] != "target.url" {
		t.Fatalf("problem %v does not name target.url alone", p)
	}
	call(http.MethodPost, key, "/v1/schedules", schedule("http://10.0.0.1:8080/hook"), http.StatusCreated)
}
