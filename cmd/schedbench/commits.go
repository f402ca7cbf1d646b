package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
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
	found := 0
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		name, v, _ := strings.Cut(sc.Text(), " ")
		var dst *int64
		switch name {
		case "schedulerd_store_commits_total":
			dst = &c.commits
		case "schedulerd_store_writes_total":
			dst = &c.writes
		default:
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return c, false
		}
		*dst = int64(f)
		found++
	}
	return c, found == 2
}
