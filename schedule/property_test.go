package schedule_test

import (
	"encoding/json"
	"errors"
	"flag"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

var (
	seed  = flag.Uint64("schedule.seed", 1, "seed of TestCompileProperties")
	cases = flag.Int("schedule.cases", 300, "number of random specs TestCompileProperties compiles")
)

// knownFields are the field names Compile may report.
var knownFields = map[string]bool{
	"name": true, "cron": true, "fields": true, "fields.minute": true, "fields.hour": true,
	"fields.dayOfMonth": true, "fields.month": true, "fields.dayOfWeek": true, "timezone": true,
	"eventCount": true, "window": true, "spread": true, "priority": true, "overlap": true,
	"misfire": true, "target.type": true, "target.url": true, "target.queueUrl": true,
	"payload": true, "maxAttempts": true, "startAt": true, "endAt": true,
}

// TestCompileProperties compiles random specs (mostly valid, some broken in
// any field) and checks the invariants of every outcome; a failure prints
// the seed to rerun it with -schedule.seed.
func TestCompileProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(*seed, 0))
	lim := testLimits()
	lim.MaxChildren = 2000
	outcomes := map[string]int{}
	defer func() { t.Logf("outcomes: %v", outcomes) }()
	for i := range *cases {
		sp := randomSpec(r)
		c, err := schedule.Compile(sp, lim, testNow)
		if t.Failed() {
			break
		}
		t0 := randomWindowStart(r)
		checkCompiled(t, sp, c, err, lim, t0, 26*time.Hour)
		switch {
		case err != nil:
			outcomes["rejected"]++
		case c.Expr != nil:
			outcomes["cron"]++
		default:
			outcomes["one-off"]++
		}
		if t.Failed() {
			t.Logf("case %d of seed %d: %+v (cron %v, fields %v)", i, *seed, sp, deref(sp.Cron), sp.Fields)
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// checkCompiled checks one outcome of Compile. For a cron schedule, the
// fire times in [t0, t0+span) that the emitter finds by matching the
// children keys against cron.AppendEligible are exactly the expression's.
func checkCompiled(t *testing.T, sp schedule.Spec, c *schedule.Compiled, err error, lim schedule.Limits, t0 time.Time, span time.Duration) {
	t.Helper()
	if err != nil {
		var fe schedule.Errors
		if !errors.As(err, &fe) || len(fe) == 0 || c != nil {
			t.Errorf("error %T %v with result %v; want non-empty schedule.Errors only", err, err, c)
			return
		}
		for _, e := range fe {
			if !knownFields[e.Field] || e.Reason == "" {
				t.Errorf("bad field error %q: %q", e.Field, e.Reason)
			}
			if strings.HasPrefix(e.Reason, e.Field+": ") || strings.HasPrefix(e.Reason, strings.TrimPrefix(e.Field, "fields.")+": ") {
				t.Errorf("reason of %s repeats the field: %q", e.Field, e.Reason)
			}
		}
		return
	}
	m := &c.Schedule
	if c.Loc == nil || m.Timezone == "" {
		t.Errorf("no location: %+v", c)
		return
	}
	again, err := schedule.Compile(schedule.SpecFromSchedule(m), lim, testNow)
	if err != nil {
		t.Errorf("the compiled definition does not compile again: %v", err)
		return
	}
	if !reflect.DeepEqual(again.Schedule, *m) || !reflect.DeepEqual(again.Keys, c.Keys) {
		t.Errorf("compiling the compiled definition changed it:\n %+v\n %+v", again.Schedule, *m)
	}
	if m.RunAt != nil {
		if c.Expr != nil || len(c.Keys) != 0 || len(c.Children(m)) != 1 {
			t.Errorf("one-off with expression %v, keys %v", c.Expr, c.Keys)
		}
		return
	}
	if c.Expr == nil || m.Cron != c.Expr.String() {
		t.Errorf("cron %q, expression %v", m.Cron, c.Expr)
		return
	}
	if len(c.Keys) == 0 || len(c.Keys) > lim.MaxChildren {
		t.Errorf("%d keys for %q", len(c.Keys), m.Cron)
	}
	own := make(map[cron.Key]bool, len(c.Keys))
	for _, k := range c.Keys {
		if own[k] {
			t.Errorf("key %v twice", k)
		}
		own[k] = true
	}
	if children := c.Children(m); len(children) != len(c.Keys) {
		t.Errorf("%d children for %d keys", len(children), len(c.Keys))
	}

	t1 := t0.Add(span)
	var byKeys []time.Time
	for _, sl := range cron.AppendEligible(nil, c.Loc, t0, t1) {
		if own[sl.Key] {
			byKeys = append(byKeys, sl.At)
		}
	}
	slices.SortFunc(byKeys, time.Time.Compare)
	byKeys = slices.CompactFunc(byKeys, time.Time.Equal)
	var byExpr []time.Time
	for _, ft := range cron.NextFireTimes(c.Expr, c.Loc, t0.Add(-time.Second), int(span/time.Minute)+1) {
		if ft.Before(t1) {
			byExpr = append(byExpr, ft)
		}
	}
	if !slices.EqualFunc(byKeys, byExpr, time.Time.Equal) {
		t.Errorf("%q in %v from %v: the children fire at %d instants, the expression at %d\n keys: %v\n expr: %v",
			m.Cron, c.Loc, t0, len(byKeys), len(byExpr), firstFew(byKeys), firstFew(byExpr))
	}
}

func firstFew(ts []time.Time) []time.Time { return ts[:min(len(ts), 5)] }

var zones = []string{"UTC", "Europe/London", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata",
	"America/Sao_Paulo", "Pacific/Chatham", "Europe/Berlin", "Mars/Base", "Local", ""}

// dstDays are instants near zone transitions of the zones above.
var dstDays = []time.Time{
	time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC),
	time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC),
	time.Date(2026, 4, 4, 14, 0, 0, 0, time.UTC), time.Date(2026, 10, 3, 15, 0, 0, 0, time.UTC),
	time.Date(2028, 2, 28, 0, 0, 0, 0, time.UTC), time.Date(2030, 12, 31, 0, 0, 0, 0, time.UTC),
}

