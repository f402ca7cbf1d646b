package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schedulerd/schedulerd/client"
)

// pageFlags are the --limit and --cursor of list commands.
type pageFlags struct {
	limit  int
	cursor string
}

func (p *pageFlags) add(fs *flag.FlagSet) {
	fs.IntVar(&p.limit, "limit", 0, "page size (default: the server's)")
	fs.StringVar(&p.cursor, "cursor", "", "cursor of the next page, from the previous page")
}

func (p *pageFlags) params() (*client.Limit, *client.Cursor) {
	var l *client.Limit
	var c *client.Cursor
	if p.limit > 0 {
		l = &p.limit
	}
	if p.cursor != "" {
		c = &p.cursor
	}
	return l, c
}

// optString returns nil for a flag left empty.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// optTime parses an RFC 3339 flag value; nil for empty.
func optTime(name, s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: not an RFC 3339 time such as 2026-01-02T15:04:05Z: %w", name, s, errUsage)
	}
	return &t, nil
}

// setFlags reports which flags were given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// noFlags is the flags function of commands without their own flags.
func noFlags(do func(e *env, args []string) error) func(*flag.FlagSet) func(*env, []string) error {
	return func(*flag.FlagSet) func(*env, []string) error { return do }
}

func commands() []*command {
	return append(baseCommands(), auditCommands()...)
}

