package master

import (
	"maps"

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
	if decodePlainItem(raw, in) {
		return true
	}
	*in = api.ScheduleBatchItem{}
	return decodeItemMembers(raw, in)
}

// decodeItemMembers is decodeBatchItem with encoding/json's decoder, for
// any item.
func decodeItemMembers(raw []byte, in *api.ScheduleBatchItem) bool {
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
	ok := eachMember(raw, func(key, value []byte) bool {
		nested, known := members[string(key)]
		switch {
		case !known || isNull(value):
			return false
		case nested:
			if !eachMember(value, func(_, v []byte) bool { return !isNull(v) }) {
				return false
			}
		case dateTimeMembers[string(key)]:
			if !validDateTime(value) {
				return false
			}
		}
		hasName = hasName || string(key) == "name"
		hasTarget = hasTarget || string(key) == "target"
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
func eachMember(raw []byte, fn func(key, value []byte) bool) bool {
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
		if !s.value(1) || !fn(key, s.b[start:s.i]) {
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
	return matchesDateTime(value[1 : len(value)-1])
}

// matchesDateTime reports whether s matches openapi3.FormatOfStringDateTime,
// the pattern of kin-openapi's date-time format, without a regexp:
// [0-9]{4}-(0[1-9]|10|11|12)-(0[1-9]|[12][0-9]|3[01])T([0-1][0-9]|2[0-3]):
// [0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|(\+|-)[0-9]{2}:[0-9]{2}), whole.
func matchesDateTime(s []byte) bool {
	digit := func(i int) bool { return i < len(s) && s[i] >= '0' && s[i] <= '9' }
	at := func(i int, c byte) bool { return i < len(s) && s[i] == c }
	if len(s) < 20 || !digit(0) || !digit(1) || !digit(2) || !digit(3) || !at(4, '-') ||
		!digit(5) || !digit(6) || !at(7, '-') || !digit(8) || !digit(9) || !at(10, 'T') ||
		!digit(11) || !digit(12) || !at(13, ':') || !digit(14) || !digit(15) || !at(16, ':') ||
		!digit(17) || !digit(18) {
		return false
	}
	month := int(s[5]-'0')*10 + int(s[6]-'0')
	day := int(s[8]-'0')*10 + int(s[9]-'0')
	hour := int(s[11]-'0')*10 + int(s[12]-'0')
	sec := int(s[17]-'0')*10 + int(s[18]-'0')
	if month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || s[14] > '5' || sec > 60 {
		return false
	}
	i := 19
	if at(i, '.') {
		i++
		if !digit(i) {
			return false
		}
		for digit(i) {
			i++
		}
	}
	switch {
	case at(i, 'Z'):
		i++
	case at(i, '+') || at(i, '-'):
		if !digit(i+1) || !digit(i+2) || !at(i+3, ':') || !digit(i+4) || !digit(i+5) {
			return false
		}
		i += 6
	default:
		return false
	}
	return i == len(s)
}
