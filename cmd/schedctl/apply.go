package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/cron"
)

// managedByKey is the label apply sets on the policies and schedules it
// writes (calendars have no labels); --prune deletes only objects that
// carry it.
const (
	managedByKey   = "app.kubernetes.io/managed-by"
	managedByValue = "schedctl"
)

// Actions of a change.
const (
	actionCreate    = "create"
	actionUpdate    = "update"
	actionDelete    = "delete"
	actionUnchanged = "unchanged"
)

// fieldDiff is one field of an object whose stored value differs from the
// file's.
type fieldDiff struct {
	Field string `json:"field"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// change is what apply does to one object.
type change struct {
	Kind   string      `json:"kind"`
	Name   string      `json:"name"`
	ID     string      `json:"id,omitempty"`
	Action string      `json:"action"`
	Fields []fieldDiff `json:"fields,omitempty"`

	// do makes the change and returns the object's id.
	do func(e *env) (string, error)
}

func (c *change) ref() string { return strings.ToLower(c.Kind) + "/" + c.Name }

var (
	applyCmd = &command{group: "apply", summary: "create and update policies, calendars and schedules to match YAML files (-f FILE|DIR, repeatable)", positional: 0, flags: func(fs *flag.FlagSet) func(*env, []string) error {
		o := applyFlags(fs, true)
		return func(e *env, _ []string) error { return o.run(e, false) }
	}}
	diffCmd = &command{group: "diff", summary: "print what apply -f would change, without changing it", positional: 0, flags: func(fs *flag.FlagSet) func(*env, []string) error {
		o := applyFlags(fs, false)
		return func(e *env, _ []string) error { return o.run(e, true) }
	}}
)

type applyOptions struct {
	files    listFlag
	prune    *bool
	selector *string
	dryRun   *bool
}

func applyFlags(fs *flag.FlagSet, apply bool) *applyOptions {
	o := &applyOptions{}
	fs.Var(&o.files, "f", "a YAML file of documents (apiVersion: "+manifestAPIVersion+", kind Policy, Calendar or Schedule), a directory of *.yaml and *.yml files, or - for stdin (repeatable)")
	o.prune = fs.Bool("prune", false, "also delete the schedules and policies that --selector matches, that apply labelled "+managedByKey+"="+managedByValue+" and that no file names")
	o.selector = fs.String("selector", "", "with --prune: labels key=value,... that the objects to delete carry")
	if apply {
		o.dryRun = fs.Bool("dry-run", false, "print the changes without making them")
	} else {
		o.dryRun = new(bool)
	}
	return o
}

func (o *applyOptions) run(e *env, diff bool) error {
	if len(o.files) == 0 {
		return fmt.Errorf("-f is required: %w", errUsage)
	}
	var sel map[string]string
	switch {
	case *o.prune && *o.selector == "":
		return fmt.Errorf("--prune needs --selector, the labels of the objects it may delete: %w", errUsage)
	case !*o.prune && *o.selector != "":
		return fmt.Errorf("--selector is only used with --prune: %w", errUsage)
	case *o.prune:
		l, err := labelsOf(listFlag(strings.Split(*o.selector, ",")))
		if err != nil {
			return fmt.Errorf("--selector %q: want key=value,...: %w", *o.selector, errUsage)
		}
		sel = map[string]string(*l)
	}
	schemas, err := api.GetSpec()
	if err != nil {
		return fmt.Errorf("load the API's schemas: %w", err)
	}
	docs, err := readManifests(o.files, e.stdin, schemas)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return errors.New("no documents in the files")
	}
	changes, err := planApply(e, docs, *o.prune, sel)
	if err != nil {
		return err
	}
	dry := diff || *o.dryRun
	if !dry {
		for _, c := range changes {
			if c.do == nil {
				continue
			}
			id, err := c.do(e)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", c.ref(), c.Action, err)
			}
			c.ID = id
			if err := printChange(e, c, false); err != nil {
				return err
			}
		}
		return printUnchanged(e, changes)
	}
	for _, c := range changes {
		if c.Action != actionUnchanged {
			if err := printChange(e, c, true); err != nil {
				return err
			}
		}
	}
	return printUnchanged(e, changes)
}

// printChange prints a change made, or one a dry run would make.
func printChange(e *env, c *change, dry bool) error {
	if e.json {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.out, "%s\n", b)
		return err
	}
	verb := map[string]string{actionCreate: "created", actionUpdate: "updated", actionDelete: "deleted"}[c.Action]
	if dry {
		verb = map[string]string{actionCreate: "would be created", actionUpdate: "would be updated", actionDelete: "would be deleted"}[c.Action]
	}
	w := tabwriter.NewWriter(e.out, 0, 4, 1, ' ', 0)
	fmt.Fprintf(w, "%s %s\n", c.ref(), verb)
	for _, f := range c.Fields {
		fmt.Fprintf(w, "  %s:\t%s\t->\t%s\n", f.Field, f.From, f.To)
	}
	return w.Flush()
}

func printUnchanged(e *env, changes []*change) error {
	for _, c := range changes {
		if c.Action != actionUnchanged {
			continue
		}
		if e.json {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(e.out, "%s\n", b); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintf(e.out, "%s unchanged\n", c.ref()); err != nil {
			return err
		}
	}
	return nil
}

// planApply reads what the tenant has and returns the changes that make it
// match docs: policies and calendars first, then schedules, then the
// deletions of --prune. Nothing is written.
func planApply(e *env, docs []*manifest, prune bool, sel map[string]string) ([]*change, error) {
	policies, err := listAllPolicies(e)
	if err != nil {
		return nil, err
	}
	calendars, err := listAllCalendars(e)
	if err != nil {
		return nil, err
	}
	policyIDs := map[string]string{}
	for _, p := range policies {
		policyIDs[p.Name] = p.Id
	}
	calendarIDs := map[string]string{}
	for _, c := range calendars {
		calendarIDs[c.Name] = c.Id
	}
	named := map[string]bool{}
	var changes []*change
	// Names of objects created by this apply resolve when they exist.
	created := map[string]*change{}
	for _, kind := range []string{kindPolicy, kindCalendar, kindSchedule} {
		for _, m := range docs {
			if m.kind != kind {
				continue
			}
			named[m.ref()] = true
			var c *change
			switch kind {
			case kindPolicy:
				c, err = planPolicy(m, policies)
			case kindCalendar:
				c, err = planCalendar(m, calendars)
			case kindSchedule:
				c, err = planSchedule(e, m, policyIDs, calendarIDs, created)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.where, err)
			}
			if c.Action == actionCreate {
				created[c.ref()] = c
			}
			changes = append(changes, c)
		}
	}
	if !prune {
		return changes, nil
	}
	// Schedules first: a policy is deleted once no schedule names it.
	sched, err := listManagedSchedules(e, sel)
	if err != nil {
		return nil, err
	}
	for _, s := range sched {
		if !named["schedule/"+s.Name] {
			changes = append(changes, deleteChange(kindSchedule, s.Name, s.Id, func(e *env, id string) error {
				_, err := call(e.api.DeleteSchedule(e.ctx, id))
				return err
			}))
		}
	}
	for _, p := range policies {
		if p.Labels != nil && managed(*p.Labels, sel) && !named["policy/"+p.Name] {
			changes = append(changes, deleteChange(kindPolicy, p.Name, p.Id, func(e *env, id string) error {
				_, err := call(e.api.DeletePolicy(e.ctx, id))
				return err
			}))
		}
	}
	return changes, nil
}

func deleteChange(kind, name, id string, del func(e *env, id string) error) *change {
	return &change{Kind: kind, Name: name, ID: id, Action: actionDelete, do: func(e *env) (string, error) { return id, del(e, id) }}
}

// managed reports whether labels carry apply's label and every label of
// the selector.
func managed(labels map[string]string, sel map[string]string) bool {
	if labels[managedByKey] != managedByValue {
		return false
	}
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// withManagedBy is the labels of a document with apply's label added.
func withManagedBy(l map[string]string) map[string]string {
	out := maps.Clone(l)
	if out == nil {
		out = map[string]string{}
	}
	out[managedByKey] = managedByValue
	return out
}

func planPolicy(m *manifest, have []client.Policy) (*change, error) {
	want := *m.policy
	labels := withManagedBy(m.labels)
	want.Labels = &labels
	var old *client.Policy
	for i := range have {
		if have[i].Name == m.name {
			if old != nil {
				return nil, fmt.Errorf("%s: the tenant has two policies of this name (%s and %s)", m.ref(), old.Id, have[i].Id)
			}
			old = &have[i]
		}
	}
	c := &change{Kind: kindPolicy, Name: m.name}
	if old == nil {
		c.Action = actionCreate
		c.do = func(e *env) (string, error) {
			return createdID(call(e.api.CreatePolicy(e.ctx, nil, want)))
		}
		return c, nil
	}
	c.ID = old.Id
	var d differ
	var up client.PolicyUpdate
	if d.value("maxInFlight", old.MaxInFlight, want.MaxInFlight) {
		up.MaxInFlight = &want.MaxInFlight
	}
	if tt := deref(want.TokenTimeout, "15m"); d.durations("tokenTimeout", old.TokenTimeout, tt) {
		up.TokenTimeout = &tt
	}
	if ar := deref(want.AutoRelease, false); d.value("autoRelease", old.AutoRelease, ar) {
		up.AutoRelease = &ar
	}
	if r := deref(want.RatePerSecond, 0); d.value("ratePerSecond", deref(old.RatePerSecond, 0), r) {
		up.RatePerSecond = &r
	}
	// Without a burst in the file the server's default for the rate stands.
	if want.Burst != nil && d.value("burst", deref(old.Burst, 0), *want.Burst) {
		up.Burst = want.Burst
	}
	if k := deref(want.ConcurrencyKey, ""); d.value("concurrencyKey", deref(old.ConcurrencyKey, ""), k) {
		up.ConcurrencyKey = &k
	}
	if t := deref(want.MaxInFlightTotal, 0); d.value("maxInFlightTotal", deref(old.MaxInFlightTotal, 0), t) {
		up.MaxInFlightTotal = &t
	}
	wantAdaptive := deref(want.Adaptive, client.AdaptiveLimit{})
	oldAdaptive := deref(old.Adaptive, client.AdaptiveLimit{})
	if d.value("adaptive.min", oldAdaptive.Min, wantAdaptive.Min) {
		up.Adaptive = &client.AdaptiveLimit{Min: wantAdaptive.Min, Max: wantAdaptive.Max}
	}
	if v := deref(want.Limits, []client.LimitRule{}); d.list("limits", deref(old.Limits, []client.LimitRule{}), v) {
		up.Limits = &v
	}
	if d.labels(old.Labels, labels) {
		up.Labels = &labels
	}
	return d.change(c, func(e *env) (string, error) {
		_, err := call(e.api.UpdatePolicy(e.ctx, old.Id, up))
		return old.Id, err
	}), nil
}

func planCalendar(m *manifest, have []client.Calendar) (*change, error) {
	want := *m.calendar
	var old *client.Calendar
	for i := range have {
		if have[i].Name == m.name {
			if old != nil {
				return nil, fmt.Errorf("%s: the tenant has two calendars of this name (%s and %s)", m.ref(), old.Id, have[i].Id)
			}
			old = &have[i]
		}
	}
	c := &change{Kind: kindCalendar, Name: m.name}
	if old == nil {
		c.Action = actionCreate
		c.do = func(e *env) (string, error) {
			return createdID(call(e.api.CreateCalendar(e.ctx, nil, want)))
		}
		return c, nil
	}
	c.ID = old.Id
	var d differ
	var up client.CalendarUpdate
	if d.value("timezone", old.Timezone, want.Timezone) {
		up.Timezone = &want.Timezone
	}
	if v := deref(want.Dates, []string{}); d.list("dates", old.Dates, v) {
		up.Dates = &v
	}
	if v := deref(want.Ranges, []client.CalendarRange{}); d.list("ranges", old.Ranges, v) {
		up.Ranges = &v
	}
	if v := deref(want.Weekly, []client.WeeklyRule{}); d.list("weekly", old.Weekly, v) {
		up.Weekly = &v
	}
	return d.change(c, func(e *env) (string, error) {
		_, err := call(e.api.UpdateCalendar(e.ctx, old.Id, up))
		return old.Id, err
	}), nil
}

// planSchedule resolves the schedule's policy and calendar names and
// compares it with the stored schedule of its name. created holds the
// changes that create policies and calendars: their ids are known only
// when they run.
func planSchedule(e *env, m *manifest, policyIDs, calendarIDs map[string]string, created map[string]*change) (*change, error) {
	want := *m.schedule
	labels := client.Labels(withManagedBy(m.labels))
	want.Labels = &labels
	// resolve fills the ids in want once the policies and calendars exist.
	resolve := func() error {
		if m.policyName != nil {
			id, err := idOf("policy", *m.policyName, policyIDs, created)
			if err != nil {
				return err
			}
			want.PolicyId = &id
		}
		if m.calendarNames != nil {
			ids := []string{}
			for _, n := range *m.calendarNames {
				id, err := idOf("calendar", n, calendarIDs, created)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			want.ExcludeCalendars = &ids
		}
		return nil
	}
	pending := false
	if err := resolve(); errors.Is(err, errNotYet) {
		pending = true
	} else if err != nil {
		return nil, err
	}
	old, err := findSchedule(e, m.name)
	if err != nil {
		return nil, err
	}
	c := &change{Kind: kindSchedule, Name: m.name}
	if old == nil {
		c.Action = actionCreate
		c.do = func(e *env) (string, error) {
			if err := resolve(); err != nil {
				return "", err
			}
			return createdID(call(e.api.CreateSchedule(e.ctx, nil, want)))
		}
		return c, nil
	}
	c.ID = old.Id
	var d differ
	var up client.ScheduleUpdate
	switch {
	case want.Cron != nil || want.Fields != nil:
		if canonicalCron(want) != deref(old.Cron, "") {
			d.add("cron", old.Cron, canonicalCron(want))
			up.Cron, up.Fields = want.Cron, want.Fields
		}
	case want.RunAt != nil:
		if old.RunAt == nil || !old.RunAt.Equal(*want.RunAt) {
			d.add("runAt", old.RunAt, want.RunAt)
			up.RunAt = want.RunAt
		}
	}
	if tz := deref(want.Timezone, "UTC"); d.value("timezone", old.Timezone, tz) {
		up.Timezone = &tz
	}
	if n := deref(want.EventCount, 1); d.value("eventCount", old.EventCount, n) {
		up.EventCount = &n
	}
	if d.value("target", old.Target, want.Target) {
		up.Target = &want.Target
	}
	// A payload, maxAttempts, startAt or endAt the file leaves out keeps the
	// stored one: the API has no value that removes them.
	if want.Payload != nil && !sameJSON(old.Payload, *want.Payload) {
		d.add("payload", old.Payload, want.Payload)
		up.Payload = want.Payload
	}
	if want.MaxAttempts != nil && d.value("maxAttempts", old.MaxAttempts, *want.MaxAttempts) {
		up.MaxAttempts = want.MaxAttempts
	}
	if want.StartAt != nil && (old.StartAt == nil || !old.StartAt.Equal(*want.StartAt)) {
		d.add("startAt", old.StartAt, want.StartAt)
		up.StartAt = want.StartAt
	}
	if want.EndAt != nil && (old.EndAt == nil || !old.EndAt.Equal(*want.EndAt)) {
		d.add("endAt", old.EndAt, want.EndAt)
		up.EndAt = want.EndAt
	}
	if p := deref(want.Priority, 0); d.value("priority", old.Priority, p) {
		up.Priority = &p
	}
	if s := deref(want.Spread, false); d.value("spread", old.Spread, s) {
		up.Spread = &s
	}
	if o := deref(want.Overlap, "allow"); d.value("overlap", old.Overlap, o) {
		up.Overlap = &o
	}
	if mf := deref(want.Misfire, "fire_once"); d.value("misfire", old.Misfire, mf) {
		up.Misfire = &mf
	}
	if w := deref(want.Window, ""); d.durations("window", deref(old.Window, ""), w) {
		up.Window = &w
	}
	if j := deref(want.Jitter, ""); d.durations("jitter", deref(old.Jitter, ""), j) {
		up.Jitter = &j
	}
	if d.labels(old.Labels, labels) {
		up.Labels = &labels
	}
	// Policy and calendar ids compare once resolved; a policy or calendar
	// this apply creates makes them differ.
	policyChanged := func() bool { return deref(want.PolicyId, "") != deref(old.PolicyId, "") }
	calendarsChanged := func() bool {
		return !slices.Equal(deref(want.ExcludeCalendars, []string{}), deref(old.ExcludeCalendars, []string{}))
	}
	// Shown by name, as the file gives them.
	nameOf := func(ids map[string]string, id string) string {
		for n, i := range ids {
			if i == id {
				return n
			}
		}
		return id
	}
	if pending || policyChanged() {
		d.add("policy", nameOf(policyIDs, deref(old.PolicyId, "")), deref(m.policyName, ""))
	}
	if pending || calendarsChanged() {
		names := []string{}
		for _, id := range deref(old.ExcludeCalendars, nil) {
			names = append(names, nameOf(calendarIDs, id))
		}
		d.add("excludeCalendars", names, deref(m.calendarNames, []string{}))
	}
	if len(deref(want.ExcludeCalendars, nil)) > 0 || len(deref(m.calendarNames, nil)) > 0 {
		if oe := deref(want.OnExcluded, "skip"); d.value("onExcluded", deref(old.OnExcluded, ""), oe) {
			up.OnExcluded = &oe
		}
	}
	return d.change(c, func(e *env) (string, error) {
		if err := resolve(); err != nil {
			return "", err
		}
		if policyChanged() {
			p := deref(want.PolicyId, "")
			up.PolicyId = &p
		}
		if calendarsChanged() {
			up.ExcludeCalendars = want.ExcludeCalendars
			if up.ExcludeCalendars == nil {
				up.ExcludeCalendars = &[]string{}
			}
		}
		_, err := call(e.api.UpdateSchedule(e.ctx, old.Id, up))
		return old.Id, err
	}), nil
}

// errNotYet: a name resolves to an object this apply creates before.
var errNotYet = errors.New("created by this apply")

// idOf resolves the name of a policy or calendar: one the tenant has, or
// one this apply creates (errNotYet until it did).
func idOf(kind, name string, ids map[string]string, created map[string]*change) (string, error) {
	if c, ok := created[kind+"/"+name]; ok {
		if c.ID == "" {
			return "", errNotYet
		}
		return c.ID, nil
	}
	if id, ok := ids[name]; ok {
		return id, nil
	}
	return "", fmt.Errorf("%s %q: the tenant has none of this name and no document defines it", kind, name)
}

// canonicalCron is the expression as the server stores it (its canonical
// 5-field form), or the text given when it does not parse (the server
// then names the error).
func canonicalCron(s client.ScheduleCreate) string {
	if s.Cron != nil {
		if x, err := cron.Parse(*s.Cron); err == nil {
			return x.String()
		}
		return *s.Cron
	}
	f := deref(s.Fields, client.CronFields{})
	x, err := cron.ParseFields(cron.Fields{Minute: deref(f.Minute, ""), Hour: deref(f.Hour, ""), DayOfMonth: deref(f.DayOfMonth, ""),
		Month: deref(f.Month, ""), DayOfWeek: deref(f.DayOfWeek, "")})
	if err != nil {
		b, _ := json.Marshal(f)
		return string(b)
	}
	return x.String()
}

// differ collects the fields that differ.
type differ struct{ diffs []fieldDiff }

func (d *differ) add(field string, from, to any) {
	d.diffs = append(d.diffs, fieldDiff{Field: field, From: showValue(from), To: showValue(to)})
}

func (d *differ) value(field string, from, to any) bool {
	if reflect.DeepEqual(from, to) {
		return false
	}
	d.add(field, from, to)
	return true
}

// durations compares Go durations by value ("1h" is "60m"); "" is none.
func (d *differ) durations(field, from, to string) bool {
	f, err1 := time.ParseDuration(orZero(from))
	t, err2 := time.ParseDuration(orZero(to))
	if err1 == nil && err2 == nil && f == t || from == to {
		return false
	}
	d.add(field, from, to)
	return true
}

// list compares lists by their JSON.
func (d *differ) list(field string, from, to any) bool {
	a, _ := json.Marshal(from)
	b, _ := json.Marshal(to)
	if string(a) == string(b) || string(a) == "null" && string(b) == "[]" {
		return false
	}
	d.add(field, from, to)
	return true
}

func (d *differ) labels(from *client.Labels, to map[string]string) bool {
	return d.value("labels", map[string]string(deref(from, client.Labels{})), to)
}

// change finishes c: unchanged, or an update that runs do.
func (d *differ) change(c *change, do func(e *env) (string, error)) *change {
	if len(d.diffs) == 0 {
		c.Action = actionUnchanged
		return c
	}
	c.Action, c.Fields, c.do = actionUpdate, d.diffs, do
	return c
}

func orZero(s string) string {
	if s == "" {
		return "0s"
	}
	return s
}

// showValue is a value as output shows it: JSON, "-" for none.
func showValue(v any) string {
	rv := reflect.ValueOf(v)
	if v == nil || rv.Kind() == reflect.Pointer && rv.IsNil() {
		return "-"
	}
	if rv.Kind() == reflect.Pointer {
		v = rv.Elem().Interface()
	}
	if s, ok := v.(string); ok {
		if s == "" {
			return "-"
		}
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func sameJSON(a *client.Payload, b client.Payload) bool {
	if a == nil {
		return false
	}
	var x, y any
	if json.Unmarshal(*a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// createdID returns the id of the object a create answered.
func createdID(body []byte, err error) (string, error) {
	if err != nil {
		return "", err
	}
	var v idOnlyAnswer
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fmt.Errorf("decode the answer: %w", err)
	}
	return v.ID, nil
}

type idOnlyAnswer struct {
	ID string `json:"id"`
}

func listAllPolicies(e *env) ([]client.Policy, error) {
	body, err := call(e.api.ListPolicies(e.ctx))
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	var l client.PolicyList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	return l.Items, nil
}

func listAllCalendars(e *env) ([]client.Calendar, error) {
	var out []client.Calendar
	p := &client.ListCalendarsParams{}
	for {
		body, err := call(e.api.ListCalendars(e.ctx, p))
		if err != nil {
			return nil, fmt.Errorf("list calendars: %w", err)
		}
		var l client.CalendarList
		if err := json.Unmarshal(body, &l); err != nil {
			return nil, fmt.Errorf("list calendars: %w", err)
		}
		out = append(out, l.Items...)
		if l.NextCursor == nil || len(l.Items) == 0 {
			return out, nil
		}
		p.Cursor = l.NextCursor
	}
}

// listSchedules lists every page of schedules that params select.
func listSchedules(e *env, params *client.ListSchedulesParams) ([]client.Schedule, error) {
	var out []client.Schedule
	for {
		body, err := call(e.api.ListSchedules(e.ctx, params))
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		var l client.ScheduleList
		if err := json.Unmarshal(body, &l); err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		out = append(out, l.Items...)
		if l.NextCursor == nil || len(l.Items) == 0 {
			return out, nil
		}
		params.Cursor = l.NextCursor
	}
}

// findSchedule returns the tenant's schedule of this name, nil for none.
func findSchedule(e *env, name string) (*client.Schedule, error) {
	l, err := listSchedules(e, &client.ListSchedulesParams{NamePrefix: &name})
	if err != nil {
		return nil, err
	}
	var found *client.Schedule
	for i := range l {
		if l[i].Name != name {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("schedule/%s: the tenant has two schedules of this name (%s and %s)", name, found.Id, l[i].Id)
		}
		found = &l[i]
	}
	return found, nil
}

// listManagedSchedules lists the schedules with apply's label and the
// selector's.
func listManagedSchedules(e *env, sel map[string]string) ([]client.Schedule, error) {
	labels := []string{managedByKey + "=" + managedByValue}
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		labels = append(labels, k+"="+sel[k])
	}
	l, err := listSchedules(e, &client.ListSchedulesParams{Label: &labels})
	if err != nil {
		return nil, err
	}
	// The server filters; checked again so that a server that ignored the
	// filter never makes prune delete outside the selector.
	var out []client.Schedule
	for _, s := range l {
		if s.Labels != nil && managed(*s.Labels, sel) {
			out = append(out, s)
		}
	}
	return out, nil
}
