package schedule_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testLimits() schedule.Limits {
	return schedule.Limits{
		MaxNameLen:      20,
		MaxEventCount:   1000,
		MaxPayloadBytes: 64,
		MaxChildren:     100,
		MaxWindow:       24 * time.Hour,
		MinPriority:     -10,
		MaxPriority:     10,
		MaxAttempts:     100,
	}
}

func ptr[T any](v T) *T { return &v }

// valid is a spec that compiles; cases change one thing.
func valid() schedule.Spec {
	return schedule.Spec{
		Name:        "nightly",
		Cron:        ptr("0 3 * * *"),
		Timezone:    "UTC",
		EventCount:  1,
		Overlap:     model.OverlapAllow,
		Misfire:     model.MisfireFireOnce,
		Target:      schedule.Target{Type: model.TargetHTTP, URL: ptr("https://consumer.example.com/hook")},
		MaxAttempts: 5,
	}
}

func TestCompileRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*schedule.Spec)
		field  string
		reason string // the whole reason
	}{
		{"EmptyName", func(s *schedule.Spec) { s.Name = "" }, "name", "must not be empty"},
		{"DeadlineShorterThanWindow", func(s *schedule.Spec) { s.Window, s.Deadline = "1h", "30m" },
			"deadline", "shorter than the window (1h0m0s): the window's end is the earliest deadline"},
		{"DeadlineNotADuration", func(s *schedule.Spec) { s.Deadline = "soon" }, "deadline", `not a duration such as "45m" or "2h"`},
		{"ExpireWithoutDeadline", func(s *schedule.Spec) { s.OnDeadline = model.DeadlineExpire },
			"onDeadline", "expire needs a deadline: set deadline or window"},
		{"OnDeadlineUnknown", func(s *schedule.Spec) { s.Deadline, s.OnDeadline = "1h", "panic" }, "onDeadline", "must be record or expire"},
		{"MaxEventAgeTooShort", func(s *schedule.Spec) { s.MaxEventAge = "30s" }, "maxEventAge", "must be between 1m0s and 24h0m0s"},
		{"OnExcludedWithoutCalendars", func(s *schedule.Spec) { s.OnExcluded = model.OnExcludedSkip }, "onExcluded", "applies only with excludeCalendars"},
		{"OnExcludedUnknown", func(s *schedule.Spec) {
			s.ExcludeCalendars, s.OnExcluded = []string{"cal_1"}, "later"
		}, "onExcluded", "must be skip or next_included"},
		{"TooManyCalendars", func(s *schedule.Spec) {
			s.ExcludeCalendars = []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"}
		}, "excludeCalendars", "names 9 calendars; at most 8"},
		{"CalendarTwice", func(s *schedule.Spec) { s.ExcludeCalendars = []string{"c1", "c1"} }, "excludeCalendars[1]", `"c1" is named twice`},
		{"CalendarEmpty", func(s *schedule.Spec) { s.ExcludeCalendars = []string{""} }, "excludeCalendars[0]", "must not be empty"},
		{"LongName", func(s *schedule.Spec) { s.Name = strings.Repeat("ü", 21) }, "name", "longer than 20 characters"},
		{"NoExpression", func(s *schedule.Spec) { s.Cron = nil }, "cron", "one of cron, fields, crons, interval, runAt or after is required"},
		{"CronAndAfter", func(s *schedule.Spec) { s.After = &model.After{ScheduleID: "sch_up"} }, "after", schedule.MutuallyExclusive},
		{"AfterWithoutSchedule", func(s *schedule.Spec) { s.Cron, s.After = nil, &model.After{} }, "after.scheduleId", "required"},
		{"AfterUnknownWhen", func(s *schedule.Spec) {
			s.Cron, s.After = nil, &model.After{ScheduleID: "sch_up", When: "later"}
		}, "after.when", "must be finished or succeeded"},
		{"AfterWithStartAt", func(s *schedule.Spec) {
			s.Cron, s.After, s.StartAt = nil, &model.After{ScheduleID: "sch_up"}, ptr(testNow.Add(time.Hour))
		}, "startAt", "applies to schedules that fire on a clock, not after another schedule"},
		{"NotifyNoAddress", func(s *schedule.Spec) {
			s.Notify = []model.Notify{{On: []model.NotifyKind{model.NotifyFinished}}}
		}, "notify[0].url", "one of url and queueUrl is required"},
		{"NotifyBothAddresses", func(s *schedule.Spec) {
			s.Notify = []model.Notify{{URL: "https://a.example.com/", QueueURL: "https://sqs.eu-west-1.amazonaws.com/1/q", On: []model.NotifyKind{model.NotifyFinished}}}
		}, "notify[0].url", "give url or queueUrl, not both"},
		{"NotifyNotHTTP", func(s *schedule.Spec) {
			s.Notify = []model.Notify{{URL: "ftp://a.example.com/", On: []model.NotifyKind{model.NotifyFinished}}}
		}, "notify[0].url", "must be an http or https URL"},
		{"NotifyBadQueue", func(s *schedule.Spec) {
			s.Notify = []model.Notify{{QueueURL: "https://example.com/", On: []model.NotifyKind{model.NotifyFinished}}}
		}, "notify[0].queueUrl", "not an SQS queue URL such as https://sqs.eu-west-1.amazonaws.com/123456789012/my-queue"},
		{"NotifyNoKind", func(s *schedule.Spec) {
			s.Notify = []model.Notify{{URL: "https://a.example.com/"}}
		}, "notify[0].on", "name at least one of fire.finished, fire.has_dead, fire.deadline_missed, fire.skipped, event.dead"},
		{"NotifyUnknownKind", func(s *schedule.Spec) {
			s.Notify = []model.Notify{{URL: "https://a.example.com/", On: []model.NotifyKind{"fire.done"}}}
		}, "notify[0].on[0]", "must be one of fire.finished, fire.has_dead, fire.deadline_missed, fire.skipped, event.dead"},
		{"NotifyKindTwice", func(s *schedule.Spec) {
			s.Notify = []model.Notify{{URL: "https://a.example.com/", On: []model.NotifyKind{model.NotifySkipped, model.NotifySkipped}}}
		}, "notify[0].on[1]", "fire.skipped is named twice"},
		{"NotifyTooMany", func(s *schedule.Spec) {
			n := model.Notify{URL: "https://a.example.com/", On: []model.NotifyKind{model.NotifySkipped}}
			s.Notify = []model.Notify{n, n, n, n, n}
		}, "notify", "has 5 receivers; at most 4"},
		{"CronAndRunAt", func(s *schedule.Spec) { s.RunAt = ptr(testNow.Add(time.Hour)) }, "cron", schedule.MutuallyExclusive},
		{"CronAndFields", func(s *schedule.Spec) { s.Fields = &cron.Fields{} }, "cron", schedule.MutuallyExclusive},
		{"CronOutOfRange", func(s *schedule.Spec) { s.Cron = ptr("0 24 * * *") }, "cron", "hour: 24 is out of range 0-23"},
		{"CronTooFewFields", func(s *schedule.Spec) { s.Cron = ptr("0 3 * *") },
			"cron", `"0 3 * *" has 4 fields; want 5 (minute hour dayOfMonth month dayOfWeek)`},
		{"CronTooManyChildren", func(s *schedule.Spec) { s.Cron = ptr("*/5 */2 * * *") },
			"cron", "schedule would make 144 children; the limit is 100"},
		{"FieldsOutOfRange", func(s *schedule.Spec) {
			s.Cron, s.Fields = nil, &cron.Fields{Minute: "0", Hour: "25"}
		}, "fields.hour", "25 is out of range 0-23"},
		{"FieldsBadDayOfWeek", func(s *schedule.Spec) {
			s.Cron, s.Fields = nil, &cron.Fields{Minute: "0", Hour: "1", DayOfWeek: "9"}
		}, "fields.dayOfWeek", "9 is out of range 0-7"},
		{"FieldsTooManyChildren", func(s *schedule.Spec) {
			s.Cron, s.Fields = nil, &cron.Fields{Minute: "*/5", Hour: "*/2"}
		}, "fields", "schedule would make 144 children; the limit is 100"},
		{"UnknownTimezone", func(s *schedule.Spec) { s.Timezone = "Mars/Olympus_Mons" }, "timezone", "Mars/Olympus_Mons is not a known IANA time zone"},
		{"LocalTimezone", func(s *schedule.Spec) { s.Timezone = "Local" }, "timezone", "Local is not allowed; want an IANA name such as Europe/London"},
		{"ZeroEventCount", func(s *schedule.Spec) { s.EventCount = 0 }, "eventCount", "must be between 1 and 1000"},
		{"EventCountOverLimit", func(s *schedule.Spec) { s.EventCount = 1001 }, "eventCount", "must be between 1 and 1000"},
		{"BadWindow", func(s *schedule.Spec) { s.Window = "two hours" }, "window", `not a duration such as "30m" or "2h"`},
		{"NegativeWindow", func(s *schedule.Spec) { s.Window = "-1m" }, "window", "must not be negative"},
		{"LongWindow", func(s *schedule.Spec) { s.Window = "25h" }, "window", "longer than 24h0m0s"},
		{"SpreadWithoutWindow", func(s *schedule.Spec) { s.Spread = true }, "spread", "spreading needs a window"},
		{"PriorityBelowRange", func(s *schedule.Spec) { s.Priority = -11 }, "priority", "must be between -10 and 10"},
		{"PriorityAboveRange", func(s *schedule.Spec) { s.Priority = 11 }, "priority", "must be between -10 and 10"},
		{"UnknownOverlap", func(s *schedule.Spec) { s.Overlap = "queue" }, "overlap", "must be allow, skip or cancel"},
		{"UnknownMisfire", func(s *schedule.Spec) { s.Misfire = "" }, "misfire", "must be fire_once, fire_all or skip"},
		{"UnknownTargetType", func(s *schedule.Spec) { s.Target.Type = "smtp" }, "target.type", "must be http, sqs or http_batch"},
		{"HTTPTargetWithoutURL", func(s *schedule.Spec) { s.Target.URL = nil }, "target.url", "required for http targets"},
		{"HTTPTargetWithQueueURL", func(s *schedule.Spec) { s.Target.QueueURL = ptr("") }, "target.queueUrl", "only for sqs targets"},
		{"HTTPBatchTargetWithoutURL", func(s *schedule.Spec) { s.Target = schedule.Target{Type: model.TargetHTTPBatch} }, "target.url", "required for http_batch targets"},
		{"HTTPBatchTargetWithQueueURL", func(s *schedule.Spec) {
			s.Target = schedule.Target{Type: model.TargetHTTPBatch, URL: ptr("https://consumer.example.com/batch"), QueueURL: ptr("")}
		}, "target.queueUrl", "only for sqs targets"},
		{"HTTPBatchFTPTargetURL", func(s *schedule.Spec) {
			s.Target = schedule.Target{Type: model.TargetHTTPBatch, URL: ptr("ftp://consumer.example.com/x")}
		}, "target.url", "must be an http or https URL"},
		{"HTTPBatchTargetURLWithCredentials", func(s *schedule.Spec) {
			s.Target = schedule.Target{Type: model.TargetHTTPBatch, URL: ptr("https://u:p@consumer.example.com/")}
		}, "target.url", "must not contain credentials"},
		{"FTPTargetURL", func(s *schedule.Spec) { s.Target.URL = ptr("ftp://consumer.example.com/x") }, "target.url", "must be an http or https URL"},
		{"TargetURLWithoutHost", func(s *schedule.Spec) { s.Target.URL = ptr("https:///path") }, "target.url", "has no host"},
		{"TargetURLWithCredentials", func(s *schedule.Spec) { s.Target.URL = ptr("https://u:p@consumer.example.com/") }, "target.url", "must not contain credentials"},
		{"TargetURLUnparsable", func(s *schedule.Spec) { s.Target.URL = ptr("https://a b/%zz") }, "target.url", "not a URL"},
		{"SQSTargetWithURL", func(s *schedule.Spec) {
			s.Target = schedule.Target{Type: model.TargetSQS, URL: ptr("https://a.example"),
				QueueURL: ptr("https://sqs.eu-west-1.amazonaws.com/123456789012/q")}
		}, "target.url", "only for http targets"},
		{"SQSTargetWithoutQueueURL", func(s *schedule.Spec) { s.Target = schedule.Target{Type: model.TargetSQS} }, "target.queueUrl", "required for sqs targets"},
		{"MalformedQueueURL", func(s *schedule.Spec) {
			s.Target = schedule.Target{Type: model.TargetSQS, QueueURL: ptr("https://sqs.eu-west-1.amazonaws.com/not-an-account/q")}
		}, "target.queueUrl", "not an SQS queue URL such as https://sqs.eu-west-1.amazonaws.com/123456789012/my-queue"},
		{"PayloadOverLimit", func(s *schedule.Spec) {
			s.Payload = json.RawMessage(`"` + strings.Repeat("x", 63) + `"`)
		}, "payload", "larger than 64 bytes"},
		{"ZeroMaxAttempts", func(s *schedule.Spec) { s.MaxAttempts = 0 }, "maxAttempts", "must be between 1 and 100"},
		{"MaxAttemptsOverLimit", func(s *schedule.Spec) { s.MaxAttempts = 101 }, "maxAttempts", "must be between 1 and 100"},
		{"StartAtOnOneOff", func(s *schedule.Spec) {
			s.Cron, s.RunAt, s.StartAt = nil, ptr(testNow.Add(time.Hour)), ptr(testNow)
		}, "startAt", "applies to cron and interval schedules only"},
		{"EndAtOnOneOff", func(s *schedule.Spec) {
			s.Cron, s.RunAt, s.EndAt = nil, ptr(testNow.Add(time.Hour)), ptr(testNow.Add(2*time.Hour))
		}, "endAt", "applies to cron and interval schedules only"},
		{"EndBeforeStart", func(s *schedule.Spec) {
			s.StartAt, s.EndAt = ptr(testNow.Add(48*time.Hour)), ptr(testNow.Add(24*time.Hour))
		}, "endAt", "must be after startAt"},
		{"EndAtStart", func(s *schedule.Spec) {
			s.StartAt, s.EndAt = ptr(testNow.Add(time.Hour)), ptr(testNow.Add(time.Hour))
		}, "endAt", "must be after startAt"},
		{"EndInThePast", func(s *schedule.Spec) { s.EndAt = ptr(testNow) }, "endAt", "is in the past"},
		{"BadJitter", func(s *schedule.Spec) { s.Jitter = "soon" }, "jitter", `not a duration such as "15m" or "1h"`},
		{"NegativeJitter", func(s *schedule.Spec) { s.Jitter = "-1s" }, "jitter", "must not be negative"},
		{"LongJitter", func(s *schedule.Spec) { s.Cron, s.Jitter = ptr("0 3 1 1 *"), "25h" }, "jitter", "longer than 24h0m0s"},
		{"JitterAsLongAsTheGap", func(s *schedule.Spec) { s.Cron, s.Jitter = ptr("*/15 * * * *"), "15m" },
			"jitter", "must be shorter than the smallest gap between fires (15m0s, after the fire at 2026-03-01T12:15:00Z)"},
		{"JitterOverTheWeekdayGap", func(s *schedule.Spec) { s.Cron, s.Jitter = ptr("0 9 * * 1-5"), "24h" },
			"jitter", "must be shorter than the smallest gap between fires (24h0m0s, after the fire at 2026-03-02T09:00:00Z)"},
		// 02:59 does not exist on 2026-03-29 in Berlin: it fires at 03:00,
		// a minute after the 01:59 fire.
		{"JitterOverADSTGap", func(s *schedule.Spec) {
			s.Cron, s.Timezone, s.Jitter = ptr("59 1,2 * * *"), "Europe/Berlin", "2m"
		}, "jitter", "must be shorter than the smallest gap between fires (1m0s, after the fire at 2026-03-29T01:59:00+01:00)"},
		{"LabelKeyInvalid", func(s *schedule.Spec) { s.Labels = map[string]string{"my team": "x"} }, "labels",
			`key "my team": the name must be letters, digits, '-', '_' and '.', and start and end with a letter or digit`},
		{"LabelValueInvalid", func(s *schedule.Spec) { s.Labels = map[string]string{"team": "-x"} }, "labels.team",
			"value must be letters, digits, '-', '_' and '.', and start and end with a letter or digit"},
		{"SeventeenLabels", func(s *schedule.Spec) {
			s.Labels = map[string]string{}
			for i := range 17 {
				s.Labels["k"+strconv.Itoa(i)] = ""
			}
		}, "labels", "17 labels, at most 16"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := valid()
			tc.mutate(&sp)
			c, err := schedule.Compile(sp, testLimits(), testNow)
			if c != nil {
				t.Fatalf("compiled: %+v", c.Schedule)
			}
			var fe schedule.Errors
			if !errors.As(err, &fe) {
				t.Fatalf("error %T %v is not schedule.Errors", err, err)
			}
			if !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("errors.Is(%v, ErrInvalid) is false", err)
			}
			if len(fe) != 1 {
				t.Fatalf("want one failed field, got %v", err)
			}
			if got := fe.Reasons(tc.field); len(got) != 1 || got[0] != tc.reason {
				t.Fatalf("reasons of %s: %q, want %q (all: %v)", tc.field, got, tc.reason, err)
			}
		})
	}

	t.Run("ReportsEveryBadField", func(t *testing.T) {
		sp := valid()
		sp.Name, sp.Timezone, sp.EventCount, sp.Cron = "", "Nowhere/Land", 0, ptr("61 * * * *")
		_, err := schedule.Compile(sp, testLimits(), testNow)
		var fe schedule.Errors
		if !errors.As(err, &fe) {
			t.Fatalf("error %v is not schedule.Errors", err)
		}
		var fields []string
		for _, e := range fe {
			fields = append(fields, e.Field)
		}
		if want := []string{"name", "timezone", "cron", "eventCount"}; !reflect.DeepEqual(fields, want) {
			t.Fatalf("fields %v, want %v", fields, want)
		}
	})
}