// randomWindowStart is a minute between 1990 and 2040, near a zone
// transition half of the time.
func randomWindowStart(r *rand.Rand) time.Time {
	if r.IntN(2) == 0 {
		return dstDays[r.IntN(len(dstDays))].Add(-time.Duration(r.IntN(20*60)) * time.Minute)
	}
	lo := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).Unix() / 60
	hi := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC).Unix() / 60
	return time.Unix((lo+r.Int64N(hi-lo))*60, 0).UTC()
}

// randomField is a cron field over [lo, hi]; bad is a token that is not.
func randomField(r *rand.Rand, lo, hi int, extra ...string) string {
	n := func() int { return lo + r.IntN(hi-lo+1) }
	switch r.IntN(8) {
	case 0, 1:
		return "*"
	case 2:
		return "*/" + itoa(1+r.IntN(hi-lo+1))
	case 3:
		a, b := n(), n()
		return itoa(min(a, b)) + "-" + itoa(max(a, b))
	case 4:
		return itoa(n()) + "," + itoa(n())
	case 5:
		if len(extra) > 0 {
			return extra[r.IntN(len(extra))]
		}
	case 6:
		if r.IntN(10) == 0 {
			return []string{itoa(hi + 1), "x", "", "1-", "*/0", "-3"}[r.IntN(6)]
		}
	}
	return itoa(n())
}

func itoa(n int) string { return strconv.Itoa(n) }

func randomSpec(r *rand.Rand) schedule.Spec {
	sp := valid()
	if r.IntN(3) > 0 {
		sp.Timezone = zones[r.IntN(4)]
	} else {
		sp.Timezone = zones[r.IntN(len(zones))]
	}
	f := cron.Fields{
		Minute:     randomField(r, 0, 59),
		Hour:       randomField(r, 0, 23),
		DayOfMonth: randomField(r, 1, 31, "L", "1,L", "29", "31"),
		Month:      randomField(r, 1, 12, "feb", "JAN-MAR"),
		DayOfWeek:  randomField(r, 0, 7, "0#3", "5#5", "MON-FRI", "sun#1,6"),
	}
	if r.IntN(4) > 0 && f.Minute == "*" {
		f.Minute = itoa(r.IntN(60)) // keep most schedules under the children limit
	}
	switch r.IntN(10) {
	case 0:
		sp.Cron, sp.Fields = nil, &f
	case 1:
		sp.Cron, sp.RunAt = nil, ptr(randomWindowStart(r).Add(time.Duration(r.IntN(59))*time.Second))
	case 2:
		if r.IntN(3) == 0 {
			sp.Cron = nil // no expression at all
		} else {
			sp.RunAt = ptr(testNow) // two of them
		}
	default:
		sp.Cron = ptr(strings.Join([]string{f.Minute, f.Hour, f.DayOfMonth, f.Month, f.DayOfWeek}, " "))
	}
	if r.IntN(8) == 0 {
		sp.Name = strings.Repeat("n", r.IntN(30))
	}
	if r.IntN(8) == 0 {
		sp.EventCount = r.IntN(1100) - 50
	}
	if r.IntN(6) == 0 {
		sp.Window = []string{"", "30m", "2h", "25h", "-1m", "soon", "0s"}[r.IntN(7)]
		sp.Spread = r.IntN(2) == 0
	}
	if r.IntN(8) == 0 {
		sp.Priority = r.IntN(30) - 15
	}
	if r.IntN(10) == 0 {
		sp.Overlap = []model.OverlapPolicy{"", "skip", "cancel", "queue"}[r.IntN(4)]
	}
	if r.IntN(10) == 0 {
		sp.Misfire = []model.MisfirePolicy{"", "fire_all", "skip", "later"}[r.IntN(4)]
	}
	if r.IntN(8) == 0 {
		sp.Target = schedule.Target{Type: []model.TargetType{"http", "sqs", "smtp"}[r.IntN(3)]}
		if r.IntN(2) == 0 {
			sp.Target.URL = ptr([]string{"https://a.example/x", "ftp://a.example", "https://", ""}[r.IntN(4)])
		}
		if r.IntN(2) == 0 {
			sp.Target.QueueURL = ptr([]string{"https://sqs.eu-west-1.amazonaws.com/123456789012/q", "https://sqs/x", ""}[r.IntN(3)])
		}
	}
	if r.IntN(6) == 0 {
		sp.Payload = json.RawMessage(`"` + strings.Repeat("p", r.IntN(80)) + `"`)
	}
	if r.IntN(8) == 0 {
		sp.MaxAttempts = r.IntN(110) - 5
	}
	if r.IntN(6) == 0 {
		sp.StartAt = ptr(testNow.Add(time.Duration(r.IntN(100)-50) * time.Hour))
	}
	if r.IntN(6) == 0 {
		sp.EndAt = ptr(testNow.Add(time.Duration(r.IntN(100)-50) * time.Hour))
	}
	return sp
}

