package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/schedulerd/schedulerd/client"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// labelsOf reads --label key=value flags into labels; nil for none. The
// server checks keys and values.
func labelsOf(flags listFlag) (*client.Labels, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	l := client.Labels{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("--label %q: want key=value: %w", f, errUsage)
		}
		if _, dup := l[k]; dup {
			return nil, fmt.Errorf("--label %q: the key is given twice: %w", f, errUsage)
		}
		l[k] = v
	}
	return &l, nil
}

// labelsText is labels as k=v pairs in key order, "-" for none.
func labelsText(l *client.Labels) string {
	if l == nil || len(*l) == 0 {
		return "-"
	}
	m := slices.Sorted(maps.Keys(*l))
	for i, k := range m {
		m[i] = k + "=" + (*l)[k]
	}
	return strings.Join(m, ",")
}

// scheduleActionsFlags runs POST /v1/schedules/actions page after page
// until no more schedules match (or one page, with --cursor's page only).
func scheduleActionsFlags(fs *flag.FlagSet) func(*env, []string) error {
	action := fs.String("action", "", "pause, resume, delete or trigger (required)")
	var labels, ids listFlag
	fs.Var(&labels, "label", "select schedules with this label, key=value (repeatable; all must hold)")
	fs.Var(&ids, "id", "select this schedule id (repeatable)")
	policy := fs.String("policy", "", "select the schedules of this policy id")
	prefix := fs.String("name-prefix", "", "select the schedules whose name starts with this")
	note := fs.String("note", "", "pause: the note the paused schedules keep")
	until := fs.String("until", "", "pause: resume by themselves at this RFC 3339 time")
	cursor := fs.String("cursor", "", "start at this page (a nextCursor) and stop after it")
	return func(e *env, _ []string) error {
		if *action == "" {
			return fmt.Errorf("--action is required (pause, resume, delete or trigger): %w", errUsage)
		}
		in := client.ScheduleActionRequest{Action: client.ScheduleAction(*action), Note: optString(*note), Cursor: optString(*cursor),
			Selector: client.ScheduleSelector{PolicyId: optString(*policy), NamePrefix: optString(*prefix)}}
		var err error
		if in.Until, err = optTime("until", *until); err != nil {
			return err
		}
		l, err := labelsOf(labels)
		if err != nil {
			return err
		}
		if l != nil {
			m := map[string]string(*l)
			in.Selector.Labels = &m
		}
		if len(ids) > 0 {
			in.Selector.Ids = (*[]string)(&ids)
		}
		var total client.ScheduleActionResult
		pages := 0
		for {
			body, err := call(e.api.ScheduleActions(e.ctx, in))
			if err != nil {
				return err
			}
			var page client.ScheduleActionResult
			if err := json.Unmarshal(body, &page); err != nil {
				return fmt.Errorf("read the answer: %w", err)
			}
			pages++
			total.Matched += page.Matched
			total.Changed += page.Changed
			if page.Failed != nil {
				if total.Failed == nil {
					total.Failed = &[]client.ScheduleActionFailure{}
				}
				*total.Failed = append(*total.Failed, *page.Failed...)
			}
			total.More, total.NextCursor = page.More, page.NextCursor
			if page.More == nil || !*page.More || *cursor != "" {
				break
			}
			in.Cursor = page.NextCursor
		}
		b, err := json.Marshal(total)
		if err != nil {
			return err
		}
		return show(e, b, func(w *tabwriter.Writer, v *client.ScheduleActionResult) {
			fmt.Fprintf(w, "pages\t%d\nmatched\t%d\nchanged\t%d\n", pages, v.Matched, v.Changed)
			if v.Failed != nil {
				fmt.Fprintln(w, "\nFAILED\tSTATUS\tDETAIL")
				for _, f := range *v.Failed {
					fmt.Fprintf(w, "%s\t%d\t%s\n", f.Id, f.Status, oneLine(f.Detail))
				}
			}
			if v.More != nil && *v.More {
				next(w, v.NextCursor)
			}
		})
	}
}
