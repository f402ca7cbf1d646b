package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleLabelsAndBulkActions drives the schedules list in a real
// headless Chromium against schedulerd: create a schedule with labels in
// the form, filter the list by label, select schedules and pause, resume,
// trigger and delete them in bulk; the API confirms each change.
func TestConsoleLabelsAndBulkActions(t *testing.T) {
	chromePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startApp(t, ctx, t.TempDir())
	cons := startConsumer(t)
	_, key := e.tenant("acme")
	ids := map[string]string{}
	for _, s := range []struct{ name, team string }{{"bill-a", "billing"}, {"bill-b", "billing"}, {"ops-a", "ops"}} {
		var out struct{ ID string }
		e.must(http.MethodPost, "/v1/schedules", key, map[string]any{
			"name": s.name, "cron": "0 3 * * *", "target": map[string]any{"type": "http", "url": cons.url + "/ok"},
			"labels": map[string]string{"team": s.team},
		}, &out)
		ids[s.name] = out.ID
	}
	state := func(id string) string {
		var s struct{ State string }
		if code := e.call(http.MethodGet, "/v1/schedules/"+id, key, nil, &s); code != http.StatusOK {
			return fmt.Sprint(code)
		}
		return s.State
	}
	row := func(id string) string { return fmt.Sprintf(`#schedule-rows tr[data-id=%q]`, id) }
	b := newBrowser(t, ctx)
	b.run(t, "sign in",
		chromedp.Navigate(e.base+"/ui"),
		chromedp.WaitVisible(`input[type=password]`),
		chromedp.SendKeys(`input[type=password]`, key+"\r"),
		chromedp.WaitVisible(row(ids["ops-a"])))

	// The form sets labels; the list shows them.
	b.run(t, "create a schedule with labels",
		chromedp.Click(`details > summary`),
		chromedp.SendKeys(`#new-schedule [name="name"]`, "bill-c"),
		chromedp.SendKeys(`#new-schedule [name="target.url"]`, cons.url+"/ok"),
		chromedp.SendKeys(`#new-schedule [name="labels"]`, "team=billing, tier=gold"),
		chromedp.Click(`#create-schedule`),
		chromedp.WaitVisible(`//tbody[@id="schedule-rows"]/tr[.//a[text()="bill-c"]]//span[@class="chip"][text()="tier=gold"]`))
	ids["bill-c"] = get(t, b, "read the new row's id", chromedp.AttributeValue(`//tbody[@id="schedule-rows"]/tr[.//a[text()="bill-c"]]`, "data-id")).Value
	b.run(t, "a bad label is refused and the field marked",
		chromedp.SendKeys(`#new-schedule [name="name"]`, "bad"),
		chromedp.SendKeys(`#new-schedule [name="target.url"]`, cons.url+"/ok"),
		chromedp.SendKeys(`#new-schedule [name="labels"]`, "team=a b"),
		chromedp.Click(`#create-schedule`),
		chromedp.WaitVisible(`#new-schedule [name="labels"][aria-invalid="true"]`))

	// Filter by label: only the billing schedules.
	b.run(t, "filter by label",
		setValue(`form[role="search"] [name="label"]`, "team=billing"),
		chromedp.Click(`form[role="search"] button[type="submit"]`),
		chromedp.WaitNotPresent(row(ids["ops-a"])),
		chromedp.WaitVisible(row(ids["bill-c"])))
	shown := get(t, b, "count the rows", chromedp.Evaluate[int](`document.querySelectorAll("#schedule-rows tr[data-id]").length`))
	if shown != 3 {
		t.Fatalf("label filter team=billing shows %d rows, want 3", shown)
	}
	checkLabels(t, b, "schedules with the bulk bar")

	// Select all on the page and pause them in one call.
	b.run(t, "pause the selection",
		chromedp.Click(`#select-all`),
		chromedp.WaitVisible(`//span[@id="selected-count"][text()="3 selected"]`),
		chromedp.Click(`#bulk-pause`),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		chromedp.WaitVisible(row(ids["bill-a"])+`[data-state="paused"]`),
		chromedp.WaitVisible(row(ids["bill-c"])+`[data-state="paused"]`))
	for _, n := range []string{"bill-a", "bill-b", "bill-c"} {
		if st := state(ids[n]); st != "paused" {
			t.Errorf("%s is %s after the bulk pause, want paused", n, st)
		}
	}
	if st := state(ids["ops-a"]); st != "active" {
		t.Errorf("ops-a, not selected, is %s", st)
	}

	// Two of them: resume, then trigger, then delete.
	b.run(t, "resume two",
		chromedp.Click(row(ids["bill-a"])+` input[data-select]`),
		chromedp.Click(row(ids["bill-b"])+` input[data-select]`),
		chromedp.WaitVisible(`//span[@id="selected-count"][text()="2 selected"]`),
		chromedp.Click(`#bulk-resume`),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		chromedp.WaitVisible(row(ids["bill-b"])+`[data-state="active"]`))
	if st := state(ids["bill-c"]); st != "paused" {
		t.Errorf("bill-c, not selected, is %s after the bulk resume", st)
	}
	b.run(t, "trigger them",
		chromedp.Click(row(ids["bill-a"])+` input[data-select]`),
		chromedp.Click(row(ids["bill-b"])+` input[data-select]`),
		chromedp.Click(`#bulk-trigger`),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		// The count falls to 0 once the list is loaded again after the
		// call (the toast saying so lasts 4 s, which a loaded machine
		// may miss).
		chromedp.WaitVisible(`//span[@id="selected-count"][text()="0 selected"]`))
	for _, n := range []string{"bill-a", "bill-b"} {
		var fires struct {
			Items []struct {
				Decision string `json:"decision"`
			} `json:"items"`
		}
		if code := e.call(http.MethodGet, "/v1/schedules/"+ids[n]+"/fires", key, nil, &fires); code != http.StatusOK ||
			len(fires.Items) == 0 || fires.Items[0].Decision != "triggered" {
			t.Errorf("%s after the bulk trigger: %d %+v, want a triggered fire", n, code, fires.Items)
		}
	}
	b.run(t, "delete them",
		chromedp.Click(row(ids["bill-a"])+` input[data-select]`),
		chromedp.Click(row(ids["bill-b"])+` input[data-select]`),
		chromedp.Click(`#bulk-delete`),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		chromedp.WaitNotPresent(row(ids["bill-a"])),
		chromedp.WaitNotPresent(row(ids["bill-b"])))
	for _, n := range []string{"bill-a", "bill-b"} {
		if st := state(ids[n]); st != "404" {
			t.Errorf("%s answers %s after the bulk delete, want 404", n, st)
		}
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
