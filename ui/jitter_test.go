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

// TestConsoleJitter: a schedule created with a jitter in the console's form
// shows it on its page, whose preview gives each fire's launch and marks
// the fire a spring-forward gap moved; the fires timeline shows a
// triggered fire's note.
func TestConsoleJitter(t *testing.T) {
	chromePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startApp(t, ctx, t.TempDir())
	_, key := e.tenant("acme")
	b := newBrowser(t, ctx)

	const name = "berlin-night"
	b.run(t, "sign in and create a schedule with a jitter",
		chromedp.Navigate(e.base+"/ui"),
		chromedp.WaitVisible(`input[type=password]`),
		chromedp.SendKeys(`input[type=password]`, key+kb.Enter),
		chromedp.WaitVisible(`body[data-page="schedules"] #schedule-rows`),
		chromedp.Click(`details > summary`),
		chromedp.WaitVisible(`#new-schedule`),
		chromedp.SendKeys(`#new-schedule [name="name"]`, name),
		setValue(`#new-schedule [name="cron"]`, "30 2 * * *"),
		setValue(`#new-schedule [name="timezone"]`, "Europe/Berlin"),
		chromedp.SendKeys(`#new-schedule [name="target.url"]`, "http://127.0.0.1:9/hook"),
		chromedp.SendKeys(`#new-schedule [name="jitter"]`, "20m"),
		chromedp.Click(`#create-schedule`),
		chromedp.WaitVisible(fmt.Sprintf(`//tbody[@id="schedule-rows"]/tr[.//a[text()=%q]]`, name)))
	checkLabels(t, b, "schedules with the jitter field")
	row := fmt.Sprintf(`//tbody[@id="schedule-rows"]/tr[.//a[text()=%q]]`, name)
	id := get(t, b, "read the row's id", chromedp.AttributeValue(row, "data-id")).Value

	var s struct{ Jitter string }
	e.must(http.MethodGet, "/v1/schedules/"+id, key, nil, &s)
	if s.Jitter != "20m0s" {
		t.Fatalf("the API says jitter %q", s.Jitter)
	}
	// A year of daily fires holds the spring-forward day.
	b.run(t, "open the schedule",
		chromedp.Navigate(e.base+"/ui/#/schedules/"+id),
		chromedp.WaitVisible(`#preview-rows tr`),
		setValue(`#preview-count`, "500"),
		chromedp.WaitVisible(`#preview-rows tr[data-dst="skipped"]`))
	jitter := get(t, b, "read the jitter", chromedp.Text(`#jitter`))
	if !strings.Contains(jitter, "up to 20m0s") {
		t.Errorf("jitter row %q", jitter)
	}
	var p struct {
		FireTimes []struct {
			UTC      time.Time `json:"utc"`
			LaunchAt time.Time `json:"launchAt"`
		} `json:"fireTimes"`
	}
	e.must(http.MethodGet, "/v1/schedules/"+id+"/preview?count=1", key, nil, &p)
	launch := get(t, b, "read the first launch", chromedp.Text(`#preview-rows tr:first-child td.launch`))
	// The cell gives milliseconds in full (".310Z"), Go's RFC3339Nano
	// drops their trailing zeros: compare the instants.
	first, _, _ := strings.Cut(launch, "\n")
	shown, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(first))
	if err != nil || len(p.FireTimes) != 1 || !shown.Equal(p.FireTimes[0].LaunchAt) {
		t.Errorf("first launch cell %q (%v), want the API's %+v", launch, err, p.FireTimes)
	}
	skipped := get(t, b, "read the skipped fire", chromedp.Text(`#preview-rows tr[data-dst="skipped"]`))
	if !strings.Contains(skipped, "T03:00:00+02:00") || !strings.Contains(skipped, "spring forward") {
		t.Errorf("skipped fire row %q", skipped)
	}
	checkLabels(t, b, "schedule with jitter")

	e.must(http.MethodPost, "/v1/schedules/"+id+"/trigger", key, map[string]any{"note": "re-run after the outage", "eventCount": 1}, nil)
	b.run(t, "see the fire's note",
		chromedp.Navigate(e.base+"/ui/#/fires/"+id),
		chromedp.WaitVisible(`//tbody[@id="fire-rows"]//small[@class="note"][text()="re-run after the outage"]`))
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
