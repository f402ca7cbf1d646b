package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestConsole drives the console in a real headless Chromium against a
// schedulerd started in process and a consumer on 127.0.0.1: sign in,
// create a schedule, read its next fires, trigger it and watch the fire's
// events reach released, redrive dead events in bulk, pause. Every page is
// checked for labelled inputs and the whole run for console errors. With
// UI_SCREENSHOTS=1 it also writes docs/screenshots/*.png.
func TestConsole(t *testing.T) {
	chromePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startApp(t, ctx, t.TempDir())
	cons := startConsumer(t)
	tenantID, key := e.tenant("acme")
	var pol struct{ ID string }
	e.must(http.MethodPost, "/v1/policies", key, map[string]any{"name": "reports", "maxInFlight": 4, "tokenTimeout": "15m", "autoRelease": false}, &pol)
	b := newBrowser(t, ctx)
	shots := screenshotter(t, b)

	b.run(t, "open the sign-in page",
		chromedp.Navigate(e.base+"/ui"),
		chromedp.WaitVisible(`body[data-page="signin"] input[type=password]`))
	checkLabels(t, b, "sign-in")
	shots("signin")
	b.run(t, "sign in with a wrong key",
		chromedp.SendKeys(`input[type=password]`, "sk_wrong"+kb.Enter),
		chromedp.WaitVisible(`.signin .error`))
	// Signing in by keyboard: type the key, Enter in the field submits.
	b.run(t, "sign in",
		setValue(`input[type=password]`, ""),
		chromedp.SendKeys(`input[type=password]`, key+kb.Enter),
		chromedp.WaitVisible(`body[data-page="schedules"] #schedule-rows`))
	stored := get(t, b, "read the key's storage",
		chromedp.Evaluate[string](`JSON.stringify([sessionStorage.getItem("sd.key") !== null, localStorage.length, document.cookie])`))
	if stored != `[true,0,""]` {
		t.Errorf("key storage [in sessionStorage, localStorage items, cookies] = %s, want [true,0,\"\"]", stored)
	}

	t.Run("CronInWords", func(t *testing.T) { checkCronWords(t, b) })

	// Create a schedule through the form.
	const name = "nightly-report"
	b.run(t, "create a schedule",
		chromedp.Click(`details > summary`),
		chromedp.WaitVisible(`#new-schedule`),
		chromedp.SendKeys(`#new-schedule [name="name"]`, name),
		setValue(`#new-schedule [name="cron"]`, ""),
		chromedp.SendKeys(`#new-schedule [name="cron"]`, "30 2 * * 1-5"),
		setValue(`#new-schedule [name="timezone"]`, "Europe/Berlin"),
		setValue(`#new-schedule [name="eventCount"]`, "3"),
		chromedp.SendKeys(`#new-schedule [name="target.url"]`, cons.url+"/ok"),
		// A short window with spread launches, so that the fire finishes soon.
		chromedp.SendKeys(`#new-schedule [name="window"]`, "2s"),
		chromedp.Click(`#new-schedule [name="spread"]`),
		chromedp.WaitVisible(`//small[@id="cron-words"][text()="At 02:30, Monday through Friday"]`),
	)
	checkLabels(t, b, "schedules with the form open")
	b.run(t, "submit the schedule", chromedp.Click(`#create-schedule`),
		chromedp.WaitVisible(fmt.Sprintf(`//tbody[@id="schedule-rows"]/tr[.//a[text()=%q]]`, name)))
	row := fmt.Sprintf(`//tbody[@id="schedule-rows"]/tr[.//a[text()=%q]]`, name)
	id := get(t, b, "read the new row's id", chromedp.AttributeValue(row, "data-id")).Value
	next := get(t, b, "read the new row's next fire", chromedp.Text(row+`/td[contains(@class,"next")]`))
	if !strings.HasPrefix(id, "sch_") {
		t.Fatalf("created row's id %q", id)
	}
	var s struct{ NextFireTimes []time.Time }
	e.must(http.MethodGet, "/v1/schedules/"+id, key, nil, &s)
	if len(s.NextFireTimes) == 0 || !strings.Contains(next, s.NextFireTimes[0].UTC().Format(time.RFC3339)) {
		t.Errorf("next fire cell %q, want the API's first next fire time %v in UTC", next, s.NextFireTimes)
	}
	// A bad cron is refused by the server; the form names the field.
	b.run(t, "create a bad schedule",
		chromedp.SendKeys(`#new-schedule [name="name"]`, "bad"),
		setValue(`#new-schedule [name="cron"]`, "0 24 * * *"),
		chromedp.SendKeys(`#new-schedule [name="target.url"]`, cons.url+"/ok"),
		chromedp.Click(`#create-schedule`),
		chromedp.WaitVisible(`#new-schedule .error`),
		chromedp.WaitVisible(`#new-schedule [name="cron"][aria-invalid="true"]`))
	shots("schedules")

	// Detail: cron in words and a preview that shows the DST changes.
	b.run(t, "open the detail",
		chromedp.Click(row+`//a`),
		chromedp.WaitVisible(`#preview-rows tr`),
		setValue(`#preview-count`, "500"),
		chromedp.WaitVisible(`#preview-rows tr.dst`))
	words := get(t, b, "read the cron in words", chromedp.Text(`#cron-explained`))
	dst := get(t, b, "read the DST note", chromedp.Text(`#dst-note`))
	if words != "At 02:30, Monday through Friday" {
		t.Errorf("detail explains the cron as %q", words)
	}
	if !strings.Contains(dst, "+01:00 → +02:00") && !strings.Contains(dst, "+02:00 → +01:00") {
		t.Errorf("DST note %q names no Berlin offset change over 500 week-day fires", dst)
	}
	checkLabels(t, b, "schedule detail")
	shots("schedule")

	// Trigger by keyboard from the list, confirm, watch the fire.
	trigger := fmt.Sprintf(`button[data-action="trigger"][data-schedule=%q]`, id)
	b.run(t, "trigger",
		chromedp.Navigate(e.base+"/ui/#/schedules"),
		chromedp.WaitVisible(trigger),
		chromedp.Focus(trigger),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		chromedp.Navigate(e.base+"/ui/#/fires/"+id),
		chromedp.WaitVisible(`#fire-rows tr[data-released="3"]`))
	checkLabels(t, b, "fires")
	shots("fires")

	// Dead events: maxAttempts 1 against a consumer answering 500.
	cons.failing.Store(true)
	var dead struct{ ID string }
	e.must(http.MethodPost, "/v1/schedules", key, map[string]any{
		"name": "flaky-export", "cron": "0 4 * * *", "eventCount": 3, "maxAttempts": 1,
		"target": map[string]any{"type": "http", "url": cons.url + "/fail"},
	}, &dead)
	e.must(http.MethodPost, "/v1/schedules/"+dead.ID+"/trigger", key, nil, nil)
	b.run(t, "see the dead letters",
		chromedp.Navigate(e.base+"/ui/#/events?status=dead&scheduleId="+dead.ID),
		chromedp.WaitVisible(`#event-rows tr[data-status="dead"]:nth-child(3)`),
		chromedp.Click(`#event-rows tr button.link`),
		chromedp.WaitVisible(`#event-last-error`))
	lastErr := get(t, b, "read the last error", chromedp.Text(`#event-last-error`))
	if !strings.Contains(lastErr, "500") {
		t.Errorf("dead event's last error %q does not name the consumer's 500", lastErr)
	}
	checkLabels(t, b, "events")
	shots("events")
	cons.failing.Store(false)
	b.run(t, "redrive them in bulk",
		chromedp.Click(`#select-dead`),
		chromedp.Click(`#redrive-selected`),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		chromedp.Navigate(e.base+"/ui/#/events?scheduleId="+dead.ID),
		chromedp.WaitVisible(`#event-rows tr[data-status="released"]:nth-child(3)`))

	t.Run("BulkRedriveByFilter", func(t *testing.T) {
		if !e.hasOperation(t, "/v1/events/redrive", "post") {
			t.Fatal("POST /v1/events/redrive answers 404/405: the console's by-filter redrive has no endpoint")
		}
		cons.failing.Store(true)
		e.must(http.MethodPost, "/v1/schedules/"+dead.ID+"/trigger", key, nil, nil)
		b.run(t, "wait for the new dead letters",
			chromedp.Navigate(e.base+"/ui/#/events?status=dead&scheduleId="+dead.ID),
			chromedp.WaitVisible(`#event-rows tr[data-status="dead"]:nth-child(3)`))
		cons.failing.Store(false)
		b.run(t, "redrive by filter",
			chromedp.Click(`#redrive-matching`),
			chromedp.WaitVisible(`#confirm[open]`),
			chromedp.Click(`#confirm-ok`),
			chromedp.WaitVisible(`#event-rows td.muted`)) // no dead event matches any more
	})

	b.run(t, "policies",
		chromedp.Navigate(e.base+"/ui/#/policies"),
		chromedp.WaitVisible(fmt.Sprintf(`#policy-rows tr[data-id=%q]`, pol.ID)))
	checkLabels(t, b, "policies")
	shots("policies")

	b.run(t, "health",
		chromedp.Navigate(e.base+"/ui/#/health"),
		chromedp.WaitVisible(`#lateness`),
		// Three samples, so that the charts have lines.
		chromedp.WaitVisible(`#health-charts[data-samples="3"]`))
	shots("health")
	t.Run("Summary", func(t *testing.T) {
		if !e.hasOperation(t, "/v1/summary", "get") {
			t.Fatal("GET /v1/summary answers 404/405: the health page has no summary to read")
		}
		src := get(t, b, "read the source", chromedp.Text(`main p.muted`))
		if !strings.Contains(src, "/v1/summary") {
			t.Errorf("health page reads %q, want GET /v1/summary", src)
		}
	})

	// Pause by keyboard from the list.
	pause := fmt.Sprintf(`button[data-action="pause"][data-schedule=%q]`, id)
	b.run(t, "pause",
		chromedp.Navigate(e.base+"/ui/#/schedules"),
		chromedp.WaitVisible(pause),
		chromedp.Focus(pause),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.SendKeys(`#pause-note`, "database maintenance"),
		chromedp.Focus(`#confirm-ok`),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(fmt.Sprintf(`#schedule-rows tr[data-id=%q][data-state="paused"]`, id)))
	var st struct{ State, PausedNote string }
	e.must(http.MethodGet, "/v1/schedules/"+id, key, nil, &st)
	if st.State != "paused" || st.PausedNote != "database maintenance" {
		t.Errorf("after pause in the console the API says %q with note %q", st.State, st.PausedNote)
	}
	listed := get(t, b, "the list shows the pause note",
		chromedp.Text(fmt.Sprintf(`#schedule-rows tr[data-id=%q] .pause-info`, id)))
	b.run(t, "the schedule page shows the pause",
		chromedp.Navigate(e.base+"/ui/#/schedules/"+id),
		chromedp.WaitVisible(`#paused-note`))
	shown := get(t, b, "read the pause note", chromedp.Text(`#paused-note`))
	if listed != "database maintenance" || shown != "database maintenance" {
		t.Errorf("pause note in the list %q, on the schedule page %q", listed, shown)
	}
	b.run(t, "back to the list", chromedp.Navigate(e.base+"/ui/#/schedules"),
		chromedp.WaitVisible(fmt.Sprintf(`#schedule-rows tr[data-id=%q][data-state="paused"]`, id)))
	b.run(t, "resume, and delete the other schedule",
		chromedp.Click(fmt.Sprintf(`button[data-action="resume"][data-schedule=%q]`, id)),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		chromedp.WaitVisible(fmt.Sprintf(`#schedule-rows tr[data-id=%q][data-state="active"]`, id)),
		chromedp.Click(fmt.Sprintf(`button[data-action="delete"][data-schedule=%q]`, dead.ID)),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		chromedp.WaitNotPresent(fmt.Sprintf(`#schedule-rows tr[data-id=%q]`, dead.ID)))
	if code := e.call(http.MethodGet, "/v1/schedules/"+dead.ID, key, nil, nil); code != http.StatusNotFound {
		t.Errorf("after delete in the console the API answers %d for the schedule, want 404", code)
	}

	t.Run("AdminTenantSwitcher", func(t *testing.T) {
		if !e.hasOperation(t, "/v1/tenants", "get") {
			t.Fatal("GET /v1/tenants answers 404/405: the admin key cannot list tenants")
		}
		b.run(t, "sign in as admin",
			chromedp.Click(`#signout`),
			chromedp.WaitVisible(`input[type=password]`),
			chromedp.SendKeys(`input[type=password]`, e.app.AdminKey()+kb.Enter),
			chromedp.WaitVisible(`#tenant-switch`),
			setValue(`#tenant-switch`, tenantID),
			chromedp.WaitVisible(fmt.Sprintf(`#schedule-rows tr[data-id=%q]`, id)))
	})

	cons.mu.Lock()
	if len(cons.errs) > 0 {
		t.Errorf("consumer's releases failed: %v", cons.errs)
	}
	cons.mu.Unlock()
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// hasOperation asks the server itself: an operation it does not serve
// answers 404 or 405 for the admin and a tenant alike.
func (e *env) hasOperation(t *testing.T, path, method string) bool {
	t.Helper()
	st := e.call(strings.ToUpper(method), path, e.app.AdminKey(), map[string]any{}, nil)
	if strings.ToUpper(method) == http.MethodGet {
		st = e.call(http.MethodGet, path, e.app.AdminKey(), nil, nil)
	}
	return st != http.StatusNotFound && st != http.StatusMethodNotAllowed
}

// checkLabels fails when an input, select or textarea of the page has no
// label (a <label> or aria-label) or a button has no accessible text.
func checkLabels(t *testing.T, b *browser, page string) {
	t.Helper()
	missing := get(t, b, "check labels on "+page, chromedp.Evaluate[[]string](`[...document.querySelectorAll("input, select, textarea, button")]
		.filter((el) => el.offsetParent !== null || el.closest("dialog[open]"))
		.filter((el) => el.tagName === "BUTTON"
			? !(el.textContent.trim() || el.getAttribute("aria-label"))
			: !(el.labels && el.labels.length) && !el.getAttribute("aria-label"))
		.map((el) => el.outerHTML.slice(0, 120))`))
	if len(missing) > 0 {
		t.Errorf("%s: controls without a label: %v", page, missing)
	}
}

// checkCronWords runs the console's own cron-to-English module in the page.
func checkCronWords(t *testing.T, b *browser) {
	cases := map[string]string{
		"* * * * *":        "Every minute",
		"*/15 * * * *":     "Every 15 minutes",
		"0 * * * *":        "At minute 0 past every hour",
		"30 9 * * 1-5":     "At 09:30, Monday through Friday",
		"0 0 1 * *":        "At 00:00, on day 1 of the month",
		"0 9,17 * * *":     "At 09:00 and 17:00",
		"0 3 * JAN SUN":    "At 03:00, on Sunday, in January",
		"5 */2 * * *":      "At minute 5 past every 2nd hour",
		"0 0 13 * 5":       "At 00:00, on day 13 of the month or on Friday",
		"0 0 L * *":        "At 00:00, on the last day of the month",
		"0 9 * * MON#1":    "At 09:00, on the first Monday of the month",
		"0 12 * 6-8 1,3,5": "At 12:00, on Monday, Wednesday and Friday, in June through August",
		"*/10 8-18 * * *":  "Every 10 minutes, hours 08 through 18",
		"0 0 * * 7":        "At 00:00, on Sunday",
		"15 10 1,15 * *":   "At 10:15, on days 1 and 15 of the month",
		"0 60 * * *":       "error: hour: 60 is out of range 0-23",
		"60 0 * * *":       "error: minute: 60 is out of range 0-59",
		"* * * *":          "error: a cron expression has 5 fields, not 4",
		"0 0 * * FRI#6":    "error: dow: bad occurrence \"6\"",
		"0-30/10 * * * *":  "Every 10 minutes from minute 0 through 30",
		"0 22 * * 1-5":     "At 22:00, Monday through Friday",
	}
	got := get(t, b, "run describeCron", chromedp.Evaluate[map[string]string](fmt.Sprintf(`import("./cron.js").then((m) => Object.fromEntries(%s.map((c) => {
		try { return [c, m.describeCron(c)]; } catch (e) { return [c, "error: " + e.message]; }
	})))`, jsKeys(cases)), chromedp.EvalAwaitPromise))
	for expr, want := range cases {
		if got[expr] != want {
			t.Errorf("describeCron(%q) = %q, want %q", expr, got[expr], want)
		}
	}
}

func jsKeys(m map[string]string) string {
	var b strings.Builder
	b.WriteString("[")
	for k := range m {
		fmt.Fprintf(&b, "%q,", k)
	}
	b.WriteString("]")
	return b.String()
}

// screenshotter returns a function that saves the viewport as
// docs/screenshots/<name>.png when UI_SCREENSHOTS=1, and does nothing
// otherwise.
func screenshotter(t *testing.T, b *browser) func(name string) {
	if os.Getenv("UI_SCREENSHOTS") != "1" {
		return func(string) {}
	}
	dir := filepath.Join("..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return func(name string) {
		t.Helper()
		// The page marks itself ready once its first data is drawn.
		b.run(t, "wait for "+name, chromedp.WaitVisible(`body[data-ready]`))
		png := get(t, b, "screenshot "+name, chromedp.CaptureScreenshot())
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// setValue sets a form control's value as typing or choosing would, with
// the input and change events.
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.WaitVisible(sel),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const el = document.querySelector(%q);
			el.value = %q;
			el.dispatchEvent(new Event("input", {bubbles: true}));
			el.dispatchEvent(new Event("change", {bubbles: true}));
		})()`, sel, v)))
}
