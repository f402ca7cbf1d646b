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

// TestConsoleAfterAndNotify: the console's form creates a schedule that
// fires after another and notifies a receiver; the schedule's page shows
// the dependency (a link to the upstream schedule) and the receiver; a
// dependency on an unknown schedule marks the when field.
func TestConsoleAfterAndNotify(t *testing.T) {
	chromePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startApp(t, ctx, t.TempDir())
	_, key := e.tenant("acme")
	var up struct{ ID string }
	e.must(http.MethodPost, "/v1/schedules", key, map[string]any{
		"name": "extract", "cron": "0 2 * * *", "target": map[string]string{"type": "http", "url": "http://127.0.0.1:9/hook"},
	}, &up)
	b := newBrowser(t, ctx)
	row := func(name string) string {
		return fmt.Sprintf(`//tbody[@id="schedule-rows"]/tr[.//a[text()=%q]]`, name)
	}
	create := func(name, kind, when, notify string) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			setValue(`#new-schedule [name="name"]`, name),
			setValue(`#new-schedule [name="kind"]`, kind),
			setValue(`#new-schedule [name="cron"]`, when),
			setValue(`#new-schedule [name="target.url"]`, "http://127.0.0.1:9/hook"),
			setValue(`#new-schedule [name="notify"]`, notify),
			chromedp.Click(`#create-schedule`),
		}
	}
	b.run(t, "sign in and open the form",
		chromedp.Navigate(e.base+"/ui"),
		chromedp.WaitVisible(`input[type=password]`),
		chromedp.SendKeys(`input[type=password]`, key+kb.Enter),
		chromedp.WaitVisible(`body[data-page="schedules"] #schedule-rows`),
		chromedp.Click(`details > summary`),
		chromedp.WaitVisible(`#new-schedule`))
	b.run(t, "create a dependent schedule with a receiver",
		append(create("load", "after-succeeded", up.ID, "https://ops.example.com/hook"), chromedp.WaitVisible(row("load")))...)
	text := get(t, b, "read the row", chromedp.Text(row("load")))
	if !strings.Contains(text, "after "+up.ID) || !strings.Contains(text, "succeeded") {
		t.Errorf("row %q", text)
	}
	id := get(t, b, "read the row's id", chromedp.AttributeValue(row("load"), "data-id")).Value
	var s struct {
		After  struct{ ScheduleID, When string }
		Notify []struct {
			URL string
			On  []string
		}
	}
	e.must(http.MethodGet, "/v1/schedules/"+id, key, nil, &s)
	if s.After.ScheduleID != up.ID || s.After.When != "succeeded" || len(s.Notify) != 1 || s.Notify[0].URL != "https://ops.example.com/hook" || len(s.Notify[0].On) != 3 {
		t.Fatalf("the API says %+v", s)
	}
	b.run(t, "open the dependent schedule",
		chromedp.Navigate(e.base+"/ui/#/schedules/"+id),
		chromedp.WaitVisible(`#schedule-notify`))
	when := get(t, b, "read when", chromedp.Text(`#when-code`))
	if !strings.Contains(when, up.ID+" (succeeded)") {
		t.Errorf("when %q", when)
	}
	if href := get(t, b, "read the upstream link", chromedp.AttributeValue(`#when-code a`, "href")).Value; href != "#/schedules/"+up.ID {
		t.Errorf("upstream link %q", href)
	}
	notify := get(t, b, "read notify", chromedp.Text(`#schedule-notify`))
	if !strings.Contains(notify, "https://ops.example.com/hook on fire.finished, fire.has_dead, fire.deadline_missed") {
		t.Errorf("notify %q", notify)
	}
	b.run(t, "open the form again",
		chromedp.Navigate(e.base+"/ui/#/schedules"),
		chromedp.WaitVisible(`body[data-page="schedules"] #schedule-rows`),
		chromedp.Click(`details > summary`),
		chromedp.WaitVisible(`#new-schedule`))
	b.run(t, "a dependency on an unknown schedule is refused on the when field",
		append(create("orphan", "after", "sch_nope", ""), chromedp.WaitVisible(`#new-schedule [name="cron"][aria-invalid="true"]`))...)
}
