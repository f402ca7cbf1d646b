package main

import (
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/schedulerd/schedulerd/client"
)

// backfillFlags fires a schedule's past instants in [--from, --to).
func backfillFlags(fs *flag.FlagSet) func(*env, []string) error {
	from := fs.String("from", "", "first instant of the range, RFC 3339 (required)")
	to := fs.String("to", "", "end of the range (excluded), RFC 3339, not after now (required)")
	maxFires := fs.Int("max-fires", 0, "refuse a range of more instants than this (default 1000, at most 10000)")
	return func(e *env, a []string) error {
		f, err := optTime("from", *from)
		if err != nil {
			return err
		}
		t, err := optTime("to", *to)
		if err != nil {
			return err
		}
		if f == nil || t == nil {
			return fmt.Errorf("--from and --to are required: %w", errUsage)
		}
		in := client.BackfillRequest{From: *f, To: *t}
		if setFlags(fs)["max-fires"] {
			in.MaxFires = maxFires
		}
		return fetch(e, backfillTable)(e.api.BackfillSchedule(e.ctx, a[0], in))
	}
}

func backfillTable(w *tabwriter.Writer, r *client.BackfillResult) {
	fmt.Fprintf(w, "schedule\t%s\nrange\t%s .. %s\ninstants\t%d\nfires\t%d\nskipped\t%d\nexisting\t%d\nevents\t%d\npending\t%d\n",
		r.ScheduleId, ts(r.From), ts(r.To), r.Instants, r.Fires, r.Skipped, r.Existing, r.Events, r.EventsPending)
}
