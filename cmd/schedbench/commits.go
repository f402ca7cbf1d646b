package main

import (
	"context"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// commitCount is the embedded store's commits and the writes they carried,
// as schedulerd exports them.
type commitCount struct{ commits, writes int64 }

// readCommits reads the embedded store's counters from base's /metrics; ok
// is false when they are not there (another store, or no answer).
func readCommits(ctx context.Context, base string) (c commitCount, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return c, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, false
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return c, false
	}
	value := func(name string) (int64, bool) {
		f := fams[name]
		if f == nil || len(f.GetMetric()) != 1 {
			return 0, false
		}
		c := f.GetMetric()[0].GetCounter()
		return int64(c.GetValue()), c != nil
	}
	var ok1, ok2 bool
	c.commits, ok1 = value("schedulerd_store_commits_total")
	c.writes, ok2 = value("schedulerd_store_writes_total")
	return c, ok1 && ok2
}
