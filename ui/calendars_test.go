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

// TestConsoleCalendars drives the calendars page in a real headless
// Chromium against a schedulerd started in process: the list shows a
// calendar made through the API, its detail shows its rules, the form
// creates one and marks a bad field, a schedule's page links the
// calendars it names, and deleting a calendar in use is refused.
func TestConsoleCalendars(t *testing.T) {
	chromePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startApp(t, ctx, t.TempDir())
	_, key := e.tenant("acme")
	var cal struct{ ID string }
	e.must(http.MethodPost, "/v1/calendars", key, map[string]any{"name": "de-holidays", "timezone": "Europe/Berlin",
		"dates": []string{"2027-12-25"}, "weekly": []map[string]any{{"days": []string{"sat", "sun"}}, {"days": []string{"fri"}, "from": "17:00"}}}, &cal)
	var sched struct{ ID string }
	e.must(http.MethodPost, "/v1/schedules", key, map[string]any{"name": "payroll", "cron": "0 9 * * *", "timezone": "Europe/Berlin",
		"excludeCalendars": []string{cal.ID}, "onExcluded": "next_included", "target": map[string]any{"type": "http", "url": "http://127.0.0.1:9/hook"}}, &sched)
	b := newBrowser(t, ctx)

	b.run(t, "sign in",
		chromedp.Navigate(e.base+"/ui"),
		chromedp.WaitVisible(`body[data-page="signin"] input[type=password]`),
		chromedp.SendKeys(`input[type=password]`, key+kb.Enter),
		chromedp.WaitVisible(`body[data-page="schedules"] #schedule-rows`))
	b.run(t, "open the calendars page",
		chromedp.Click(`#nav a[href="#/calendars"]`),
		chromedp.WaitVisible(fmt.Sprintf(`#calendar-rows tr[data-id=%q]`, cal.ID)))
	checkLabels(t, b, "calendars")
	row := get(t, b, "read the row", chromedp.Text(fmt.Sprintf(`#calendar-rows tr[data-id=%q]`, cal.ID)))
	if !strings.Contains(row, "Europe/Berlin") || !strings.Contains(row, "sat, sun: all day") || !strings.Contains(row, "fri: 17:00–24:00") {
		t.Errorf("calendar row %q", row)
	}

	b.run(t, "create a calendar with a bad zone",
		chromedp.Click(`details > summary`),
		chromedp.WaitVisible(`#new-calendar`),
		chromedp.SendKeys(`#new-calendar [name="name"]`, "maintenance"),
		setValue(`#new-calendar [name="timezone"]`, "Mars/Base"),
		chromedp.Click(`#create-calendar`),
		chromedp.WaitVisible(`#new-calendar [name="timezone"][aria-invalid="true"]`))
	checkLabels(t, b, "calendars with the form open")
	b.run(t, "create it with a good zone",
		setValue(`#new-calendar [name="timezone"]`, "UTC"),
		chromedp.SendKeys(`#new-calendar [name="dates"]`, "2027-06-01, 2027-06-02"),
		chromedp.SendKeys(`#new-calendar [name="weekly"]`, "sun"),
		chromedp.Click(`#create-calendar`),
		chromedp.WaitVisible(`//tbody[@id="calendar-rows"]/tr[.//a[text()="maintenance"]]`))
	var list struct {
		Items []struct {
			Name   string
			Dates  []string
			Weekly []struct{ Days []string }
		}
	}
	e.must(http.MethodGet, "/v1/calendars", key, nil, &list)
	made := false
	for _, c := range list.Items {
		made = made || c.Name == "maintenance" && len(c.Dates) == 2 && len(c.Weekly) == 1 && c.Weekly[0].Days[0] == "sun"
	}
	if len(list.Items) != 2 || !made {
		t.Errorf("after the form the API lists %+v", list.Items)
	}

	b.run(t, "open the detail",
		chromedp.Click(fmt.Sprintf(`#calendar-rows tr[data-id=%q] a`, cal.ID)),
		chromedp.WaitVisible(`#calendar-rules`))
	checkLabels(t, b, "calendar")
	dates := get(t, b, "read the dates", chromedp.Text(`#calendar-dates`))
	weekly := get(t, b, "read the weekly rules", chromedp.Text(`#calendar-weekly`))
	if dates != "2027-12-25" || !strings.Contains(weekly, "sat, sun: all day") {
		t.Errorf("detail dates %q weekly %q", dates, weekly)
	}
	b.run(t, "deleting a calendar in use is refused",
		chromedp.Click(`#delete-calendar`),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		chromedp.WaitVisible(`main .error`))
	if code := e.call(http.MethodGet, "/v1/calendars/"+cal.ID, key, nil, nil); code != http.StatusOK {
		t.Errorf("the calendar in use answers %d after the refused delete", code)
	}

	b.run(t, "the schedule links its calendars",
		chromedp.Navigate(e.base+"/ui/#/schedules/"+sched.ID),
		chromedp.WaitVisible(fmt.Sprintf(`#schedule-calendars a[href="#/calendars/%s"]`, cal.ID)))
	named := get(t, b, "read the schedule's calendars", chromedp.Text(`#schedule-calendars`))
	if !strings.Contains(named, "next_included") {
		t.Errorf("schedule calendars %q", named)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
