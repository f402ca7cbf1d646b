package main

import (
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/client"
)

// TestEveryCreateMemberHasAFlag: each member of the API's ScheduleCreate
// can be set with a flag of `schedules create` (or, for the few listed
// here, only through --file), so that a member added to openapi.yaml gets
// its flag. TestCreateFlags checks what the flags send.
func TestEveryCreateMemberHasAFlag(t *testing.T) {
	flagOf := map[string]string{
		"runAt": "run-at", "timezone": "tz", "eventCount": "count", "policyId": "policy",
		"maxAttempts": "max-attempts", "startAt": "start-at", "endAt": "end-at", "labels": "label",
		"excludeCalendars": "exclude-calendar", "onExcluded": "on-excluded",
		"onDeadline": "on-deadline", "maxEventAge": "max-event-age",
		"fields": "", // the field form of cron: --file only
	}
	fs := flag.NewFlagSet("schedules create", flag.ContinueOnError)
	scheduleCreateFlags(fs)
	typ := reflect.TypeFor[client.ScheduleCreate]()
	for i := range typ.NumField() {
		member, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		name, ok := flagOf[member]
		if !ok {
			name = member
		}
		if name == "" {
			continue
		}
		if fs.Lookup(name) == nil {
			t.Errorf("ScheduleCreate member %q has no flag --%s in schedules create", member, name)
		}
	}
}
