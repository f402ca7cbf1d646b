// Package label holds the rules of the key/value labels that schedules and
// policies carry, which are those of Kubernetes labels, and the selectors
// that list and bulk actions match them with.
package label

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/schedulerd/schedulerd/model"
)

const (
	// MaxPairs is the most labels one object carries.
	MaxPairs = 16
	// MaxNameLen bounds a key's name part and a value.
	MaxNameLen = 63
	// MaxPrefixLen bounds a key's prefix (a DNS subdomain).
	MaxPrefixLen = 253
)

var (
	// name is a key's name part and a non-empty value: alphanumerics at both
	// ends, '-', '_' and '.' inside.
	name = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// dnsLabel is one label of a key's prefix (RFC 1123, lower case).
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// CheckKey returns why key is not a label key, or "".
func CheckKey(key string) string {
	prefix, n, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		prefix, n = "", key
	}
	if hasPrefix {
		if prefix == "" {
			return "the prefix before '/' is empty"
		}
		if len(prefix) > MaxPrefixLen {
			return "the prefix is longer than " + strconv.Itoa(MaxPrefixLen) + " characters"
		}
		for p := range strings.SplitSeq(prefix, ".") {
			if len(p) > 63 || !dnsLabel.MatchString(p) {
				return "the prefix must be a DNS subdomain (lower-case letters, digits, '-' and '.')"
			}
		}
	}
	switch {
	case n == "":
		return "the name is empty"
	case len(n) > MaxNameLen:
		return "the name is longer than " + strconv.Itoa(MaxNameLen) + " characters"
	case !name.MatchString(n):
		return "the name must be letters, digits, '-', '_' and '.', and start and end with a letter or digit"
	}
	return ""
}

// CheckValue returns why v is not a label value, or "". A value may be
// empty.
func CheckValue(v string) string {
	switch {
	case v == "":
		return ""
	case len(v) > MaxNameLen:
		return "longer than " + strconv.Itoa(MaxNameLen) + " characters"
	case !name.MatchString(v):
		return "must be letters, digits, '-', '_' and '.', and start and end with a letter or digit"
	}
	return ""
}

// Check validates labels given in field: at most MaxPairs, each key and
// value valid. A bad key is reported on field naming the key, a bad value
// on field.key. The errors come in key order.
func Check(field string, labels map[string]string) []*model.FieldError {
	var out []*model.FieldError
	if len(labels) > MaxPairs {
		out = append(out, &model.FieldError{Field: field, Reason: fmt.Sprintf("%d labels, at most %d", len(labels), MaxPairs)})
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if r := CheckKey(k); r != "" {
			out = append(out, &model.FieldError{Field: field, Reason: "key " + strconv.Quote(k) + ": " + r})
			continue
		}
		if r := CheckValue(labels[k]); r != "" {
			out = append(out, &model.FieldError{Field: field + "." + k, Reason: "value " + r})
		}
	}
	return out
}

// Requirement is one condition of a selector: the label Key has Value, or,
// with Any, the label Key is set (to any value).
type Requirement struct {
	Key   string
	Value string
	Any   bool
}

func (r Requirement) String() string {
	if r.Any {
		return r.Key
	}
	return r.Key + "=" + r.Value
}

// Parse reads a requirement written "key=value" or "key" (the key is set).
// Its error says what is wrong with it.
func Parse(s string) (Requirement, error) {
	k, v, hasValue := strings.Cut(s, "=")
	if r := CheckKey(k); r != "" {
		return Requirement{}, fmt.Errorf("key %q: %s", k, r)
	}
	if !hasValue {
		return Requirement{Key: k, Any: true}, nil
	}
	if r := CheckValue(v); r != "" {
		return Requirement{}, fmt.Errorf("value of %q: %s", k, r)
	}
	return Requirement{Key: k, Value: v}, nil
}

// Equal returns the requirements that labels (key = value) make, in key
// order.
func Equal(labels map[string]string) []Requirement {
	out := make([]Requirement, 0, len(labels))
	for k, v := range labels {
		out = append(out, Requirement{Key: k, Value: v})
	}
	slices.SortFunc(out, func(a, b Requirement) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Matches reports whether labels meet every requirement of sel (an empty
// sel matches everything).
func Matches(labels map[string]string, sel []Requirement) bool {
	for _, r := range sel {
		v, ok := labels[r.Key]
		if !ok || !r.Any && v != r.Value {
			return false
		}
	}
	return true
}
