package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestConsoleAudit drives a schedule's versions and the audit page in a
// real headless Chromium: a schedule created, renamed and paused through
// the API shows three versions, each with what changed and who stored it,
// and the audit page (reached from the schedule) lists the rename with
// its before and after.
func TestConsoleAudit(t *testing.T) {
	chromePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startApp(t, ctx, t.TempDir())
	_, key := e.tenant("acme")
	var sched struct{ ID string }
	e.must(http.MethodPost, "/v1/schedules", key, map[string]any{"name": "nightly", "cron": "0 3 * * *", "timezone": "UTC",
		"target": map[string]any{"type": "http", "url": "http://127.0.0.1:9/hook"}}, &sched)
	e.must(http.MethodPatch, "/v1/schedules/"+sched.ID, key, map[string]any{"name": "nightly-report"}, nil)
	e.must(http.MethodPost, "/v1/schedules/"+sched.ID+"/pause", key, map[string]any{"note": "db maintenance"}, nil)
	b := newBrowser(t, ctx)

	b.run(t, "sign in",
		chromedp.Navigate(e.base+"/ui"),
		chromedp.WaitVisible(`body[data-page="signin"] input[type=password]`),
		chromedp.SendKeys(`input[type=password]`, key+kb.Enter),
		chromedp.WaitVisible(`body[data-page="schedules"] #schedule-rows`))
	b.run(t, "open the schedule",
		chromedp.Navigate(e.base+"/ui/#/schedules/"+sched.ID),
		chromedp.WaitVisible(`#version-rows tr[data-version="1"]`))
	checkLabels(t, b, "schedule with versions")
	rows := get(t, b, "read the versions", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#version-rows tr")].map((tr) => [...tr.cells].map((td) => td.textContent).join("|"))`))
	if len(rows) != 3 {
		t.Fatalf("version rows %q, want 3", rows)
	}
	for i, want := range [][]string{{"3 (current)", "pauseSchedule by sk_", "paused", "state", "db maintenance"},
		{"2", "updateSchedule by sk_", "|name|"}, {"1", "createSchedule by sk_", "first kept version"}} {
		for _, w := range want {
			if !strings.Contains(rows[i], w) {
				t.Errorf("version row %d %q lacks %q", i, rows[i], w)
			}
		}
	}

	b.run(t, "open its audit records",
		chromedp.Click(fmt.Sprintf(`a[href="#/audit?objectId=%s"]`, sched.ID)),
		chromedp.WaitVisible(`body[data-page="audit"] #audit-rows tr[data-action="updateSchedule"]`))
	checkLabels(t, b, "audit")
	diff := get(t, b, "read the rename", chromedp.Text(`#audit-rows tr[data-action="updateSchedule"] td.diff`))
	if diff != `name: "nightly" → "nightly-report"` {
		t.Errorf("rename shown as %q", diff)
	}
	n := get(t, b, "count the records", chromedp.Evaluate[int](`document.querySelectorAll("#audit-rows tr").length`))
	if n != 3 {
		t.Errorf("%d audit rows for the schedule, want 3", n)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}