// fuzzSpec is the JSON form FuzzCompile reads, named like the API's fields.
type fuzzSpec struct {
	Name        string          `json:"name"`
	Cron        *string         `json:"cron"`
	Fields      *cron.Fields    `json:"fields"`
	RunAt       *time.Time      `json:"runAt"`
	Timezone    string          `json:"timezone"`
	EventCount  int             `json:"eventCount"`
	Window      string          `json:"window"`
	Spread      bool            `json:"spread"`
	Priority    int             `json:"priority"`
	Overlap     string          `json:"overlap"`
	Misfire     string          `json:"misfire"`
	Type        string          `json:"type"`
	URL         *string         `json:"url"`
	QueueURL    *string         `json:"queueUrl"`
	Payload     json.RawMessage `json:"payload"`
	MaxAttempts int             `json:"maxAttempts"`
	StartAt     *time.Time      `json:"startAt"`
	EndAt       *time.Time      `json:"endAt"`
	From        int64           `json:"from"` // start of the checked window, unix minutes
}

func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","cron":"0 3 * * *","timezone":"UTC","eventCount":1,"overlap":"allow","misfire":"fire_once","type":"http","url":"https://a.example","maxAttempts":5}`,
		`{"name":"b","cron":"*/15 1-3,23 1,L JAN-MAR MON-FRI","timezone":"Europe/London","eventCount":3,"overlap":"skip","misfire":"skip","type":"http","url":"https://a.example","maxAttempts":1,"from":29577780}`,
		`{"name":"c","fields":{"minute":"30","hour":"1","dayOfWeek":"0#5"},"timezone":"America/New_York","eventCount":1,"overlap":"cancel","misfire":"fire_all","type":"sqs","queueUrl":"https://sqs.eu-west-1.amazonaws.com/123456789012/q","maxAttempts":2,"from":29560000}`,
		`{"name":"d","runAt":"2026-07-04T15:07:30+01:00","timezone":"UTC","eventCount":1,"overlap":"allow","misfire":"fire_once","type":"http","url":"https://a.example","maxAttempts":5}`,
		`{"name":"","cron":"0 24 * *","timezone":"Local","eventCount":0,"window":"x","spread":true,"priority":99,"type":"smtp","maxAttempts":0,"startAt":"2026-01-02T00:00:00Z","endAt":"2026-01-01T00:00:00Z"}`,
		`{"name":"e","cron":"30 2 * * *","timezone":"Australia/Lord_Howe","eventCount":1,"overlap":"allow","misfire":"fire_once","type":"http","url":"https://a.example","maxAttempts":5,"window":"1h","spread":true,"from":29574000}`,
	} {
		f.Add([]byte(s))
	}
	lim := testLimits()
	f.Fuzz(func(t *testing.T, data []byte) {
		var in fuzzSpec
		if json.Unmarshal(data, &in) != nil {
			return
		}
		sp := schedule.Spec{
			Name: in.Name, Cron: in.Cron, Fields: in.Fields, RunAt: in.RunAt, Timezone: in.Timezone,
			EventCount: in.EventCount, Window: in.Window, Spread: in.Spread, Priority: in.Priority,
			Overlap: model.OverlapPolicy(in.Overlap), Misfire: model.MisfirePolicy(in.Misfire),
			Target:  schedule.Target{Type: model.TargetType(in.Type), URL: in.URL, QueueURL: in.QueueURL},
			Payload: in.Payload, MaxAttempts: in.MaxAttempts, StartAt: in.StartAt, EndAt: in.EndAt,
		}
		c, err := schedule.Compile(sp, lim, testNow)
		// Windows from 1980 to 2100: the cron engine assumes minute-aligned
		// zone offsets, true since 1980.
		from := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(uint64(in.From)%(120*525600)) * time.Minute)
		checkCompiled(t, sp, c, err, lim, from, 3*time.Hour)
	})
}
