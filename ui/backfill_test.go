package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestConsoleBackfill: the backfill form on a schedule's page fires a past
// range once (the answer is shown, and the fires exist with decision
// backfill), a repeat says every instant already had a fire, and a range
// ending in the future is refused with its field marked.
func TestConsoleBackfill(t *testing.T) {
	chromePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startApp(t, ctx, t.TempDir())
	_, key := e.tenant("acme")
	var s struct{ ID string }
	e.must(http.MethodPost, "/v1/schedules", key, map[string]any{
		"name": "hourly", "cron": "0 * * * *", "target": map[string]any{"type": "http", "url": "http://127.0.0.1:9/hook"},
	}, &s)
	b := newBrowser(t, ctx)

	// Whole hours well in the past in any browser time zone: three
	// instants of an hourly schedule.
	to := time.Now().Add(-27 * time.Hour).Truncate(time.Hour)
	local := func(t time.Time) string { return t.Format("2006-01-02T15:04") }
	submit := func(what, from, to string) {
		b.run(t, what,
			setValue(`#backfill [name="from"]`, from),
			setValue(`#backfill [name="to"]`, to),
			chromedp.Click(`#backfill-submit`),
			chromedp.WaitVisible(`#confirm[open]`),
			chromedp.Click(`#confirm-ok`))
	}
	b.run(t, "sign in and open the schedule",
		chromedp.Navigate(e.base+"/ui"),
		chromedp.WaitVisible(`input[type=password]`),
		chromedp.SendKeys(`input[type=password]`, key+kb.Enter),
		chromedp.WaitVisible(`body[data-page="schedules"] #schedule-rows`),
		chromedp.Navigate(e.base+"/ui/#/schedules/"+s.ID),
		chromedp.WaitVisible(`#backfill`))
	submit("backfill three hours", local(to.Add(-3*time.Hour)), local(to))
	b.run(t, "see the answer", chromedp.WaitVisible(`//p[@id="backfill-result"][contains(., "3 fired")]`))
	text := get(t, b, "read the answer", chromedp.Text(`#backfill-result`))
	if !strings.Contains(text, "3 instants: 3 fired") || !strings.Contains(text, "3 events written") {
		t.Errorf("answer %q", text)
	}
	var fires struct {
		Items []struct{ Decision string } `json:"items"`
	}
	e.must(http.MethodGet, "/v1/schedules/"+s.ID+"/fires", key, nil, &fires)
	n := 0
	for _, f := range fires.Items {
		if f.Decision == "backfill" {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d backfill fires, want 3: %+v", n, fires.Items)
	}
	checkLabels(t, b, "schedule page with the backfill form")

	submit("repeat the backfill", local(to.Add(-3*time.Hour)), local(to))
	b.run(t, "see nothing new", chromedp.WaitVisible(`//p[@id="backfill-result"][contains(., "3 already had a fire")]`))

	submit("a range ending in the future", local(to), local(time.Now().Add(48*time.Hour)))
	b.run(t, "see the refusal", chromedp.WaitVisible(`#backfill [name="to"][aria-invalid="true"]`))
	if text := get(t, b, "read the refusal", chromedp.Text(`#backfill-result`)); !strings.Contains(text, "must not be after now") {
		t.Errorf("refusal %q", text)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
