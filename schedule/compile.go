package schedule

import (
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
)

// Compiled is a validated Spec.
type Compiled struct {
	// Schedule holds the definition fields only; identity, state, version
	// and timestamps are the caller's.
	Schedule model.Schedule
	// Expr is the parsed expression; nil for a one-off.
	Expr *cron.Expr
	// Loc is the schedule's time zone.
	Loc *time.Location
	// Keys are the children keys of Expr (of Exprs: their union, each
	// once); nil for a one-off and an interval schedule.
	Keys []cron.Key
	// Exprs are the parsed expressions of Crons (Expr is then nil).
	Exprs []*cron.Expr
}

// Compile validates sp completely and compiles it. now decides whether endAt
// is in the past. A validation failure is an Errors naming every bad field;
// Compile returns no other error. The cron expression is parsed once.
func Compile(sp Spec, lim Limits, now time.Time) (*Compiled, error) {
	var fe Errors
	out := &Compiled{}
	m := &out.Schedule

	checkName(&fe, sp.Name, lim.MaxNameLen)
	m.Name = sp.Name

	n := 0
	for _, set := range []bool{sp.Cron != nil, sp.Fields != nil, sp.RunAt != nil, sp.Crons != nil, sp.Interval != nil, sp.After != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		fe.Add("cron", "one of cron, fields, crons, interval, runAt or after is required")
	case n > 1:
		fe.Add(exclusiveField(sp), MutuallyExclusive)
	}

	if sp.Timezone == "" {
		sp.Timezone = "UTC"
	}
	loc, err := cron.LoadLocation(sp.Timezone)
	if err != nil {
		fe.Add("timezone", reasonOf(err, "timezone"))
	}
	out.Loc = loc
	m.Timezone = sp.Timezone

	exprField := "cron"
	if n == 1 {
		switch {
		case sp.Cron != nil:
			if out.Expr, err = cron.Parse(*sp.Cron); err != nil {
				fe.Add("cron", reasonOf(err, "cron"))
			}
		case sp.Fields != nil:
			exprField = "fields"
			if out.Expr, err = cron.ParseFields(*sp.Fields); err != nil {
				field, leaf := fieldOf(err)
				fe.Add(field, reasonOf(err, leaf))
			}
		case sp.RunAt != nil:
			t := sp.RunAt.UTC()
			m.RunAt = &t
			if lim.CatchUpLimit > 0 && t.Before(now.Add(-lim.CatchUpLimit)) && sp.Misfire != model.MisfireFireAll {
				fe.Add("runAt", "older than the catch-up limit ("+lim.CatchUpLimit.String()+"): it would never fire; set misfire to fire_all to fire it at once")
			}
		case sp.Crons != nil:
			compileCrons(&fe, out, sp.Crons, lim.MaxChildren)
		case sp.Interval != nil:
			m.Interval = checkInterval(&fe, *sp.Interval)
		case sp.After != nil:
			m.After = checkAfter(&fe, *sp.After)
		}
	}
	if out.Expr != nil {
		m.Cron = out.Expr.String()
		if out.Keys, err = out.Expr.Children(lim.MaxChildren); err != nil {
			fe.Add(exprField, reasonOf(err, "cron"))
		}
	}

	m.EventCount = sp.EventCount
	switch {
	case sp.EventCount < 1 || sp.EventCount > lim.MaxEventCount:
		fe.Add("eventCount", "must be between 1 and "+strconv.Itoa(lim.MaxEventCount))
	case lim.MaxEventsPerFire > 0 && sp.EventCount > lim.MaxEventsPerFire:
		fe.Add("eventCount", OverPerFireQuota(lim.MaxEventsPerFire))
	}
	if sp.Window != "" {
		d, err := time.ParseDuration(sp.Window)
		switch {
		case err != nil:
			fe.Add("window", "not a duration such as \"30m\" or \"2h\"")
		case d < 0:
			fe.Add("window", "must not be negative")
		case d > lim.MaxWindow:
			fe.Add("window", "longer than "+lim.MaxWindow.String())
		}
		m.Window = d
	}
	m.Spread = sp.Spread
	if sp.Spread && m.Window <= 0 {
		fe.Add("spread", "spreading needs a window")
	}
	m.Priority = sp.Priority
	if sp.Priority < lim.MinPriority || sp.Priority > lim.MaxPriority {
		fe.Add("priority", "must be between "+strconv.Itoa(lim.MinPriority)+" and "+strconv.Itoa(lim.MaxPriority))
	}
	m.Overlap = sp.Overlap
	switch sp.Overlap {
	case model.OverlapAllow, model.OverlapSkip, model.OverlapCancel:
	default:
		fe.Add("overlap", "must be allow, skip or cancel")
	}
	m.Misfire = sp.Misfire
	switch sp.Misfire {
	case model.MisfireFireOnce, model.MisfireFireAll, model.MisfireSkip:
	default:
		fe.Add("misfire", "must be fire_once, fire_all or skip")
	}
	m.Target = checkTarget(&fe, sp.Target, lim.CheckTargetHost, lim.CheckQueueURL)
	if len(sp.Payload) > 0 && string(sp.Payload) != "null" {
		m.Payload = append(json.RawMessage(nil), sp.Payload...)
		if len(m.Payload) > lim.MaxPayloadBytes {
			fe.Add("payload", "larger than "+strconv.Itoa(lim.MaxPayloadBytes)+" bytes")
		}
	}
	m.MaxAttempts = sp.MaxAttempts
	if sp.MaxAttempts < 1 || sp.MaxAttempts > lim.MaxAttempts {
		fe.Add("maxAttempts", "must be between 1 and "+strconv.Itoa(lim.MaxAttempts))
	}
	if sp.StartAt != nil {
		t := sp.StartAt.UTC()
		m.StartAt = &t
	}
	if sp.EndAt != nil {
		t := sp.EndAt.UTC()
		m.EndAt = &t
	}
	if m.RunAt != nil && m.StartAt != nil {
		fe.Add("startAt", "applies to cron and interval schedules only")
	}
	if m.RunAt != nil && m.EndAt != nil {
		fe.Add("endAt", "applies to cron and interval schedules only")
	}
	if m.StartAt != nil && m.EndAt != nil && !m.EndAt.After(*m.StartAt) {
		fe.Add("endAt", "must be after startAt")
	} else if m.EndAt != nil && !m.EndAt.After(now) {
		fe.Add("endAt", "is in the past")
	}
	m.PolicyID = sp.PolicyID
	m.Jitter = checkJitter(&fe, sp.Jitter, out, lim.MaxWindow, now)
	fe = append(fe, model.CheckLabels("labels", sp.Labels)...)
	if len(sp.Labels) > 0 {
		m.Labels = maps.Clone(sp.Labels)
	}
	checkCalendars(&fe, m, sp)
	m.Notify = checkNotify(&fe, sp.Notify, lim.CheckTargetHost, lim.CheckQueueURL)
	if m.After != nil {
		for _, c := range []struct {
			field string
			set   bool
		}{{"startAt", m.StartAt != nil}, {"endAt", m.EndAt != nil}, {"jitter", m.Jitter > 0}, {"excludeCalendars", len(m.ExcludeCalendars) > 0}} {
			if c.set {
				fe.Add(c.field, "applies to schedules that fire on a clock, not after another schedule")
			}
		}
	}
	checkDeadline(&fe, m, &sp)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// MaxDeadline bounds a schedule's deadline; MinEventAge and MaxEventAge
// bound its maxEventAge (EventBridge's bounds).
const (
	MaxDeadline = 7 * 24 * time.Hour
	MinEventAge = time.Minute
	MaxEventAge = 24 * time.Hour
)

// checkDeadline parses deadline, onDeadline and maxEventAge into m: a
// deadline not shorter than the window, expire only with a deadline.
func checkDeadline(fe *Errors, m *model.Schedule, sp *Spec) {
	if sp.Deadline != "" {
		d, err := time.ParseDuration(sp.Deadline)
		switch {
		case err != nil:
			fe.Add("deadline", "not a duration such as \"45m\" or \"2h\"")
		case d < 0:
			fe.Add("deadline", "must not be negative")
		case d > MaxDeadline:
			fe.Add("deadline", "longer than "+MaxDeadline.String())
		case d > 0 && d < m.Window:
			fe.Add("deadline", "shorter than the window ("+m.Window.String()+"): the window's end is the earliest deadline")
		default:
			m.Deadline = d
		}
	}
	m.OnDeadline = sp.OnDeadline
	switch sp.OnDeadline {
	case "", model.DeadlineRecord:
	case model.DeadlineExpire:
		if m.DeadlineAfter() <= 0 && len(fe.Reasons("deadline")) == 0 {
			fe.Add("onDeadline", "expire needs a deadline: set deadline or window")
		}
	default:
		fe.Add("onDeadline", "must be record or expire")
	}
	if sp.MaxEventAge != "" {
		d, err := time.ParseDuration(sp.MaxEventAge)
		switch {
		case err != nil:
			fe.Add("maxEventAge", "not a duration such as \"2h\"")
		case d == 0:
		case d < MinEventAge || d > MaxEventAge:
			fe.Add("maxEventAge", "must be between "+MinEventAge.String()+" and "+MaxEventAge.String())
		default:
			m.MaxEventAge = d
		}
	}
}

// jitterSpan is how far ahead of a schedule's start Compile looks for the
// smallest gap between its fires: four years hold every leap-day and
// weekday pattern a gap under a day can come from, and eight DST changes.
const jitterSpan = 4

// checkJitter parses a jitter and checks it against the fires of the
// schedule out compiles to: at most maxJitter (the longest window), and
// shorter than the smallest gap between two fires in the four years after
// the later of now and startAt (cron.MinGap, DST included), so that a fire
// never launches after the one that follows it.
func checkJitter(fe *Errors, text string, out *Compiled, maxJitter time.Duration, now time.Time) time.Duration {
	if text == "" {
		return 0
	}
	d, err := time.ParseDuration(text)
	switch {
	case err != nil:
		fe.Add("jitter", "not a duration such as \"15m\" or \"1h\"")
		return 0
	case d < 0:
		fe.Add("jitter", "must not be negative")
		return 0
	case d > maxJitter:
		fe.Add("jitter", "longer than "+maxJitter.String())
		return 0
	}
	m := &out.Schedule
	if d > 0 && m.Interval > 0 && d >= m.Interval {
		fe.Add("jitter", "must be shorter than the interval ("+m.Interval.String()+")")
		return d
	}
	if d == 0 || (out.Expr == nil && len(out.Exprs) == 0) || out.Loc == nil {
		return d
	}
	from := now
	if m.StartAt != nil && m.StartAt.After(from) {
		from = *m.StartAt
	}
	to := from.AddDate(jitterSpan, 0, 0)
	if m.EndAt != nil && m.EndAt.Before(to) {
		to = *m.EndAt
	}
	minGap := func() (time.Duration, time.Time) { return cron.MinGap(out.Expr, out.Loc, from, to) }
	if out.Expr == nil {
		minGap = func() (time.Duration, time.Time) { return unionMinGap(out.Exprs, out.Loc, from, to, d) }
	}
	if gap, at := minGap(); gap > 0 && d >= gap {
		fe.Add("jitter", "must be shorter than the smallest gap between fires ("+gap.String()+
			", after the fire at "+at.In(out.Loc).Format(time.RFC3339)+")")
	}
	return d
}

// checkCalendars checks excludeCalendars and onExcluded (whether the ids
// are the tenant's calendars is the caller's to check) and sets them on m.
func checkCalendars(fe *Errors, m *model.Schedule, sp Spec) {
	if len(sp.ExcludeCalendars) > MaxExcludeCalendars {
		fe.Add("excludeCalendars", "names "+strconv.Itoa(len(sp.ExcludeCalendars))+" calendars; at most "+strconv.Itoa(MaxExcludeCalendars))
	}
	for i, id := range sp.ExcludeCalendars {
		switch {
		case id == "":
			fe.Add("excludeCalendars["+strconv.Itoa(i)+"]", "must not be empty")
		case slices.Contains(sp.ExcludeCalendars[:i], id):
			fe.Add("excludeCalendars["+strconv.Itoa(i)+"]", strconv.Quote(id)+" is named twice")
		}
	}
	switch sp.OnExcluded {
	case "", model.OnExcludedSkip, model.OnExcludedNextIncluded:
		if sp.OnExcluded != "" && len(sp.ExcludeCalendars) == 0 {
			fe.Add("onExcluded", "applies only with excludeCalendars")
		}
	default:
		fe.Add("onExcluded", "must be skip or next_included")
	}
	if len(sp.ExcludeCalendars) > 0 {
		m.ExcludeCalendars = slices.Clone(sp.ExcludeCalendars)
		m.OnExcluded = sp.OnExcluded
	}
}

// MutuallyExclusive is the reason given when more than one of cron,
// fields, crons, interval and runAt is set.
const MutuallyExclusive = "cron, fields, crons, interval, runAt and after are mutually exclusive"

func checkName(fe *Errors, name string, maxLen int) {
	n := utf8.RuneCountInString(name)
	switch {
	case n == 0:
		fe.Add("name", "must not be empty")
	case n > maxLen:
		fe.Add("name", "longer than "+strconv.Itoa(maxLen)+" characters")
	}
}

// reasonOf is the cron engine's message for err without the leading
// "field: " that repeats the name the error is reported under.
func reasonOf(err error, field string) string {
	return strings.TrimPrefix(err.Error(), field+": ")
}

// fieldOf names the field of a field-form expression that the cron engine
// rejected, and that field's name in the engine's messages.
func fieldOf(err error) (field, leaf string) {
	var ce *cron.Error
	if !errors.As(err, &ce) {
		return "fields", "cron"
	}
	name := strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "").Replace(ce.Field))
	switch name {
	case "minute", "hour", "month":
		return "fields." + name, ce.Field
	case "dayofmonth", "dom":
		return "fields.dayOfMonth", ce.Field
	case "dayofweek", "dow":
		return "fields.dayOfWeek", ce.Field
	}
	return "fields", ce.Field
}