func baseCommands() []*command {
	return []*command{
		// tenants (admin key)
		{group: "tenants", verb: "ls", summary: "list tenants (admin)", positional: 0, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			var p pageFlags
			p.add(fs)
			return func(e *env, _ []string) error {
				l, c := p.params()
				return fetch(e, tenantsTable)(e.api.ListTenants(e.ctx, &client.ListTenantsParams{Limit: l, Cursor: c}))
			}
		}},
		{group: "tenants", verb: "create", summary: "create a tenant (admin)", positional: 0, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			name := fs.String("name", "", "the tenant's name (required)")
			return func(e *env, _ []string) error {
				return fetch(e, tenantTable)(e.api.CreateTenant(e.ctx, nil, client.TenantCreate{Name: *name}))
			}
		}},
		{group: "tenants", verb: "get", args: "TENANT_ID", summary: "show a tenant (admin)", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, tenantTable)(e.api.GetTenant(e.ctx, a[0]))
		})},
		{group: "tenants", verb: "patch", args: "TENANT_ID", summary: "change a tenant's name, weight or quotas (admin)", positional: 1, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			name := fs.String("name", "", "new name")
			weight := fs.Int("weight", 0, "fair-share weight")
			maxSched := fs.Int("max-schedules", 0, "quota: schedules")
			perFire := fs.Int("max-events-per-fire", 0, "quota: events per fire")
			perMin := fs.Int("max-events-per-minute", 0, "quota: events per minute")
			stored := fs.Int("max-events-stored", 0, "quota: events stored")
			cals := fs.Int("max-calendars", 0, "quota: exclusion calendars")
			return func(e *env, a []string) error {
				set := setFlags(fs)
				var in client.TenantUpdate
				if set["name"] {
					in.Name = name
				}
				if set["weight"] {
					in.Weight = weight
				}
				q := client.TenantQuotas{}
				quota := func(flag string, v *int) *int {
					if set[flag] {
						return v
					}
					return nil
				}
				q.MaxSchedules = quota("max-schedules", maxSched)
				q.MaxEventsPerFire = quota("max-events-per-fire", perFire)
				q.MaxEventsPerMinute = quota("max-events-per-minute", perMin)
				q.MaxEventsStored = quota("max-events-stored", stored)
				q.MaxCalendars = quota("max-calendars", cals)
				if q != (client.TenantQuotas{}) {
					in.Quotas = &q
				}
				return fetch(e, tenantTable)(e.api.UpdateTenant(e.ctx, a[0], in))
			}
		}},

		// keys (admin key)
		{group: "keys", verb: "ls", args: "TENANT_ID", summary: "list a tenant's API keys (admin)", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, func(w *tabwriter.Writer, v *client.APIKeyList) {
				fmt.Fprintln(w, "ID\tPREFIX\tCREATED\tREVOKED")
				for _, k := range v.Items {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k.Id, k.Prefix, ts(k.CreatedAt), tsp(k.RevokedAt))
				}
			})(e.api.ListAPIKeys(e.ctx, a[0]))
		})},
		{group: "keys", verb: "create", args: "TENANT_ID", summary: "create an API key; the clear key is shown this once (admin)", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, func(w *tabwriter.Writer, v *client.APIKeyCreated) {
				fmt.Fprintln(w, "ID\tTENANT\tKEY")
				fmt.Fprintf(w, "%s\t%s\t%s\n", v.Id, v.TenantId, v.Key)
			})(e.api.CreateAPIKey(e.ctx, a[0], nil))
		})},
		{group: "keys", verb: "revoke", args: "TENANT_ID KEY_ID", summary: "revoke an API key (admin)", positional: 2, flags: noFlags(func(e *env, a []string) error {
			if _, err := call(e.api.RevokeAPIKey(e.ctx, a[0], a[1])); err != nil {
				return err
			}
			return done(e, "revoked", a[1])
		})},

		// policies
		{group: "policies", verb: "ls", summary: "list throttling policies", positional: 0, flags: noFlags(func(e *env, _ []string) error {
			return fetch(e, func(w *tabwriter.Writer, v *client.PolicyList) {
				policyHeader(w)
				for i := range v.Items {
					policyRow(w, &v.Items[i])
				}
			})(e.api.ListPolicies(e.ctx))
		})},
		{group: "policies", verb: "create", summary: "create a throttling policy", positional: 0, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			name := fs.String("name", "", "the policy's name (required)")
			maxIn := fs.Int("max-in-flight", 0, "tokens: events in flight at once (required)")
			timeout := fs.String("token-timeout", "", "how long a token is held without release, e.g. 15m")
			auto := fs.Bool("auto-release", false, "release the token when the delivery succeeds")
			rate := fs.Float64("rate-per-second", 0, "most events per second on average, on top of --max-in-flight (ratePerSecond)")
			burst := fs.Int("burst", 0, "events that may go at once after a quiet spell; only with --rate-per-second")
			key := fs.String("concurrency-key", "", `makes --max-in-flight a bound per key value: a JSON pointer into the payload such as "/customerId", or "scheduleId"`)
			total := fs.Int("max-in-flight-total", 0, "most tokens out across all key values; only with --concurrency-key")
			adaptiveMin := fs.Int("adaptive-min", 0, "adaptive limit: the floor it moves down to from the consumer's signals (its ceiling is --max-in-flight)")
			limitsFile := fs.String("limits", "", `JSON file of the limit schedule (the API's limits: [{"when": {"days", "from", "to", "timezone"} or {"calendarId"}, "maxInFlight", "ratePerSecond"}]); - reads stdin`)
			var labels listFlag
			fs.Var(&labels, "label", "a label, key=value (repeatable)")
			return func(e *env, _ []string) error {
				set := setFlags(fs)
				in := client.PolicyCreate{Name: *name, MaxInFlight: *maxIn, TokenTimeout: optString(*timeout), ConcurrencyKey: optString(*key)}
				if *limitsFile != "" {
					rules, err := readLimits(e, *limitsFile)
					if err != nil {
						return err
					}
					in.Limits = &rules
				}
				l, err := labelsOf(labels)
				if err != nil {
					return err
				}
				if l != nil {
					m := map[string]string(*l)
					in.Labels = &m
				}
				if set["auto-release"] {
					in.AutoRelease = auto
				}
				if set["rate-per-second"] {
					in.RatePerSecond = rate
				}
				if set["burst"] {
					in.Burst = burst
				}
				if set["max-in-flight-total"] {
					in.MaxInFlightTotal = total
				}
				if set["adaptive-min"] {
					in.Adaptive = &client.AdaptiveLimit{Min: *adaptiveMin}
				}
				return fetch(e, policyTable)(e.api.CreatePolicy(e.ctx, nil, in))
			}
		}},
		{group: "policies", verb: "hold", args: "POLICY_ID", summary: "hold a policy's inflow at most at --max-in-flight (0 stops it) until --until or for --for; it ends by itself", positional: 1, flags: policyHoldFlags},
		{group: "policies", verb: "unhold", args: "POLICY_ID", summary: "end a policy's hold now", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, policyStatusTable)(e.api.ClearPolicyHold(e.ctx, a[0]))
		})},
		{group: "policies", verb: "status", args: "POLICY_ID", summary: "tokens out, events waiting, the effective limit and why, and the drain time", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, policyStatusTable)(e.api.GetPolicyStatus(e.ctx, a[0]))
		})},
		{group: "policies", verb: "consumer-key", args: "POLICY_ID", summary: "issue a consumer key that may only hold and read the status of the policy (the clear key is shown once)", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, keyCreatedTable)(e.api.CreateConsumerKey(e.ctx, a[0], nil))
		})},
		{group: "policies", verb: "consumer-keys", args: "POLICY_ID", summary: "list the policy's consumer keys", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, keyListTable)(e.api.ListConsumerKeys(e.ctx, a[0]))
		})},
		{group: "policies", verb: "revoke-consumer-key", args: "POLICY_ID KEY_ID", summary: "revoke one of the policy's consumer keys", positional: 2, flags: noFlags(func(e *env, a []string) error {
			if _, err := call(e.api.RevokeConsumerKey(e.ctx, a[0], a[1])); err != nil {
				return err
			}
			return done(e, "revoked", a[1])
		})},
		{group: "policies", verb: "get", args: "POLICY_ID", summary: "show a policy", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, policyTable)(e.api.GetPolicy(e.ctx, a[0]))
		})},
		{group: "policies", verb: "delete", args: "POLICY_ID", summary: "delete a policy no schedule names", positional: 1, flags: noFlags(func(e *env, a []string) error {
			if _, err := call(e.api.DeletePolicy(e.ctx, a[0])); err != nil {
				return err
			}
			return done(e, "deleted", a[0])
		})},

		// schedules
		{group: "schedules", verb: "ls", summary: "list schedules", positional: 0, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			var p pageFlags
			p.add(fs)
			state := fs.String("state", "", "only schedules in this state: active, paused or completed")
			policy := fs.String("policy", "", "only schedules of this policy id")
			prefix := fs.String("name-prefix", "", "only schedules whose name starts with this")
			var labels listFlag
			fs.Var(&labels, "label", "only schedules with this label: key=value, or key for any value (repeatable; all must hold)")
			return func(e *env, _ []string) error {
				l, c := p.params()
				params := &client.ListSchedulesParams{Limit: l, Cursor: c, PolicyId: optString(*policy), NamePrefix: optString(*prefix)}
				if len(labels) > 0 {
					params.Label = (*[]string)(&labels)
				}
				if *state != "" {
					st := client.ScheduleState(*state)
					params.State = &st
				}
				return fetch(e, func(w *tabwriter.Writer, v *client.ScheduleList) {
					fmt.Fprintln(w, "ID\tNAME\tSTATE\tWHEN\tTIMEZONE\tEVENTS\tPOLICY\tNEXT FIRE\tLABELS")
					for _, s := range v.Items {
						nextFire := "-"
						if len(s.NextFireTimes) > 0 {
							nextFire = ts(s.NextFireTimes[0])
						}
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.Id, s.Name, s.State, when(&s), s.Timezone, s.EventCount, sp(s.PolicyId), nextFire, labelsText(s.Labels))
					}
					next(w, v.NextCursor)
				})(e.api.ListSchedules(e.ctx, params))
			}
		}},
		{group: "schedules", verb: "get", args: "SCHEDULE_ID", summary: "show a schedule", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, scheduleTable)(e.api.GetSchedule(e.ctx, a[0]))
		})},
		{group: "schedules", verb: "create", summary: "create a schedule from flags, or from a JSON body with --file", positional: 0, flags: scheduleCreateFlags},
		{group: "schedules", verb: "create-batch", summary: "create many schedules from a JSON array or NDJSON file (-f), in batches of up to 1,000", positional: 0, flags: scheduleCreateBatchFlags},
		{group: "schedules", verb: "actions", summary: "pause, resume, delete or trigger every schedule a selector (--label, --id, --policy, --name-prefix) matches", positional: 0, flags: scheduleActionsFlags},
		{group: "schedules", verb: "pause", args: "SCHEDULE_ID", summary: "pause a schedule, with a note and a time it resumes by itself", positional: 1, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			note := fs.String("note", "", "why the schedule is paused (at most 1,000 characters)")
			until := fs.String("until", "", "resume by itself at this RFC 3339 time")
			return func(e *env, a []string) error {
				u, err := optTime("until", *until)
				if err != nil {
					return err
				}
				return fetch(e, scheduleTable)(e.api.PauseSchedule(e.ctx, a[0], client.PauseRequest{Note: optString(*note), Until: u}))
			}
		}},
		{group: "schedules", verb: "skip", args: "SCHEDULE_ID", summary: "skip the next --count fires, or every fire before --until (recorded as skipped_manual)", positional: 1, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			count := fs.Int("count", 0, "skip this many next fires (1..1000)")
			until := fs.String("until", "", "skip every fire before this RFC 3339 time")
			return func(e *env, a []string) error {
				u, err := optTime("until", *until)
				if err != nil {
					return err
				}
				in := client.SkipRequest{Until: u}
				if setFlags(fs)["count"] {
					in.Count = count
				}
				return fetch(e, scheduleTable)(e.api.SkipSchedule(e.ctx, a[0], in))
			}
		}},
		{group: "schedules", verb: "resume", args: "SCHEDULE_ID", summary: "resume a paused schedule", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, scheduleTable)(e.api.ResumeSchedule(e.ctx, a[0]))
		})},
		{group: "schedules", verb: "trigger", args: "SCHEDULE_ID", summary: "fire a schedule now, optionally with its own --count, --payload and --note", positional: 1, flags: triggerFlags},
		{group: "schedules", verb: "backfill", args: "SCHEDULE_ID", summary: "fire a schedule's past instants in [--from, --to) now, once each (decision backfill)", positional: 1, flags: backfillFlags},
		{group: "schedules", verb: "preview", args: "[SCHEDULE_ID]", summary: "show the next fire times of a schedule, or of a definition given as with create (--file or flags) without saving it", positional: -1, flags: previewFlags},
		{group: "schedules", verb: "delete", args: "SCHEDULE_ID", summary: "delete a schedule (its waiting events are cancelled)", positional: 1, flags: noFlags(func(e *env, a []string) error {
			if _, err := call(e.api.DeleteSchedule(e.ctx, a[0])); err != nil {
				return err
			}
			return done(e, "deleted", a[0])
		})},

		// fires
		{group: "fires", verb: "ls", args: "SCHEDULE_ID", summary: "list a schedule's fires, newest first", positional: 1, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			var p pageFlags
			p.add(fs)
			return func(e *env, a []string) error {
				l, c := p.params()
				return fetch(e, func(w *tabwriter.Writer, v *client.FireList) {
					fireHeader(w)
					for i := range v.Items {
						fireRow(w, &v.Items[i])
					}
					next(w, v.NextCursor)
				})(e.api.ListScheduleFires(e.ctx, a[0], &client.ListScheduleFiresParams{Limit: l, Cursor: c}))
			}
		}},
		{group: "fires", verb: "get", args: "FIRE_ID", summary: "show a fire with its event counts", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, fireTable)(e.api.GetFire(e.ctx, a[0]))
		})},
		{group: "fires", verb: "cancel", args: "FIRE_ID", summary: "cancel a fire's waiting events; events in flight finish", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, fireTable)(e.api.CancelFire(e.ctx, a[0]))
		})},

		// events
		{group: "events", verb: "ls", summary: "list events, by id", positional: 0, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			var p pageFlags
			p.add(fs)
			sched := fs.String("schedule", "", "only events of this schedule id")
			fire := fs.String("fire", "", "only events of this fire id")
			status := fs.String("status", "", "only events in this status (pending, scheduled, delivering, delivered, released, retrying, dead, cancelled, expired)")
			from := fs.String("from", "", "only events launched at or after this RFC 3339 time")
			to := fs.String("to", "", "only events launched before this RFC 3339 time")
			return func(e *env, _ []string) error {
				l, c := p.params()
				params := &client.ListEventsParams{Limit: l, Cursor: c, ScheduleId: optString(*sched), FireId: optString(*fire)}
				if *status != "" {
					st := client.EventStatus(*status)
					params.Status = &st
				}
				var err error
				if params.From, err = optTime("from", *from); err != nil {
					return err
				}
				if params.To, err = optTime("to", *to); err != nil {
					return err
				}
				return fetch(e, func(w *tabwriter.Writer, v *client.EventList) {
					fmt.Fprintln(w, "ID\tSTATUS\tSCHEDULE\tFIRE\tLAUNCH\tATTEMPTS\tLAST ERROR")
					for _, ev := range v.Items {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", ev.Id, ev.Status, ev.ScheduleId, ev.FireId, ts(ev.LaunchAt), ev.Attempts, oneLine(errorCause(sp(ev.LastError), ev.Id)))
					}
					next(w, v.NextCursor)
				})(e.api.ListEvents(e.ctx, params))
			}
		}},
		{group: "events", verb: "get", args: "EVENT_ID", summary: "show an event", positional: 1, flags: noFlags(func(e *env, a []string) error {
			return fetch(e, eventTable)(e.api.GetEvent(e.ctx, a[0]))
		})},
		{group: "events", verb: "redrive", args: "[EVENT_ID]", summary: "send a dead event again, or every dead event matching --fire/--schedule/--from/--to/--all", positional: -1, flags: func(fs *flag.FlagSet) func(*env, []string) error {
			sched := fs.String("schedule", "", "bulk: dead events of this schedule id")
			fire := fs.String("fire", "", "bulk: dead events of this fire id")
			from := fs.String("from", "", "bulk: dead events launched at or after this RFC 3339 time")
			to := fs.String("to", "", "bulk: dead events launched before this RFC 3339 time")
			all := fs.Bool("all", false, "bulk: every dead event of the tenant")
			return func(e *env, a []string) error {
				bulk := *sched != "" || *fire != "" || *from != "" || *to != "" || *all
				switch {
				case len(a) > 1:
					return fmt.Errorf("at most one EVENT_ID: %w", errUsage)
				case len(a) == 1 && bulk:
					return fmt.Errorf("give an EVENT_ID or bulk filters, not both: %w", errUsage)
				case len(a) == 0 && !bulk:
					return fmt.Errorf("give an EVENT_ID, or select dead events with --fire, --schedule, --from, --to or --all: %w", errUsage)
				case len(a) == 1:
					return fetch(e, eventTable)(e.api.RedriveEvent(e.ctx, a[0]))
				}
				in := client.RedriveRequest{ScheduleId: optString(*sched), FireId: optString(*fire)}
				if *all {
					in.All = all
				}
				var err error
				if in.From, err = optTime("from", *from); err != nil {
					return err
				}
				if in.To, err = optTime("to", *to); err != nil {
					return err
				}
				return fetch(e, func(w *tabwriter.Writer, v *client.RedriveResult) {
					fmt.Fprintf(w, "redriven\t%d\n", v.Count)
					if v.More != nil && *v.More {
						fmt.Fprintln(w, "more dead events match: run the command again")
					}
				})(e.api.RedriveEvents(e.ctx, in))
			}
		}},

		// calendars
		calendarsLs, calendarsCreate, calendarsGet, calendarsUpdate, calendarsDelete,

		// schedules as code
		applyCmd, diffCmd,

		// summary
		{group: "summary", summary: "the tenant's event counts, policies, lateness and schedules", positional: 0, flags: noFlags(func(e *env, _ []string) error {
			return fetch(e, summaryTable)(e.api.GetSummary(e.ctx))
		})},
	}
}