func TestCompile(t *testing.T) {
	london, err := time.LoadLocation("Europe/London")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("CronCompilesToCanonicalFormAndKeys", func(t *testing.T) {
		sp := valid()
		sp.Cron, sp.Timezone = ptr("30 9 * * MON,fri"), "Europe/London"
		sp.Window, sp.Spread, sp.Priority = "90m", true, -3
		sp.Payload = json.RawMessage(`{"a":1}`)
		sp.StartAt = ptr(time.Date(2026, 4, 1, 10, 0, 0, 0, london))
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		m := c.Schedule
		if m.Cron != "30 9 * * 1,5" || m.Timezone != "Europe/London" || c.Loc.String() != "Europe/London" {
			t.Fatalf("cron %q timezone %q loc %v", m.Cron, m.Timezone, c.Loc)
		}
		if m.Window != 90*time.Minute || !m.Spread || m.Priority != -3 || string(m.Payload) != `{"a":1}` {
			t.Fatalf("definition %+v", m)
		}
		if m.StartAt.Location() != time.UTC || !m.StartAt.Equal(time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)) {
			t.Fatalf("startAt %v, want 09:00 UTC", m.StartAt)
		}
		var got []string
		for _, k := range c.Keys {
			got = append(got, k.String())
		}
		if want := []string{"W:1:09@30", "W:5:09@30"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("keys %v, want %v", got, want)
		}
	})
	t.Run("HTTPBatchTargetCompiles", func(t *testing.T) {
		sp := valid()
		sp.Target = schedule.Target{Type: model.TargetHTTPBatch, URL: ptr("https://consumer.example.com/batch")}
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if want := (model.Target{Type: model.TargetHTTPBatch, URL: "https://consumer.example.com/batch"}); c.Schedule.Target != want {
			t.Fatalf("target %+v, want %+v", c.Schedule.Target, want)
		}
	})
	t.Run("FieldsCompileLikeCron", func(t *testing.T) {
		sp := valid()
		sp.Cron, sp.Fields = nil, &cron.Fields{Minute: "0", Hour: "9", DayOfWeek: "0#3", Month: "1"}
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if c.Schedule.Cron != "0 9 * 1 0#3" || len(c.Keys) != 1 || c.Keys[0].String() != "MW:01:0#3:09@00" {
			t.Fatalf("cron %q keys %v", c.Schedule.Cron, c.Keys)
		}
	})
	t.Run("EmptyTimezoneIsUTC", func(t *testing.T) {
		sp := valid()
		sp.Timezone = ""
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if c.Schedule.Timezone != "UTC" || c.Loc != time.UTC {
			t.Fatalf("timezone %q loc %v", c.Schedule.Timezone, c.Loc)
		}
	})
	t.Run("NullPayloadIsNone", func(t *testing.T) {
		sp := valid()
		sp.Payload = json.RawMessage("null")
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if c.Schedule.Payload != nil {
			t.Fatalf("payload %s", c.Schedule.Payload)
		}
	})
	t.Run("OneOffHasOneUTCChild", func(t *testing.T) {
		sp := valid()
		sp.Cron, sp.Timezone = nil, "Europe/London"
		sp.RunAt = ptr(time.Date(2026, 7, 4, 15, 7, 30, 0, london)) // 14:07:30 UTC
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if c.Expr != nil || c.Keys != nil || c.Schedule.Cron != "" {
			t.Fatalf("one-off has an expression: %+v", c)
		}
		m := c.Schedule
		m.ID, m.TenantID, m.Version, m.Partition = "sch_1", "ten_1", 3, 2
		got := c.Children(&m)
		want := []model.Child{{ScheduleID: "sch_1", TenantID: "ten_1", ScheduleVersion: 3, Partition: 2,
			Timezone: "UTC", LaunchExpression: "MM:07:04:14", Minute: 7}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("children %+v, want %+v", got, want)
		}
		if ft := c.NextFireTimes(testNow, 5); len(ft) != 1 || !ft[0].Equal(*sp.RunAt) {
			t.Fatalf("next fire times %v", ft)
		}
	})
	t.Run("InstantsKeepTheirMilliseconds", func(t *testing.T) {
		sp := valid()
		sp.Cron = nil
		sp.RunAt = ptr(time.Date(2026, 7, 4, 14, 59, 59, 479_500_000, time.UTC))
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Schedule.RunAt.Equal(*sp.RunAt) {
			t.Fatalf("runAt %s, want %s", c.Schedule.RunAt, sp.RunAt)
		}
		// Fired at the next whole millisecond, never before RunAt; the
		// child stays in RunAt's minute.
		want := time.Date(2026, 7, 4, 14, 59, 59, 480_000_000, time.UTC)
		if ft := c.NextFireTimes(testNow, 5); len(ft) != 1 || !ft[0].Equal(want) {
			t.Fatalf("next fire times %v, want [%s]", ft, want)
		}
		m := c.Schedule
		if ch := c.Children(&m); len(ch) != 1 || ch[0].LaunchExpression != "MM:07:04:14" || ch[0].Minute != 59 {
			t.Fatalf("children %+v", ch)
		}

		sp = valid()
		sp.StartAt = ptr(time.Date(2026, 4, 1, 0, 0, 0, 250_000_000, time.UTC))
		sp.EndAt = ptr(time.Date(2026, 5, 1, 0, 0, 0, 750_000_000, time.UTC))
		c, err = schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Schedule.StartAt.Equal(*sp.StartAt) || !c.Schedule.EndAt.Equal(*sp.EndAt) {
			t.Fatalf("startAt %s endAt %s, want %s %s", c.Schedule.StartAt, c.Schedule.EndAt, sp.StartAt, sp.EndAt)
		}
	})
	t.Run("CronChildrenCarryTheStoredIdentity", func(t *testing.T) {
		sp := valid()
		sp.Cron, sp.Timezone = ptr("15,45 6 L * *"), "America/New_York"
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		m := c.Schedule
		m.ID, m.TenantID, m.Version, m.Partition = "sch_2", "ten_1", 7, 1
		want := []model.Child{
			{ScheduleID: "sch_2", TenantID: "ten_1", ScheduleVersion: 7, Partition: 1, Timezone: "America/New_York", LaunchExpression: "M:L:06", Minute: 15},
			{ScheduleID: "sch_2", TenantID: "ten_1", ScheduleVersion: 7, Partition: 1, Timezone: "America/New_York", LaunchExpression: "M:L:06", Minute: 45},
		}
		if got := c.Children(&m); !reflect.DeepEqual(got, want) {
			t.Fatalf("children %+v, want %+v", got, want)
		}
	})
}