// sqsQueuePath matches the path of https://sqs.<region>.amazonaws.com/<account>/<name>
// (and of the same shape on a local endpoint, where http is allowed).
var sqsQueuePath = regexp.MustCompile(`^/[0-9]{12}/[A-Za-z0-9_-]{1,80}(\.fifo)?$`)

// OverPerFireQuota is the reason given for an eventCount over the tenant's
// maxEventsPerFire quota q.
func OverPerFireQuota(q int) string {
	return "over the tenant's maxEventsPerFire quota (" + strconv.Itoa(q) + ")"
}

func checkTarget(fe *Errors, t Target, checkHost, checkQueueURL func(string) error) model.Target {
	return checkTargetAt(fe, "target", t, checkHost, checkQueueURL)
}

// checkTargetAt is checkTarget for a target whose members are named under
// field (notify[i] names its receiver's).
func checkTargetAt(fe *Errors, field string, t Target, checkHost, checkQueueURL func(string) error) model.Target {
	out := model.Target{Type: t.Type}
	switch t.Type {
	case model.TargetHTTP, model.TargetHTTPBatch:
		if t.QueueURL != nil {
			fe.Add(field+".queueUrl", "only for sqs targets")
		}
		if t.URL == nil || *t.URL == "" {
			fe.Add(field+".url", "required for "+string(t.Type)+" targets")
			return out
		}
		out.URL = *t.URL
		u, err := url.Parse(out.URL)
		switch {
		case err != nil:
			fe.Add(field+".url", "not a URL")
		case u.Scheme != "http" && u.Scheme != "https":
			fe.Add(field+".url", "must be an http or https URL")
		case u.Host == "":
			fe.Add(field+".url", "has no host")
		case u.User != nil:
			fe.Add(field+".url", "must not contain credentials")
		case checkHost != nil:
			if err := checkHost(u.Hostname()); err != nil {
				fe.Add(field+".url", err.Error())
			}
		}
	case model.TargetSQS:
		if t.URL != nil {
			fe.Add(field+".url", "only for http targets")
		}
		if t.QueueURL == nil || *t.QueueURL == "" {
			fe.Add(field+".queueUrl", "required for sqs targets")
			return out
		}
		out.QueueURL = *t.QueueURL
		u, err := url.Parse(out.QueueURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !sqsQueuePath.MatchString(u.Path) || u.RawQuery != "" {
			fe.Add(field+".queueUrl", "not an SQS queue URL such as https://sqs.eu-west-1.amazonaws.com/123456789012/my-queue")
		} else if checkQueueURL != nil {
			if err := checkQueueURL(out.QueueURL); err != nil {
				fe.Add(field+".queueUrl", err.Error())
			}
		}
	default:
		fe.Add(field+".type", "must be http, sqs or http_batch")
	}
	return out
}
