package master

import (
	"github.com/getkin/kin-openapi/openapi3"

	"github.com/schedulerd/schedulerd/api"
)

// Batch items are validated and decoded once: decodeBatchItem decodes an
// item into its Go type and checks there what the ScheduleBatchItem schema
// says, instead of decoding it a second time, untyped, for the schema
// validator. Like bodySchema it only ever accepts: an item it accepts is
// one the schema accepts, and for any other the batch goes through the
// validator, whose answers (the 400s and their field names) stay the ones
// the client gets.

// batchItemMembers are the properties of ScheduleBatchItem, with those
// that are objects of their own (whose members must not be null either).
var batchItemMembers = map[string]bool{
	"name": false, "cron": false, "fields": true, "runAt": false, "timezone": false,
	"eventCount": false, "policyId": false, "window": false, "spread": false,
	"priority": false, "overlap": false, "target": true, "payload": false,
	"maxAttempts": false, "startAt": false, "endAt": false, "misfire": false,
	"idempotencyKey": false,
}

// dateTimeMembers are the members of format date-time.
var dateTimeMembers = map[string]bool{"runAt": true, "startAt": true, "endAt": true}

// decodeBatchItem decodes raw, one item of a batch body that scanBody
// passed, into in and reports whether the item is valid for the schema.
// false means "not known to be valid": in is then undefined.
func decodeBatchItem(raw []byte, in *api.ScheduleBatchItem) bool {
	// The decoder sets a member that is null to its zero value, which the
	// schema refuses (no property is nullable): none may be null, nor a
	// member of target or fields. Dates are checked as the schema's
	// format checks them, which the decoder's parser does not match.
	hasName, hasTarget := false, false
	ok := eachMember(raw, func(key string, value []byte) bool {
		nested, known := batchItemMembers[key]
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
	if !ok || !hasName || !hasTarget {
		return false
	}
	if decodeJSON(raw, in) != nil {
		return false
	}
	switch {
	case in.Name == "",
		in.Target.Type != api.Http && in.Target.Type != api.Sqs,
		in.EventCount != nil && *in.EventCount < 1,
		in.MaxAttempts != nil && (*in.MaxAttempts < 1 || *in.MaxAttempts > 100),
		in.Overlap != nil && *in.Overlap != api.OverlapAllow && *in.Overlap != api.OverlapSkip && *in.Overlap != api.OverlapCancel,
		in.Misfire != nil && *in.Misfire != api.MisfireFireOnce && *in.Misfire != api.MisfireFireAll && *in.Misfire != api.MisfireSkip,
		// minLength 1, maxLength 255 characters: bytes bound characters
		// however the validator counts them.
		in.IdempotencyKey != nil && (*in.IdempotencyKey == "" || len(*in.IdempotencyKey) > 255):
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
