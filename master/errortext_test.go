package master_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/client"
)

// TestScheduleErrorText checks that a rejection reads as a sentence about the
// named field: no repeated field prefix, no validator internals.
func TestScheduleErrorText(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")

	cronCases := []struct {
		name   string
		cron   string
		reason string // the whole reason given for field cron
	}{
		{"CronWithTooFewFieldsIsNotPrefixedTwice", "0 3 * *", `"0 3 * *" has 4 fields; want 5 (minute hour dayOfMonth month dayOfWeek)`},
		{"EmptyCronIsNotPrefixedTwice", "", `has 0 fields; want 5 (minute hour dayOfMonth month dayOfWeek)`},
		{"TooManyChildrenIsNotPrefixedTwice", "* * 1-30 1-11 *", "schedule would make 19740 children; the limit is 10000"},
		{"CronFieldErrorKeepsItsFieldName", "0 24 * * *", "hour: 24 is out of range 0-23"},
	}
	for _, tc := range cronCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "x", Cron: ptr(tc.cron), Target: httpTarget()})
			p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "cron")
			if got := reasonOf(p, "cron"); got != tc.reason {
				t.Fatalf("reason %q, want %q", got, tc.reason)
			}
			if p.Detail == nil || strings.Contains(*p.Detail, "cron: cron:") {
				t.Fatalf("detail repeats the field: %s", r.Body)
			}
		})
	}

	t.Run("FieldFormErrorIsNotPrefixedTwice", func(t *testing.T) {
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{
			Name: "x", Fields: &client.CronFields{Minute: ptr("0"), Hour: ptr("25")}, Target: httpTarget(),
		})
		p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "fields.hour")
		if got, want := reasonOf(p, "fields.hour"), "25 is out of range 0-23"; got != want {
			t.Fatalf("reason %q, want %q", got, want)
		}
	})

	dateCases := []struct {
		name, body, field string
	}{
		{"BadRunAtSaysRFC3339", `{"name":"x","runAt":"tomorrow","target":{"type":"http","url":"https://a.example"}}`, "runAt"},
		{"BadStartAtSaysRFC3339", `{"name":"x","cron":"0 3 * * *","startAt":"2026-13-01","target":{"type":"http","url":"https://a.example"}}`, "startAt"},
	}
	for _, tc := range dateCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", strings.NewReader(tc.body))
			p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, tc.field)
			reason := reasonOf(p, tc.field)
			if !strings.Contains(reason, "RFC 3339") {
				t.Fatalf("reason %q does not name the expected format", reason)
			}
			if strings.ContainsAny(*p.Detail, "^$[") {
				t.Fatalf("detail shows a regular expression: %s", *p.Detail)
			}
		})
	}
}

// TestImpossibleDateNamesItsField: a date of the right shape that does not
// exist passes the schema and fails decoding; the answer still names the
// field and the expected format.
func TestImpossibleDateNamesItsField(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	cases := []struct{ name, body, field string }{
		{"RunAt", `{"name":"x","runAt":"2026-02-31T00:00:00Z","target":{"type":"http","url":"https://a.example"}}`, "runAt"},
		{"EndAt", `{"name":"x","cron":"0 3 * * *","endAt":"2031-04-31T10:00:00+02:00","target":{"type":"http","url":"https://a.example"}}`, "endAt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", strings.NewReader(tc.body))
			p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, tc.field)
			if reason := reasonOf(p, tc.field); !strings.Contains(reason, "RFC 3339") || !strings.Contains(reason, "day out of range") {
				t.Fatalf("reason %q does not name the format and the fault", reason)
			}
		})
	}
}