// scheduleCreateFlags builds the body of POST /v1/schedules from flags, or
// sends a JSON file as it is (the server validates either).
func scheduleCreateFlags(fs *flag.FlagSet) func(*env, []string) error {
	body := specFlags(fs)
	return func(e *env, _ []string) error {
		r, in, err := body(e)
		switch {
		case err != nil:
			return err
		case r != nil:
			return fetch(e, scheduleTable)(e.api.CreateScheduleWithBody(e.ctx, nil, "application/json", r))
		}
		return fetch(e, scheduleTable)(e.api.CreateSchedule(e.ctx, nil, *in))
	}
}

// previewFlags previews a stored schedule (one argument) or a definition
// given as scheduleCreateFlags takes it (none).
func previewFlags(fs *flag.FlagSet) func(*env, []string) error {
	n := fs.Int("n", 0, "how many fire times (default: the server's)")
	explain := fs.Bool("explain", false, "also list the fire times the schedule's calendars exclude, and which calendar does (a stored schedule)")
	body := specFlags(fs)
	return func(e *env, a []string) error {
		table := fetch(e, previewTable)
		if len(a) == 1 {
			set := setFlags(fs)
			for _, f := range append([]string{"file"}, specBodyFlags...) {
				if set[f] {
					return fmt.Errorf("--%s: a stored schedule is previewed as it is; leave out SCHEDULE_ID to preview a definition: %w", f, errUsage)
				}
			}
			p := &client.PreviewScheduleParams{}
			if *n > 0 {
				p.Count = n
			}
			if *explain {
				p.Explain = explain
			}
			return table(e.api.PreviewSchedule(e.ctx, a[0], p))
		}
		if len(a) > 1 {
			return fmt.Errorf("want at most one SCHEDULE_ID, got %d: %w", len(a), errUsage)
		}
		p := &client.PreviewScheduleSpecParams{}
		if *n > 0 {
			p.Count = n
		}
		r, in, err := body(e)
		switch {
		case err != nil:
			return err
		case r != nil:
			return table(e.api.PreviewScheduleSpecWithBody(e.ctx, p, "application/json", r))
		}
		return table(e.api.PreviewScheduleSpec(e.ctx, p, *in))
	}
}

