package master

import (
	"maps"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/schedulerd/schedulerd/api"
)

// Schedule bodies are validated and decoded once: decodeBatchItem and
// decodeScheduleCreate decode a body into its Go type and check there what
// its schema (ScheduleBatchItem, ScheduleCreate) says, instead of decoding
// it a second time, untyped, for the schema validator. Like bodySchema they
// only ever accept: a body they accept is one the schema accepts, and any
// other goes through the validator, whose answers (the 400s and their field
// names) stay the ones the client gets.

// scheduleCreateMembers are the properties of ScheduleCreate, with those
// that are objects of their own (whose members must not be null either).
var scheduleCreateMembers = map[string]bool{
	"name": false, "cron": false, "fields": true, "runAt": false, "timezone": false,
	"eventCount": false, "policyId": false, "window": false, "spread": false,
	"priority": false, "overlap": false, "target": true, "payload": false,
	"maxAttempts": false, "startAt": false, "endAt": false, "misfire": false,
}

// batchItemMembers are the properties of ScheduleBatchItem: those of
// ScheduleCreate and idempotencyKey.
var batchItemMembers = func() map[string]bool {
	m := map[string]bool{"idempotencyKey": false}
	maps.Copy(m, scheduleCreateMembers)
	return m
}()

// dateTimeMembers are the members of format date-time.
var dateTimeMembers = map[string]bool{"runAt": true, "startAt": true, "endAt": true}

// decodeBatchItem decodes raw, one item of a batch body that scanBody
// passed, into in and reports whether the item is valid for the schema.
// false means "not known to be valid": in is then undefined.
func decodeBatchItem(raw []byte, in *api.ScheduleBatchItem) bool {
	if !plainMembers(raw, batchItemMembers) || decodeJSON(raw, in) != nil {
		return false
	}
	// minLength 1, maxLength 255 characters: bytes bound characters
	// however the validator counts them.
	if in.IdempotencyKey != nil && (*in.IdempotencyKey == "" || len(*in.IdempotencyKey) > 255) {
		return false
	}
	return validCreate(in.Name, in.Target, in.EventCount, in.MaxAttempts, in.Overlap, in.Misfire)
}

// decodeScheduleCreate is decodeBatchItem for the body of createSchedule.
func decodeScheduleCreate(raw []byte, in *api.ScheduleCreate) bool {
	if !plainMembers(raw, scheduleCreateMembers) || decodeJSON(raw, in) != nil {
		return false
	}
	return validCreate(in.Name, in.Target, in.EventCount, in.MaxAttempts, in.Overlap, in.Misfire)
}

// plainMembers reports whether raw is an object of known members (name and
// target among them), none of them null. The decoder sets a member that is
// null to its zero value, which the schema refuses (no property is
// nullable), so none may be null, nor a member of target or fields. Dates
// are checked as the schema's format checks them, which the decoder's
// parser does not match.
func plainMembers(raw []byte, members map[string]bool) bool {
	hasName, hasTarget := false, false
	ok := eachMember(raw, func(key string, value []byte) bool {
		nested, known := members[key]
		switch {
		case !known || isNull(value):
			return false
		case nested:
			if !eachMember(value, func(_ string, v []byte) bool { return !isNull(v) }) {
				return false
			}
		case dateTimeMembers[key]:
			if !validDateTime(value) {
				return false
			}
		}
		hasName = hasName || key == "name"
		hasTarget = hasTarget || key == "target"
		return true
	})
	return ok && hasName && hasTarget
}

// validCreate checks the decoded members that carry a bound or an enum.
func validCreate(name string, target api.Target, eventCount, maxAttempts *int, overlap *api.Overlap, misfire *api.Misfire) bool {
	switch {
	case name == "",
		target.Type != api.Http && target.Type != api.Sqs && target.Type != api.HttpBatch,
		eventCount != nil && *eventCount < 1,
		maxAttempts != nil && (*maxAttempts < 1 || *maxAttempts > 100),
		overlap != nil && *overlap != api.OverlapAllow && *overlap != api.OverlapSkip && *overlap != api.OverlapCancel,
		misfire != nil && *misfire != api.MisfireFireOnce && *misfire != api.MisfireFireAll && *misfire != api.MisfireSkip:
		return false
	}
	return true
}

// eachMember calls fn with each member of the JSON object raw, whose keys
// have no escapes, until fn returns false; false if raw is not such an
// object or fn returned false.
func eachMember(raw []byte, fn func(key string, value []byte) bool) bool {
	s := cleanScanner{b: raw}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.space()
		return s.i == len(s.b)
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		key, escaped, ok := s.str()
		if !ok || escaped {
			return false
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		start := s.i
		if !s.value(1) || !fn(string(key), s.b[start:s.i]) {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			s.space()
			return s.i == len(s.b)
		default:
			return false
		}
	}
}

func isNull(value []byte) bool { return string(value) == "null" }

// validDateTime reports whether value is a JSON string without escapes
// that the schema's date-time format accepts.
func validDateTime(value []byte) bool {
	if len(value) < 2 || value[0] != '"' || value[len(value)-1] != '"' {
		return false
	}
	s := value[1 : len(value)-1]
	for _, c := range s {
		if c == '\\' {
			return false
		}
	}
	f, ok := openapi3.SchemaStringFormats["date-time"]
	return ok && f.Validate(string(s)) == nil
}