func TestNextFireTimes(t *testing.T) {
	at := func(d, h int) time.Time { return time.Date(2026, 3, d, h, 0, 0, 0, time.UTC) }
	cases := []struct {
		name           string
		startAt, endAt *time.Time
		k              int
		want           []time.Time
	}{
		{"FromNow", nil, nil, 3, []time.Time{at(2, 3), at(3, 3), at(4, 3)}},
		{"StartAtIsInclusive", ptr(at(5, 3)), nil, 2, []time.Time{at(5, 3), at(6, 3)}},
		{"StartAtInThePastIsIgnored", ptr(at(1, 0)), nil, 1, []time.Time{at(2, 3)}},
		{"EndAtIsInclusive", nil, ptr(at(3, 3)), 5, []time.Time{at(2, 3), at(3, 3)}},
		{"NothingAfterEndAt", nil, ptr(at(2, 2)), 5, []time.Time{}},
		{"ZeroCount", nil, nil, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := valid()
			c, err := schedule.Compile(sp, testLimits(), testNow)
			if err != nil {
				t.Fatal(err)
			}
			c.Schedule.StartAt, c.Schedule.EndAt = tc.startAt, tc.endAt
			if got := c.NextFireTimes(testNow, tc.k); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFromSchedule(t *testing.T) {
	t.Run("RecompilesTheStoredDefinition", func(t *testing.T) {
		sp := valid()
		sp.Cron, sp.Timezone, sp.Window = ptr("0 */6 1,15 * *"), "Asia/Tokyo", "2h"
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		m := c.Schedule
		m.ID = "sch_3"
		again, err := schedule.FromSchedule(&m, testLimits().MaxChildren)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again.Keys, c.Keys) || again.Loc.String() != "Asia/Tokyo" || again.Expr.String() != m.Cron {
			t.Fatalf("recompiled %+v, want keys %v", again, c.Keys)
		}
	})
	t.Run("SpecFromScheduleRoundTrips", func(t *testing.T) {
		sp := valid()
		sp.Window, sp.PolicyID = "45m", "pol_1"
		sp.Target = schedule.Target{Type: model.TargetSQS, QueueURL: ptr("https://sqs.eu-west-1.amazonaws.com/123456789012/q")}
		c, err := schedule.Compile(sp, testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		again, err := schedule.Compile(schedule.SpecFromSchedule(&c.Schedule), testLimits(), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again.Schedule, c.Schedule) {
			t.Fatalf("round trip %+v, want %+v", again.Schedule, c.Schedule)
		}
	})
	t.Run("RejectsAStoredCronThatNoLongerParses", func(t *testing.T) {
		m := &model.Schedule{ID: "sch_4", Timezone: "UTC", Cron: "0 24 * * *"}
		_, err := schedule.FromSchedule(m, 100)
		var ce *cron.Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "sch_4") {
			t.Fatalf("error %v, want a *cron.Error naming the schedule", err)
		}
	})
}

// TestCompileCheckTargetHost checks that the caller's host rule sees the
// URL's host as a dialer would (brackets and port removed, zone decoded)
// and that its refusal is the reason given for target.url.
func TestCompileCheckTargetHost(t *testing.T) {
	refuse := errors.New("host is refused")
	for _, tc := range []struct {
		name, url, host string
	}{
		{"Name", "https://consumer.example.com/hook", "consumer.example.com"},
		{"IPv4WithPort", "http://127.1:8080/hook", "127.1"},
		{"IPv6Bracketed", "http://[::ffff:127.0.0.1]:80/", "::ffff:127.0.0.1"},
		{"IPv6Zone", "http://[fe80::1%25eth0]/", "fe80::1%eth0"},
		{"Hex", "http://0x7f000001/", "0x7f000001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []string
			lim := testLimits()
			lim.CheckTargetHost = func(host string) error {
				seen = append(seen, host)
				if host == tc.host {
					return refuse
				}
				return nil
			}
			sp := valid()
			sp.Target.URL = ptr(tc.url)
			c, err := schedule.Compile(sp, lim, testNow)
			if c != nil {
				t.Fatalf("compiled: %+v", c.Schedule)
			}
			var fe schedule.Errors
			if !errors.As(err, &fe) || len(fe) != 1 {
				t.Fatalf("error %v, want one failed field", err)
			}
			if got := fe.Reasons("target.url"); !reflect.DeepEqual(got, []string{refuse.Error()}) {
				t.Fatalf("reasons of target.url: %q, want %q (hook saw %q)", got, refuse.Error(), seen)
			}
		})
	}

	t.Run("HTTPBatchTargetChecked", func(t *testing.T) {
		lim := testLimits()
		var seen []string
		lim.CheckTargetHost = func(host string) error {
			seen = append(seen, host)
			return refuse
		}
		sp := valid()
		sp.Target = schedule.Target{Type: model.TargetHTTPBatch, URL: ptr("https://consumer.example.com/batch")}
		_, err := schedule.Compile(sp, lim, testNow)
		var fe schedule.Errors
		if !errors.As(err, &fe) || !reflect.DeepEqual(fe.Reasons("target.url"), []string{refuse.Error()}) {
			t.Fatalf("error %v, want target.url refused", err)
		}
		if !reflect.DeepEqual(seen, []string{"consumer.example.com"}) {
			t.Fatalf("hook saw %q", seen)
		}
	})

	t.Run("NotCalledForSQSTargets", func(t *testing.T) {
		lim := testLimits()
		lim.CheckTargetHost = func(host string) error { return refuse }
		sp := valid()
		sp.Target = schedule.Target{Type: model.TargetSQS, QueueURL: ptr("http://127.0.0.1:9324/123456789012/q")}
		if _, err := schedule.Compile(sp, lim, testNow); err != nil {
			t.Fatalf("sqs target: %v", err)
		}
	})

	t.Run("AcceptedHostCompiles", func(t *testing.T) {
		lim := testLimits()
		lim.CheckTargetHost = func(host string) error { return nil }
		if _, err := schedule.Compile(valid(), lim, testNow); err != nil {
			t.Fatalf("compile: %v", err)
		}
	})
}
