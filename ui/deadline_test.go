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

// TestConsoleDeadline: a schedule created in the console's form with a
// deadline and onDeadline expire shows both on its page (and maxEventAge,
// set through the API); the fires timeline shows a fire's deadline.
func TestConsoleDeadline(t *testing.T) {
	chromePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startApp(t, ctx, t.TempDir())
	_, key := e.tenant("acme")
	b := newBrowser(t, ctx)

	const name = "nightly-batch"
	row := fmt.Sprintf(`//tbody[@id="schedule-rows"]/tr[.//a[text()=%q]]`, name)
	b.run(t, "sign in and create a schedule with a deadline",
		chromedp.Navigate(e.base+"/ui"),
		chromedp.WaitVisible(`input[type=password]`),
		chromedp.SendKeys(`input[type=password]`, key+kb.Enter),
		chromedp.WaitVisible(`body[data-page="schedules"] #schedule-rows`),
		chromedp.Click(`details > summary`),
		chromedp.WaitVisible(`#new-schedule`),
		chromedp.SendKeys(`#new-schedule [name="name"]`, name),
		setValue(`#new-schedule [name="cron"]`, "0 2 * * *"),
		chromedp.SendKeys(`#new-schedule [name="target.url"]`, "http://127.0.0.1:9/hook"),
		chromedp.SendKeys(`#new-schedule [name="deadline"]`, "45m"),
		setValue(`#new-schedule [name="onDeadline"]`, "expire"),
		chromedp.Click(`#create-schedule`),
		chromedp.WaitVisible(row))
	checkLabels(t, b, "schedules with the deadline fields")
	id := get(t, b, "read the row's id", chromedp.AttributeValue(row, "data-id")).Value
	var s struct{ Deadline, OnDeadline string }
	e.must(http.MethodGet, "/v1/schedules/"+id, key, nil, &s)
	if s.Deadline != "45m0s" || s.OnDeadline != "expire" {
		t.Fatalf("the API says deadline %q, onDeadline %q", s.Deadline, s.OnDeadline)
	}
	e.must(http.MethodPatch, "/v1/schedules/"+id, key, map[string]any{"maxEventAge": "2h"}, nil)

	b.run(t, "open the schedule",
		chromedp.Navigate(e.base+"/ui/#/schedules/"+id),
		chromedp.WaitVisible(`#deadline`))
	if got := get(t, b, "read the deadline", chromedp.Text(`#deadline`)); !strings.Contains(got, "45m0s after its launch") || !strings.Contains(got, "expires") {
		t.Errorf("deadline row %q", got)
	}
	if got := get(t, b, "read the max event age", chromedp.Text(`#max-event-age`)); !strings.Contains(got, "2h0m0s") {
		t.Errorf("max event age row %q", got)
	}

	var f struct {
		Deadline time.Time `json:"deadline"`
	}
	e.must(http.MethodPost, "/v1/schedules/"+id+"/trigger", key, map[string]any{"eventCount": 1}, &f)
	if f.Deadline.IsZero() {
		t.Fatal("the triggered fire has no deadline")
	}
	b.run(t, "see the fire's deadline",
		chromedp.Navigate(e.base+"/ui/#/fires/"+id),
		chromedp.WaitVisible(`//tbody[@id="fire-rows"]//small[contains(@class,"deadline")]`))
	got := get(t, b, "read the fire's deadline", chromedp.Text(`//tbody[@id="fire-rows"]//small[contains(@class,"deadline")]`))
	if !strings.Contains(got, f.Deadline.UTC().Format("2006-01-02T15:04")) || !strings.Contains(got, "(expire)") {
		t.Errorf("fire deadline %q, want %s (expire)", got, f.Deadline.UTC())
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
