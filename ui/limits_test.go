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

// TestConsoleEffectiveLimit: the policies page shows each policy's
// effective limit and where it comes from: its maxInFlight, or its
// consumer's hold (with its end).
func TestConsoleEffectiveLimit(t *testing.T) {
	chromePath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startApp(t, ctx, t.TempDir())
	_, key := e.tenant("acme")
	var plain, held struct{ ID string }
	e.must(http.MethodPost, "/v1/policies", key, map[string]any{"name": "plain", "maxInFlight": 7}, &plain)
	e.must(http.MethodPost, "/v1/policies", key, map[string]any{"name": "held", "maxInFlight": 9}, &held)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	e.must(http.MethodPost, "/v1/policies/"+held.ID+"/hold", key, map[string]any{"until": until, "maxInFlight": 0}, nil)
	b := newBrowser(t, ctx)
	cell := func(id string) string { return fmt.Sprintf(`#policy-rows tr[data-id=%q] td.effective-limit`, id) }
	b.run(t, "open the policies",
		chromedp.Navigate(e.base+"/ui"),
		chromedp.WaitVisible(`input[type=password]`),
		chromedp.SendKeys(`input[type=password]`, key+kb.Enter),
		chromedp.WaitVisible(`body[data-page="schedules"] #schedule-rows`),
		chromedp.Navigate(e.base+"/ui/#/policies"),
		chromedp.WaitVisible(cell(held.ID)))
	if got := get(t, b, "read the plain policy's limit", chromedp.Text(cell(plain.ID))); !strings.Contains(got, "7") || !strings.Contains(got, "maxInFlight") {
		t.Errorf("plain policy's effective limit %q", got)
	}
	got := get(t, b, "read the held policy's limit", chromedp.Text(cell(held.ID)))
	if !strings.HasPrefix(got, "0") || !strings.Contains(got, "held by its consumer") || !strings.Contains(got, until.Format(time.RFC3339)[:16]) {
		t.Errorf("held policy's effective limit %q (until %s)", got, until.Format(time.RFC3339))
	}
	if src := get(t, b, "read the source", chromedp.AttributeValue(cell(held.ID), "data-source")); !src.Exists || src.Value != "hold" {
		t.Errorf("data-source %+v", src)
	}
	checkLabels(t, b, "policies with effective limits")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}
