package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/schedulerd/schedulerd/client"
)

// calendarBodyFlags are the flags of calendars create and update. A list
// flag given replaces the calendar's list; --clear-* empties one.
type calendarBodyFlags struct {
	file, name, tz       *string
	dates, ranges, weeks listFlag
}

func (c *calendarBodyFlags) add(fs *flag.FlagSet) {
	c.file = fs.String("file", "", "JSON body (the API's CalendarCreate or CalendarUpdate); - reads stdin. Other body flags are then not allowed")
	c.name = fs.String("name", "", "the calendar's name")
	c.tz = fs.String("tz", "", "IANA timezone its days and times are judged in")
	fs.Var(&c.dates, "date", "an excluded local day, YYYY-MM-DD (repeat for several)")
	fs.Var(&c.ranges, "range", "an excluded range FROM/TO: local date-times (2027-12-31T18:00/2028-01-01T06:00) or RFC 3339 instants (repeat for several)")
	fs.Var(&c.weeks, "weekly", "excluded days of the week, all day (sat,sun) or in local hours (mon,tue@18:00-24:00) (repeat for several)")
}

// lists returns the lists that flags gave (nil: not given).
func (c *calendarBodyFlags) lists() (dates *[]string, ranges *[]client.CalendarRange, weekly *[]client.WeeklyRule, err error) {
	if len(c.dates) > 0 {
		d := []string(c.dates)
		dates = &d
	}
	if len(c.ranges) > 0 {
		rs := []client.CalendarRange{}
		for _, r := range c.ranges {
			from, to, ok := strings.Cut(r, "/")
			if !ok {
				return nil, nil, nil, fmt.Errorf("--range %q: want FROM/TO: %w", r, errUsage)
			}
			rs = append(rs, client.CalendarRange{From: from, To: to})
		}
		ranges = &rs
	}
	if len(c.weeks) > 0 {
		ws := []client.WeeklyRule{}
		for _, w := range c.weeks {
			days, hours, _ := strings.Cut(w, "@")
			rule := client.WeeklyRule{Days: []client.WeeklyRuleDays{}}
			for _, d := range strings.Split(days, ",") {
				rule.Days = append(rule.Days, client.WeeklyRuleDays(strings.TrimSpace(d)))
			}
			if hours != "" {
				from, to, ok := strings.Cut(hours, "-")
				if !ok {
					return nil, nil, nil, fmt.Errorf("--weekly %q: want DAYS@HH:MM-HH:MM: %w", w, errUsage)
				}
				rule.From, rule.To = optString(from), optString(to)
			}
			ws = append(ws, rule)
		}
		weekly = &ws
	}
	return dates, ranges, weekly, nil
}

// fileBody opens --file, refusing other body flags with it.
func (c *calendarBodyFlags) fileBody(e *env, fs *flag.FlagSet) (io.Reader, func(), error) {
	set := setFlags(fs)
	for _, f := range []string{"name", "tz", "date", "range", "weekly"} {
		if set[f] {
			return nil, nil, fmt.Errorf("--file and --%s: give the whole body in the file: %w", f, errUsage)
		}
	}
	if *c.file == "-" {
		return e.stdin, func() {}, nil
	}
	f, err := os.Open(*c.file)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { _ = f.Close() }, nil
}

