package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/sync/errgroup"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// BenchmarkConsoleFirstPage measures, in a headless Chromium, the time from
// navigating to /ui/ (key in the tab) to the first rows of the schedules
// list drawn, with 10,000 schedules in the tenant. The schedules are written
// straight into the store (paused, so the emitter has nothing to do).
//
//	go test -run '^$' -bench ConsoleFirstPage -benchtime 20x ./ui/
func BenchmarkConsoleFirstPage(b *testing.B) {
	chromePath(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := b.TempDir()

	// A tenant and key through the API, then 10,000 schedules through the
	// store while the app is down, then the app again.
	first := startApp(b, ctx, dir)
	tenantID, key := first.tenant("bench")
	if err := first.app.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	seed(b, ctx, dir, tenantID, 10_000)
	e := startApp(b, ctx, dir)
	var page struct{ Items []struct{ ID string } }
	e.must(http.MethodGet, "/v1/schedules?limit=1", key, nil, &page)
	if len(page.Items) != 1 {
		b.Fatalf("seeded schedules not listed: %+v", page)
	}

	br := newBrowser(b, ctx)
	br.run(b, "sign in",
		chromedp.Navigate(e.base+"/ui/"),
		chromedp.WaitVisible(`input[type=password]`),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`sessionStorage.setItem("sd.key", %q)`, key)))
	url := e.base + "/ui/?b=%d#/schedules"
	b.ResetTimer()
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		// A new query string makes every round a full page load.
		br.run(b, "load the schedules list",
			chromedp.Navigate(fmt.Sprintf(url, i)),
			chromedp.WaitVisible(`#schedule-rows tr[data-id]`))
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/first-render")
	if errs := br.consoleErrors(); len(errs) > 0 {
		b.Fatalf("console errors: %v", errs)
	}
}

// seed writes n paused schedules of the tenant into the embedded store in
// dir, in parallel so that the store's group commit batches them.
func seed(b *testing.B, ctx context.Context, dir, tenantID string, n int) {
	b.Helper()
	st, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			id := fmt.Sprintf("sch_bench%06d", i)
			return storetest.CreateSchedule(gctx, st, &model.Schedule{
				ID: id, TenantID: tenantID, Name: fmt.Sprintf("report-%05d", i),
				Cron: "0 3 * * *", Timezone: "UTC", EventCount: 1, MaxAttempts: 5,
				Target:  model.Target{Type: model.TargetHTTP, URL: "https://example.com/hook"},
				Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow, State: model.SchedulePaused,
				Partition: model.PartitionOf(id, 16), Version: 1, CreatedAt: now, UpdatedAt: now,
			}, nil)
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("seed: %v", err)
	}
}
