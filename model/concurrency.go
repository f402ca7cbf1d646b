package model

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ConcurrencyKeySchedule is the ConcurrencyKey that keys a policy by the
// event's schedule.
const ConcurrencyKeySchedule = "scheduleId"

// unboundedTotal is the token bound of a keyed policy without
// MaxInFlightTotal: the store needs a number to compare against.
const unboundedTotal = math.MaxInt32

// TokenCap is the bound on the policy's persisted InUse: MaxInFlight, or,
// with a ConcurrencyKey, MaxInFlightTotal (unbounded when unset).
func (p *Policy) TokenCap() int {
	if p.ConcurrencyKey == "" {
		return p.MaxInFlight
	}
	if p.MaxInFlightTotal > 0 {
		return p.MaxInFlightTotal
	}
	return unboundedTotal
}

// CheckConcurrencyKey reports why k is not a valid ConcurrencyKey ("" is
// valid: no key).
func CheckConcurrencyKey(k string) error {
	if k == "" || k == ConcurrencyKeySchedule {
		return nil
	}
	if !strings.HasPrefix(k, "/") {
		return fmt.Errorf("must be %q or a JSON pointer starting with /", ConcurrencyKeySchedule)
	}
	for i := 0; i < len(k); i++ {
		if k[i] != '~' {
			continue
		}
		if i+1 >= len(k) || (k[i+1] != '0' && k[i+1] != '1') {
			return fmt.Errorf("~ at offset %d must be followed by 0 or 1", i)
		}
	}
	return nil
}

// ConcurrencyKeyOf is the value of policy key k for an event of schedule
// scheduleID carrying payload: the schedule id for "scheduleId", else the
// value the JSON pointer k selects (a string as is, other JSON values in
// their compact encoding), or "" when the payload lacks it or is not JSON.
func ConcurrencyKeyOf(k, scheduleID string, payload json.RawMessage) string {
	if k == "" {
		return ""
	}
	if k == ConcurrencyKeySchedule {
		return scheduleID
	}
	if CheckConcurrencyKey(k) != nil || len(payload) == 0 {
		return ""
	}
	cur := payload
	for _, tok := range strings.Split(k[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err == nil {
			v, ok := obj[tok]
			if !ok {
				return ""
			}
			cur = v
			continue
		}
		var arr []json.RawMessage
		if err := json.Unmarshal(cur, &arr); err != nil {
			return ""
		}
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(arr) || (len(tok) > 1 && tok[0] == '0') {
			return ""
		}
		cur = arr[i]
	}
	var s string
	if err := json.Unmarshal(cur, &s); err == nil {
		return s
	}
	var v any
	if err := json.Unmarshal(cur, &v); err != nil || v == nil {
		return ""
	}
	out, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(out)
}