var (
	calendarsLs = &command{group: "calendars", verb: "list", summary: "list exclusion calendars", positional: 0, flags: func(fs *flag.FlagSet) func(*env, []string) error {
		var p pageFlags
		p.add(fs)
		return func(e *env, _ []string) error {
			l, c := p.params()
			return fetch(e, func(w *tabwriter.Writer, v *client.CalendarList) {
				fmt.Fprintln(w, "ID\tNAME\tTIMEZONE\tDATES\tRANGES\tWEEKLY\tVERSION")
				for _, c := range v.Items {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\n", c.Id, c.Name, c.Timezone, len(c.Dates), len(c.Ranges), len(c.Weekly), c.Version)
				}
				next(w, v.NextCursor)
			})(e.api.ListCalendars(e.ctx, &client.ListCalendarsParams{Limit: l, Cursor: c}))
		}
	}}
	calendarsCreate = &command{group: "calendars", verb: "create", summary: "create an exclusion calendar from flags, or from a JSON body with --file", positional: 0, flags: func(fs *flag.FlagSet) func(*env, []string) error {
		var b calendarBodyFlags
		b.add(fs)
		return func(e *env, _ []string) error {
			if *b.file != "" {
				r, closeFile, err := b.fileBody(e, fs)
				if err != nil {
					return err
				}
				defer closeFile()
				return fetch(e, calendarTable)(e.api.CreateCalendarWithBody(e.ctx, nil, "application/json", r))
			}
			in := client.CalendarCreate{Name: *b.name, Timezone: *b.tz}
			var err error
			if in.Dates, in.Ranges, in.Weekly, err = b.lists(); err != nil {
				return err
			}
			return fetch(e, calendarTable)(e.api.CreateCalendar(e.ctx, nil, in))
		}
	}}
	calendarsGet = &command{group: "calendars", verb: "get", args: "CALENDAR_ID", summary: "show a calendar", positional: 1, flags: noFlags(func(e *env, a []string) error {
		return fetch(e, calendarTable)(e.api.GetCalendar(e.ctx, a[0]))
	})}
	calendarsUpdate = &command{group: "calendars", verb: "update", args: "CALENDAR_ID", summary: "change a calendar: a list flag given replaces that list (from the next window not yet emitted)", positional: 1, flags: func(fs *flag.FlagSet) func(*env, []string) error {
		var b calendarBodyFlags
		b.add(fs)
		clear := fs.String("clear", "", "empty these lists: dates, ranges, weekly (comma-separated)")
		return func(e *env, a []string) error {
			if *b.file != "" {
				r, closeFile, err := b.fileBody(e, fs)
				if err != nil {
					return err
				}
				defer closeFile()
				return fetch(e, calendarTable)(e.api.UpdateCalendarWithBody(e.ctx, a[0], "application/json", r))
			}
			in := client.CalendarUpdate{Name: optString(*b.name), Timezone: optString(*b.tz)}
			var err error
			if in.Dates, in.Ranges, in.Weekly, err = b.lists(); err != nil {
				return err
			}
			for _, l := range strings.Split(*clear, ",") {
				switch strings.TrimSpace(l) {
				case "":
				case "dates":
					in.Dates = &[]string{}
				case "ranges":
					in.Ranges = &[]client.CalendarRange{}
				case "weekly":
					in.Weekly = &[]client.WeeklyRule{}
				default:
					return fmt.Errorf("--clear %q: want dates, ranges or weekly: %w", l, errUsage)
				}
			}
			return fetch(e, calendarTable)(e.api.UpdateCalendar(e.ctx, a[0], in))
		}
	}}
	calendarsDelete = &command{group: "calendars", verb: "delete", args: "CALENDAR_ID", summary: "delete a calendar no schedule names", positional: 1, flags: noFlags(func(e *env, a []string) error {
		if _, err := call(e.api.DeleteCalendar(e.ctx, a[0])); err != nil {
			return err
		}
		return done(e, "deleted", a[0])
	})}
)

func calendarTable(w *tabwriter.Writer, c *client.Calendar) {
	fmt.Fprintf(w, "id\t%s\nname\t%s\ntimezone\t%s\nversion\t%d\n", c.Id, c.Name, c.Timezone, c.Version)
	for _, d := range c.Dates {
		fmt.Fprintf(w, "date\t%s\n", d)
	}
	for _, r := range c.Ranges {
		fmt.Fprintf(w, "range\t%s to %s\n", r.From, r.To)
	}
	for _, r := range c.Weekly {
		days := make([]string, len(r.Days))
		for i, d := range r.Days {
			days[i] = string(d)
		}
		hours := "all day"
		if r.From != nil || r.To != nil {
			hours = sp(r.From) + " to " + sp(r.To)
		}
		fmt.Fprintf(w, "weekly\t%s, %s\n", strings.Join(days, ","), hours)
	}
}

// excludedTable lists a preview's excluded fire times (explain).
func excludedTable(w *tabwriter.Writer, ex *[]client.ExcludedFire) {
	if ex == nil || len(*ex) == 0 {
		return
	}
	fmt.Fprintln(w, "\nEXCLUDED (UTC)\tLOCAL\tCALENDAR\tRULE\tMOVED TO")
	for _, x := range *ex {
		moved := "-"
		if x.MovedTo != nil {
			moved = ts(*x.MovedTo)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", ts(x.Utc), x.Local, x.CalendarId, x.Reason, moved)
	}
}
