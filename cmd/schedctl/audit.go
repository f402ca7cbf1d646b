package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/schedulerd/schedulerd/client"
)

// auditCommands: the audit records, a schedule's versions and a policy's
// load forecast.
func auditCommands() []*command {
	return []*command{
		{group: "audit", verb: "ls", summary: "list the audit records of mutating calls, oldest first", positional: 0, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			var p pageFlags
			p.add(fs)
			object := fs.String("object", "", "only records of this object id")
			tenant := fs.String("tenant", "", "only records of this tenant (admin key)")
			from := fs.String("from", "", "only records made at or after this RFC 3339 time")
			to := fs.String("to", "", "only records made before this RFC 3339 time")
			return func(e *env, _ []string) error {
				l, c := p.params()
				params := &client.ListAuditParams{Limit: l, Cursor: c, ObjectId: optString(*object), TenantId: optString(*tenant)}
				var err error
				if params.From, err = optTime("from", *from); err != nil {
					return err
				}
				if params.To, err = optTime("to", *to); err != nil {
					return err
				}
				return fetch(e, func(w *tabwriter.Writer, v *client.AuditList) {
					fmt.Fprintln(w, "AT\tACTION\tOBJECT\tVERSION\tKEY\tCHANGES\tNOTE")
					for _, r := range v.Items {
						version := "-"
						if r.Version != nil {
							version = fmt.Sprint(*r.Version)
						}
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ts(r.At), r.Action, sp(r.ObjectId), version, sp(r.KeyPrefix), oneLine(changes(r.Diff)), oneLine(sp(r.Note)))
					}
					next(w, v.NextCursor)
				})(e.api.ListAudit(e.ctx, params))
			}
		}},
		{group: "schedules", verb: "versions", args: "SCHEDULE_ID", summary: "list a schedule's stored versions, newest first", positional: 1, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			var p pageFlags
			p.add(fs)
			return func(e *env, a []string) error {
				l, c := p.params()
				return fetch(e, func(w *tabwriter.Writer, v *client.ScheduleVersionList) {
					fmt.Fprintln(w, "VERSION\tSTORED\tACTION\tKEY\tSTATE\tNAME\tNOTE")
					for _, ver := range v.Items {
						fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", ver.Version, ts(ver.At), sp(ver.Action), sp(ver.KeyPrefix), ver.Schedule.State, ver.Schedule.Name, oneLine(sp(ver.Note)))
					}
					next(w, v.NextCursor)
				})(e.api.ListScheduleVersions(e.ctx, a[0], &client.ListScheduleVersionsParams{Limit: l, Cursor: c}))
			}
		}},
		{group: "policies", verb: "forecast", args: "POLICY_ID", summary: "the events the policy's schedules will send it per minute, against what it drains", positional: 1, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			from := fs.String("from", "", "start of the range, RFC 3339 (default: now)")
			to := fs.String("to", "", "end of the range, RFC 3339 (default: a day after the start; at most 7 days)")
			return func(e *env, a []string) error {
				params := &client.ForecastPolicyParams{}
				var err error
				if params.From, err = optTime("from", *from); err != nil {
					return err
				}
				if params.To, err = optTime("to", *to); err != nil {
					return err
				}
				return fetch(e, forecastTable)(e.api.ForecastPolicy(e.ctx, a[0], params))
			}
		}},
	}
}

// changes names a diff's members, each before → after.
func changes(d *map[string]client.AuditChange) string {
	if d == nil {
		return "-"
	}
	keys := make([]string, 0, len(*d))
	for k := range *d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	show := func(v any) string {
		if v == nil {
			return "∅"
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		c := (*d)[k]
		parts[i] = k + ": " + show(c.Before) + " → " + show(c.After)
	}
	return strings.Join(parts, "; ")
}

func forecastTable(w *tabwriter.Writer, v *client.PolicyForecast) {
	fmt.Fprintf(w, "policy\t%s\nrange\t%s .. %s\nschedules\t%d\nevents\t%d\n", v.PolicyId, ts(v.From), ts(v.To), v.Schedules, v.Events)
	if !v.CapacityKnown {
		fmt.Fprintln(w, "capacity\tunknown (no rate, no measured hold time)")
	} else {
		fmt.Fprintf(w, "capacity\t%.1f events/minute\nmax backlog\t%s\ndrained by\t%s\nmissed deadlines\t%s\n",
			*v.CapacityPerMinute, ip(v.MaxBacklog), tsp(v.DrainedBy), ip(v.MissedDeadlines))
	}
	fmt.Fprintln(w, "\nPEAK MINUTE\tEVENTS\tBACKLOG")
	for _, m := range v.Peaks {
		fmt.Fprintf(w, "%s\t%d\t%d\n", ts(m.At), m.Events, m.Backlog)
	}
	if len(v.Drains) > 0 {
		fmt.Fprintln(w, "\nBUSY FROM\tDRAINED AT\tEVENTS\tMAX BACKLOG")
		for _, d := range v.Drains {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", ts(d.Start), tsp(d.DrainedAt), d.Events, d.MaxBacklog)
		}
	}
}