func previewTable(w *tabwriter.Writer, v *client.Preview) {
	if v.Description != nil {
		fmt.Fprintf(w, "fires %s (%s)\n", *v.Description, v.Timezone)
	}
	if v.Jitter != nil {
		note := ""
		if v.ScheduleId == "" {
			note = "; the offsets are fixed when the schedule gets its id"
		}
		fmt.Fprintf(w, "jitter up to %s%s\n", *v.Jitter, note)
	}
	fmt.Fprintf(w, "UTC\tLOCAL (%s)\tLAUNCH\tDST\n", v.Timezone)
	for _, f := range v.FireTimes {
		launch := "-"
		if f.LaunchAt != nil {
			launch = ts(*f.LaunchAt) + " (+" + sp(f.Jitter) + ")"
		}
		dst := "-"
		if f.Dst != nil {
			dst = string(*f.Dst)
		}
		skipped := ""
		if f.Skipped != nil && *f.Skipped {
			skipped = "\tskipped"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s%s\n", ts(f.Utc), f.Local, launch, dst, skipped)
	}
	excludedTable(w, v.Excluded)
}

// triggerFlags fires a schedule now, with the body of its flags.
func triggerFlags(fs *flag.FlagSet) func(*env, []string) error {
	count := fs.Int("count", 0, "events of this fire (default: the schedule's)")
	payload := fs.String("payload", "", "JSON payload of this fire's events (default: the schedule's)")
	note := fs.String("note", "", "note kept on the fire (default \"triggered\")")
	return func(e *env, a []string) error {
		set := setFlags(fs)
		var in client.TriggerRequest
		if set["count"] {
			in.EventCount = count
		}
		if set["payload"] {
			if !json.Valid([]byte(*payload)) {
				return fmt.Errorf("--payload is not JSON: %w", errUsage)
			}
			p := client.Payload(json.RawMessage(*payload))
			in.Payload = &p
		}
		in.Note = optString(*note)
		return fetch(e, fireTable)(e.api.TriggerSchedule(e.ctx, a[0], in))
	}
}

// specBodyFlags are the flags of specFlags that make a body, which --file
// excludes.
var specBodyFlags = []string{"name", "cron", "tz", "run-at", "count", "target", "queue-url", "policy", "payload", "max-attempts",
	"priority", "window", "spread", "overlap", "misfire", "start-at", "end-at", "jitter", "label", "exclude-calendar", "on-excluded",
	"interval", "crons", "notify", "after", "after-when", "deadline", "on-deadline", "max-event-age"}

// specFlags declares the flags of a schedule definition (create, preview)
// and returns what reads them: the body of --file as it is, or the
// definition the other flags make.
func specFlags(fs *flag.FlagSet) func(*env) (io.Reader, *client.ScheduleCreate, error) {
	file := fs.String("file", "", "JSON body of the schedule (the API's ScheduleCreate); - reads stdin. Other body flags are then not allowed")
	name := fs.String("name", "", "name (required)")
	cronExpr := fs.String("cron", "", "cron expression, e.g. \"0 3 * * *\"")
	tz := fs.String("tz", "", "IANA timezone of the cron expression (default UTC)")
	runAt := fs.String("run-at", "", "one-off: fire once at this RFC 3339 time instead of a cron expression")
	count := fs.Int("count", 0, "events per fire (default 1)")
	target := fs.String("target", "", "HTTP(S) URL the events are POSTed to")
	queue := fs.String("queue-url", "", "SQS queue URL the events are sent to (instead of --target)")
	policy := fs.String("policy", "", "throttling policy id")
	payload := fs.String("payload", "", "JSON payload of the events")
	attempts := fs.Int("max-attempts", 0, "delivery attempts per event")
	priority := fs.Int("priority", 0, "higher goes first among waiting events (default 0)")
	window := fs.String("window", "", "events of a fire must finish within this Go duration, e.g. 2h")
	spread := fs.Bool("spread", false, "spread the launch times of a fire's events evenly over --window")
	overlap := fs.String("overlap", "", "a fire while the previous one's events are still out: allow (default), skip or cancel")
	misfire := fs.String("misfire", "", "fires missed while the service was down: fire_once (default), fire_all or skip")
	startAt := fs.String("start-at", "", "no fires before this RFC 3339 time")
	endAt := fs.String("end-at", "", "no fires after this RFC 3339 time")
	jitter := fs.String("jitter", "", "delay each fire's launch by a fixed offset below this Go duration, e.g. 15m")
	var labels listFlag
	fs.Var(&labels, "label", "a label, key=value (repeatable)")
	var excl listFlag
	fs.Var(&excl, "exclude-calendar", "id of a calendar whose excluded times the schedule does not fire in (repeat for several)")
	onExcl := fs.String("on-excluded", "", "a fire a calendar excludes: skip (default) or next_included")
	interval := fs.String("interval", "", "fire every this Go duration of elapsed time (at least 1m), from --start-at or one interval after creation, instead of a cron expression")
	deadline := fs.String("deadline", "", "a fire must be finished this Go duration after its fire time, e.g. 45m (at least --window; default: the window's end)")
	onDeadline := fs.String("on-deadline", "", "a fire not finished by its deadline: record (default) or expire (its waiting events are not sent)")
	maxAge := fs.String("max-event-age", "", "an event not delivered this Go duration after its fire time is not attempted again, e.g. 2h")
	var crons listFlag
	fs.Var(&crons, "crons", "one of several cron expressions the schedule fires at, each instant once (repeatable; instead of --cron)")
	var notify listFlag
	fs.Var(&notify, "notify", "KINDS=ADDRESS: send notifications of these comma-separated kinds (fire.finished, fire.has_dead, fire.deadline_missed, fire.skipped, event.dead) to an http(s) URL, or to an SQS queue as sqs:QUEUE_URL (repeatable)")
	after := fs.String("after", "", "fire once after each finished fire of this schedule id instead of on a clock")
	afterWhen := fs.String("after-when", "", "with --after: finished (default: whatever the events' outcome) or succeeded (every event released)")
	return func(e *env) (io.Reader, *client.ScheduleCreate, error) {
		set := setFlags(fs)
		if *file != "" {
			for _, f := range specBodyFlags {
				if set[f] {
					return nil, nil, fmt.Errorf("--file and --%s: give the whole body in the file: %w", f, errUsage)
				}
			}
			if *file == "-" {
				return e.stdin, nil, nil
			}
			// Read whole: the request is sent after this returns.
			b, err := os.ReadFile(*file)
			if err != nil {
				return nil, nil, err
			}
			return bytes.NewReader(b), nil, nil
		}
		in := client.ScheduleCreate{Name: *name, Cron: optString(*cronExpr), Timezone: optString(*tz), PolicyId: optString(*policy),
			Jitter: optString(*jitter), Deadline: optString(*deadline), MaxEventAge: optString(*maxAge)}
		if *onDeadline != "" {
			od := client.OnDeadline(*onDeadline)
			in.OnDeadline = &od
		}
		var err error
		if in.RunAt, err = optTime("run-at", *runAt); err != nil {
			return nil, nil, err
		}
		if set["count"] {
			in.EventCount = count
		}
		if set["max-attempts"] {
			in.MaxAttempts = attempts
		}
		if set["priority"] {
			in.Priority = priority
		}
		if set["spread"] {
			in.Spread = spread
		}
		in.Window = optString(*window)
		if *overlap != "" {
			o := client.Overlap(*overlap)
			in.Overlap = &o
		}
		if *misfire != "" {
			m := client.Misfire(*misfire)
			in.Misfire = &m
		}
		if in.StartAt, err = optTime("start-at", *startAt); err != nil {
			return nil, nil, err
		}
		if in.EndAt, err = optTime("end-at", *endAt); err != nil {
			return nil, nil, err
		}
		if in.Labels, err = labelsOf(labels); err != nil {
			return nil, nil, err
		}
		if len(excl) > 0 {
			in.ExcludeCalendars = (*[]string)(&excl)
		}
		if *onExcl != "" {
			o := client.OnExcluded(*onExcl)
			in.OnExcluded = &o
		}
		if set["interval"] {
			in.Interval = interval
		}
		if len(crons) > 0 {
			in.Crons = (*[]string)(&crons)
		}
		if in.Notify, err = notifyOf(notify); err != nil {
			return nil, nil, err
		}
		switch {
		case *after != "":
			in.After = &client.After{ScheduleId: *after}
			if *afterWhen != "" {
				w := client.AfterWhen(*afterWhen)
				in.After.When = &w
			}
		case *afterWhen != "":
			return nil, nil, fmt.Errorf("--after-when needs --after: %w", errUsage)
		}
		switch {
		case *queue != "" && *target != "":
			return nil, nil, fmt.Errorf("--target and --queue-url: give one: %w", errUsage)
		case *queue != "":
			in.Target = client.Target{Type: client.TargetTypeSqs, QueueUrl: queue}
		default:
			in.Target = client.Target{Type: client.TargetTypeHttp, Url: optString(*target)}
		}
		if *payload != "" {
			if !json.Valid([]byte(*payload)) {
				return nil, nil, fmt.Errorf("--payload is not JSON: %w", errUsage)
			}
			p := client.Payload(json.RawMessage(*payload))
			in.Payload = &p
		}
		return nil, &in, nil
	}
}

// notifyOf makes the receivers of --notify values, KINDS=ADDRESS each.
func notifyOf(vs []string) (*client.Notify, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	out := client.Notify{}
	for _, v := range vs {
		kinds, addr, ok := strings.Cut(v, "=")
		if !ok || kinds == "" || addr == "" {
			return nil, fmt.Errorf("--notify %q: want KINDS=ADDRESS, e.g. fire.finished,fire.has_dead=https://ops.example.com/hook: %w", v, errUsage)
		}
		n := client.NotifyEntry{}
		for _, k := range strings.Split(kinds, ",") {
			n.On = append(n.On, client.NotifyKind(strings.TrimSpace(k)))
		}
		if q, isQueue := strings.CutPrefix(addr, "sqs:"); isQueue {
			n.QueueUrl = &q
		} else {
			n.Url = &addr
		}
		out = append(out, n)
	}
	return &out, nil
}

// done confirms a call that answers no body.
func done(e *env, what, id string) error {
	if e.json {
		b, _ := json.Marshal(map[string]string{"id": id, "result": what})
		_, err := fmt.Fprintf(e.out, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(e.out, "%s %s\n", what, id)
	return err
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// errorCause is the part of an event's last error that says why it failed:
// without the "httpdelivery: event ID: " the delivery puts first (the row
// names the event) and the request's method and URL (the schedule names
// the target), which would fill a table column before the cause.
func errorCause(s, eventID string) string {
	if _, after, ok := strings.Cut(s, "event "+eventID+": "); ok {
		s = after
	}
	// A status error: POST URL: status 500: body.
	if rest, ok := strings.CutPrefix(s, "POST "); ok {
		if i := strings.Index(rest, ": "); i >= 0 && !strings.ContainsAny(rest[:i], " ") {
			return rest[i+2:]
		}
	}
	// A transport error (*url.Error): Post "URL": cause.
	if rest, ok := strings.CutPrefix(s, `Post "`); ok {
		if _, cause, ok := strings.Cut(rest, `": `); ok {
			return cause
		}
	}
	return s
}

func when(s *client.Schedule) string {
	switch {
	case s.Cron != nil:
		return *s.Cron
	case s.Crons != nil:
		return strings.Join(*s.Crons, " | ")
	case s.Interval != nil:
		return "every " + *s.Interval
	case s.RunAt != nil:
		return "at " + ts(*s.RunAt)
	case s.After != nil:
		return "after " + s.After.ScheduleId + " (" + string(deref(s.After.When, client.AfterWhenFinished)) + ")"
	}
	return "-"
}

func tenantsTable(w *tabwriter.Writer, v *client.TenantList) {
	fmt.Fprintln(w, "ID\tNAME\tWEIGHT\tCREATED")
	for _, t := range v.Items {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", t.Id, t.Name, t.Weight, ts(t.CreatedAt))
	}
	next(w, v.NextCursor)
}

func tenantTable(w *tabwriter.Writer, t *client.Tenant) {
	fmt.Fprintf(w, "id\t%s\nname\t%s\nweight\t%d\ncreated\t%s\n", t.Id, t.Name, t.Weight, ts(t.CreatedAt))
	fmt.Fprintf(w, "maxSchedules\t%s\nmaxEventsPerFire\t%s\nmaxEventsPerMinute\t%s\nmaxEventsStored\t%s\nmaxCalendars\t%s\n",
		ip(t.Quotas.MaxSchedules), ip(t.Quotas.MaxEventsPerFire), ip(t.Quotas.MaxEventsPerMinute), ip(t.Quotas.MaxEventsStored), ip(t.Quotas.MaxCalendars))
}

func policyHeader(w io.Writer) {
	fmt.Fprintln(w, "ID\tNAME\tMAX IN FLIGHT\tIN USE\tWAITING\tTOKEN TIMEOUT\tAUTO RELEASE")
}

func policyRow(w io.Writer, p *client.Policy) {
	fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%t\n", p.Id, p.Name, p.MaxInFlight, p.TokensInUse, p.Waiting, p.TokenTimeout, p.AutoRelease)
}

func policyTable(w *tabwriter.Writer, p *client.Policy) {
	policyHeader(w)
	policyRow(w, p)
	var limits []string
	if p.RatePerSecond != nil {
		limits = append(limits, fmt.Sprintf("rate %g/s burst %s", *p.RatePerSecond, ip(p.Burst)))
	}
	if p.ConcurrencyKey != nil {
		limits = append(limits, fmt.Sprintf("per key %s (total %s)", *p.ConcurrencyKey, ip(p.MaxInFlightTotal)))
	}
	if p.Adaptive != nil {
		limits = append(limits, fmt.Sprintf("adaptive %d to %d, now %s", p.Adaptive.Min, p.MaxInFlight, ip(p.EffectiveLimit)))
	}
	if p.Limits != nil {
		limits = append(limits, fmt.Sprintf("%d time-of-day or calendar limits", len(*p.Limits)))
	}
	if p.Hold != nil {
		limits = append(limits, fmt.Sprintf("held at %d until %s", p.Hold.MaxInFlight, p.Hold.Until.Format(time.RFC3339)))
	}
	if p.EffectiveLimit != nil && p.LimitSource != nil && (p.Limits != nil || p.Hold != nil) {
		limits = append(limits, fmt.Sprintf("effective limit %d (%s)", *p.EffectiveLimit, *p.LimitSource))
	}
	if p.Labels != nil {
		limits = append(limits, "labels "+labelsText(p.Labels))
	}
	if len(limits) > 0 {
		_ = w.Flush()
		fmt.Fprintf(w, "\n%s\n", strings.Join(limits, "; "))
	}
}

func scheduleTable(w *tabwriter.Writer, s *client.Schedule) {
	fmt.Fprintf(w, "id\t%s\nname\t%s\nstate\t%s\nwhen\t%s\ntimezone\t%s\nevents\t%d\npolicy\t%s\n", s.Id, s.Name, s.State, when(s), s.Timezone, s.EventCount, sp(s.PolicyId))
	target := sp(s.Target.Url)
	if s.Target.QueueUrl != nil {
		target = *s.Target.QueueUrl
	}
	fmt.Fprintf(w, "target\t%s %s\npriority\t%d\noverlap\t%s\nmisfire\t%s\n", s.Target.Type, target, s.Priority, s.Overlap, s.Misfire)
	if s.Window != nil {
		fmt.Fprintf(w, "window\t%s (spread %t)\n", *s.Window, s.Spread)
	}
	if s.ExcludeCalendars != nil {
		fmt.Fprintf(w, "calendars\t%s (on excluded: %s)\n", strings.Join(*s.ExcludeCalendars, ", "), *s.OnExcluded)
	}
	if s.Jitter != nil {
		fmt.Fprintf(w, "jitter\t%s\n", *s.Jitter)
	}
	if s.Notify != nil {
		for i, n := range *s.Notify {
			label := ""
			if i == 0 {
				label = "notify"
			}
			addr := sp(n.Url)
			if n.QueueUrl != nil {
				addr = "sqs:" + *n.QueueUrl
			}
			kinds := make([]string, len(n.On))
			for j, k := range n.On {
				kinds[j] = string(k)
			}
			fmt.Fprintf(w, "%s\t%s=%s\n", label, strings.Join(kinds, ","), addr)
		}
	}
	if s.Deadline != nil || s.OnDeadline != nil {
		fmt.Fprintf(w, "deadline\t%s (on deadline: %s)\n", cmp.Or(sp(s.Deadline), "window end"), cmp.Or(string(ptrOr(s.OnDeadline)), "record"))
	}
	if s.MaxEventAge != nil {
		fmt.Fprintf(w, "max event age\t%s\n", *s.MaxEventAge)
	}
	fmt.Fprintf(w, "version\t%d\nlabels\t%s\n", s.Version, labelsText(s.Labels))
	if s.PausedAt != nil {
		fmt.Fprintf(w, "paused\t%s by %s\n", ts(*s.PausedAt), sp(s.PausedBy))
	}
	if s.PausedNote != nil {
		fmt.Fprintf(w, "pause note\t%s\n", *s.PausedNote)
	}
	if s.ResumeAt != nil {
		fmt.Fprintf(w, "resumes at\t%s\n", ts(*s.ResumeAt))
	}
	if s.SkipUntil != nil {
		fmt.Fprintf(w, "skips fires before\t%s\n", ts(*s.SkipUntil))
	}
	for i, t := range s.NextFireTimes {
		label := ""
		if i == 0 {
			label = "next fires"
		}
		fmt.Fprintf(w, "%s\t%s\n", label, ts(t))
	}
}

func fireHeader(w io.Writer) {
	fmt.Fprintln(w, "ID\tFIRE TIME\tDECISION\tN\tWAITING\tIN FLIGHT\tDELIVERED\tRELEASED\tRETRYING\tDEAD\tCANCELLED")
}

func fireRow(w io.Writer, f *client.Fire) {
	c := f.Counts
	fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", f.Id, ts(f.FireTime), f.Decision, f.N,
		c.Waiting, c.InFlight, c.Delivered, c.Released, c.Retrying, c.Dead, c.Cancelled)
}

func fireTable(w *tabwriter.Writer, f *client.Fire) {
	fireHeader(w)
	fireRow(w, f)
	if f.LaunchAt != nil {
		fmt.Fprintf(w, "\nlaunch %s (jitter +%s)\n", ts(*f.LaunchAt), sp(f.Jitter))
	}
	if f.Note != nil {
		fmt.Fprintf(w, "\nnote: %s\n", *f.Note)
	}
	if f.Deadline != nil {
		fmt.Fprintf(w, "\ndeadline %s (%s)\n", ts(*f.Deadline), cmp.Or(string(ptrOr(f.OnDeadline)), "record"))
	}
	if m := f.DeadlineMissed; m != nil {
		fmt.Fprintf(w, "deadline missed at %s with %d events unfinished\n", ts(m.At), m.Remaining)
	}
	if f.Eta != nil {
		risk := ""
		if f.AtRisk != nil && *f.AtRisk {
			risk = " (at risk: after the deadline)"
		}
		fmt.Fprintf(w, "expected to finish %s%s\n", ts(*f.Eta), risk)
	}
}

// ptrOr is *p, or the zero value for nil.
func ptrOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func eventTable(w *tabwriter.Writer, ev *client.Event) {
	fmt.Fprintf(w, "id\t%s\nstatus\t%s\nschedule\t%s\nfire\t%s\nindex\t%d of %d\nlaunch\t%s\nattempts\t%d of %d\n",
		ev.Id, ev.Status, ev.ScheduleId, ev.FireId, ev.Index, ev.Count, ts(ev.LaunchAt), ev.Attempts, ev.MaxAttempts)
	fmt.Fprintf(w, "policy\t%s\ndelivered\t%s\nfinished\t%s\nlast error\t%s\n", sp(ev.PolicyId), tsp(ev.DeliveredAt), tsp(ev.FinishedAt), strings.ReplaceAll(sp(ev.LastError), "\n", " "))
}

func summaryTable(w *tabwriter.Writer, s *client.Summary) {
	c := s.Counts
	fmt.Fprintln(w, "WAITING\tIN FLIGHT\tDELIVERED\tRELEASED\tRETRYING\tDEAD\tCANCELLED")
	fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d\n", c.Waiting, c.InFlight, c.Delivered, c.Released, c.Retrying, c.Dead, c.Cancelled)
	fmt.Fprintf(w, "\nschedules\t%d active, %d paused\n", s.Schedules.Active, s.Schedules.Paused)
	l := s.Lateness
	fmt.Fprintf(w, "lateness\tp50 %.3fs  p90 %.3fs  p99 %.3fs  (%d events)\n", l.P50, l.P90, l.P99, l.Sampled)
	if len(s.Policies) > 0 {
		fmt.Fprintln(w, "\nPOLICY\tNAME\tMAX IN FLIGHT\tIN USE\tWAITING\tTOKEN TIMEOUTS")
		for _, p := range s.Policies {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\n", p.Id, p.Name, p.MaxInFlight, p.InUse, p.Waiting, ip(p.TokenTimeouts))
		}
	}
	fmt.Fprintf(w, "\ngenerated\t%s\n", ts(s.GeneratedAt))
}
