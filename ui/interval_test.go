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

// TestConsoleIntervalAndCrons: the console's form creates an interval
// schedule and one with several crons, shows them in the list and on the
// schedule's page, and marks the when field of an interval the server
// refuses.
func TestConsoleIntervalAndCrons(t *testing.T) {
	chromePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startApp(t, ctx, t.TempDir())
	_, key := e.tenant("acme")
	b := newBrowser(t, ctx)

	row := func(name string) string {
		return fmt.Sprintf(`//tbody[@id="schedule-rows"]/tr[.//a[text()=%q]]`, name)
	}
	create := func(name, kind, when string) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			setValue(`#new-schedule [name="name"]`, name),
			setValue(`#new-schedule [name="kind"]`, kind),
			setValue(`#new-schedule [name="cron"]`, when),
			setValue(`#new-schedule [name="target.url"]`, "http://127.0.0.1:9/hook"),
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
	b.run(t, "create an interval schedule", append(create("sync", "interval", "90m"), chromedp.WaitVisible(row("sync")))...)
	b.run(t, "create a schedule with two crons",
		append(create("reports", "crons", "0 9 * * 1-5; 30 12 * * 6"), chromedp.WaitVisible(row("reports")))...)
	checkLabels(t, b, "schedules with an interval and crons")

	syncRow := get(t, b, "read the interval row", chromedp.Text(row("sync")))
	if !strings.Contains(syncRow, "every 1h30m0s") {
		t.Errorf("interval row %q", syncRow)
	}
	id := get(t, b, "read the crons row's id", chromedp.AttributeValue(row("reports"), "data-id")).Value
	var s struct{ Crons []string }
	e.must(http.MethodGet, "/v1/schedules/"+id, key, nil, &s)
	if len(s.Crons) != 2 || s.Crons[0] != "0 9 * * 1-5" || s.Crons[1] != "30 12 * * 6" {
		t.Fatalf("the API says crons %q", s.Crons)
	}
	b.run(t, "open the crons schedule",
		chromedp.Navigate(e.base+"/ui/#/schedules/"+id),
		chromedp.WaitVisible(`#preview-rows tr`))
	when := get(t, b, "read when", chromedp.Text(`#when-code`))
	if !strings.Contains(when, "0 9 * * 1-5; 30 12 * * 6") {
		t.Errorf("when %q", when)
	}

	b.run(t, "open the form again",
		chromedp.Navigate(e.base+"/ui/#/schedules"),
		chromedp.WaitVisible(`body[data-page="schedules"] #schedule-rows`),
		chromedp.Click(`details > summary`),
		chromedp.WaitVisible(`#new-schedule`))
	b.run(t, "an interval under a minute is refused on the when field",
		append(create("fast", "interval", "30s"), chromedp.WaitVisible(`#new-schedule [name="cron"][aria-invalid="true"]`))...)
}
