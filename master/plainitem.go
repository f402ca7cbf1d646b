package master

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/schedulerd/schedulerd/api"
)

// decodePlainItem is decodeBatchItem in one pass over raw, without
// encoding/json's reflection, for the items a client usually sends: members
// of plain values (strings, integers, booleans, runAt, startAt, endAt) and
// a target of type, url and queueUrl, plus a payload of any JSON value.
// Like decodeBatchItem it only ever accepts: false means "not decoded
// here", and decodeBatchItem's own path then decides (a fields object, a
// number that is not a plain integer, a key in another case, a null). What
// it accepts decodes to what decodeJSON makes of raw.
func decodePlainItem(raw []byte, in *api.ScheduleBatchItem) bool {
	*in = api.ScheduleBatchItem{}
	hasName, hasTarget := false, false
	ok := eachMember(raw, func(key, v []byte) bool {
		switch string(key) {
		case "name":
			hasName = true
			return plainString(v, &in.Name)
		case "target":
			hasTarget = true
			return plainTarget(v, &in.Target)
		case "runAt":
			return plainTime(v, &in.RunAt)
		case "payload":
			if isNull(v) {
				return false
			}
			p := api.Payload(append([]byte(nil), v...))
			in.Payload = &p
			return true
		case "idempotencyKey":
			return plainStringPtr(v, &in.IdempotencyKey)
		case "eventCount":
			return plainInt(v, &in.EventCount)
		case "maxAttempts":
			return plainInt(v, &in.MaxAttempts)
		case "priority":
			return plainInt(v, &in.Priority)
		case "policyId":
			return plainStringPtr(v, &in.PolicyId)
		case "timezone":
			return plainStringPtr(v, &in.Timezone)
		case "cron":
			return plainStringPtr(v, &in.Cron)
		case "window":
			return plainStringPtr(v, &in.Window)
		case "startAt":
			return plainTime(v, &in.StartAt)
		case "endAt":
			return plainTime(v, &in.EndAt)
		case "spread":
			var b bool
			switch string(v) {
			case "true":
				b = true
			case "false":
			default:
				return false
			}
			in.Spread = &b
			return true
		case "overlap":
			var s string
			if !plainString(v, &s) {
				return false
			}
			o := api.Overlap(s)
			in.Overlap = &o
			return true
		case "misfire":
			var s string
			if !plainString(v, &s) {
				return false
			}
			m := api.Misfire(s)
			in.Misfire = &m
			return true
		}
		return false // fields, or not a member: decodeBatchItem's path
	})
	if !ok || !hasName || !hasTarget {
		return false
	}
	if in.IdempotencyKey != nil && (*in.IdempotencyKey == "" || len(*in.IdempotencyKey) > 255) {
		return false
	}
	return validCreate(in.Name, in.Target, in.EventCount, in.MaxAttempts, in.Overlap, in.Misfire)
}

// plainString sets *dst to the JSON string v; false if v is not a string
// scanClean reads as valid. A string with escapes is decoded by
// encoding/json, whose reading of them it keeps.
func plainString(v []byte, dst *string) bool {
	s := cleanScanner{b: v}
	if len(v) == 0 || v[0] != '"' {
		return false
	}
	raw, escaped, ok := s.str()
	if !ok || s.i != len(v) {
		return false
	}
	if escaped {
		return json.Unmarshal(v, dst) == nil
	}
	*dst = string(raw)
	return true
}

func plainStringPtr(v []byte, dst **string) bool {
	var s string
	if !plainString(v, &s) {
		return false
	}
	*dst = &s
	return true
}

// plainInt sets *dst to the JSON integer v: digits with an optional minus,
// which encoding/json decodes into an int as strconv.Atoi does (a
// fraction, an exponent or an overflow are its errors).
func plainInt(v []byte, dst **int) bool {
	digits := v
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return false
	}
	*dst = &n
	return true
}

// plainTime sets *dst to the instant v, a string the schema's date-time
// format accepts, decoded as encoding/json decodes a time.Time.
func plainTime(v []byte, dst **time.Time) bool {
	if !validDateTime(v) {
		return false
	}
	var t time.Time
	if t.UnmarshalJSON(v) != nil {
		return false
	}
	*dst = &t
	return true
}

// plainTarget decodes a target object of type, url and queueUrl.
func plainTarget(v []byte, dst *api.Target) bool {
	return eachMember(v, func(key, value []byte) bool {
		switch string(key) {
		case "type":
			var s string
			if !plainString(value, &s) {
				return false
			}
			dst.Type = api.TargetType(s)
			return true
		case "url":
			return plainStringPtr(value, &dst.Url)
		case "queueUrl":
			return plainStringPtr(value, &dst.QueueUrl)
		}
		return false
	})
}
