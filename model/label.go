// The rules of the key/value labels that schedules and policies carry,
// which are those of Kubernetes labels, and the selectors that list and
// bulk actions match them with.

package model

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

const (
	// MaxLabels is the most labels one object carries.
	MaxLabels = 16
	// MaxLabelNameLen bounds a key's name part and a value.
	MaxLabelNameLen = 63
	// MaxLabelPrefixLen bounds a key's prefix (a DNS subdomain).
	MaxLabelPrefixLen = 253
)

var (
	// labelName is a key's name part and a non-empty value: alphanumerics at both
	// ends, '-', '_' and '.' inside.
	labelName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// labelDNSLabel is one label of a key's prefix (RFC 1123, lower case).
	labelDNSLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// CheckLabelKey returns why key is not a label key, or "".
func CheckLabelKey(key string) string {
	prefix, n, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		prefix, n = "", key
	}
	if hasPrefix {
		if prefix == "" {
			return "the prefix before '/' is empty"
		}
		if len(prefix) > MaxLabelPrefixLen {
			return "the prefix is longer than " + strconv.Itoa(MaxLabelPrefixLen) + " characters"
		}
		for p := range strings.SplitSeq(prefix, ".") {
			if len(p) > 63 || !labelDNSLabel.MatchString(p) {
				return "the prefix must be a DNS subdomain (lower-case letters, digits, '-' and '.')"
			}
		}
	}
	switch {
	case n == "":
		return "the name is empty"
	case len(n) > MaxLabelNameLen:
		return "the name is longer than " + strconv.Itoa(MaxLabelNameLen) + " characters"
	case !labelName.MatchString(n):
		return "the name must be letters, digits, '-', '_' and '.', and start and end with a letter or digit"
	}
	return ""
}

// CheckLabelValue returns why v is not a label value, or "". A value may be
// empty.
func CheckLabelValue(v string) string {
	switch {
	case v == "":
		return ""
	case len(v) > MaxLabelNameLen:
		return "longer than " + strconv.Itoa(MaxLabelNameLen) + " characters"
	case !labelName.MatchString(v):
		return "must be letters, digits, '-', '_' and '.', and start and end with a letter or digit"
	}
	return ""
}

// CheckLabels validates labels given in field: at most MaxLabels, each key and
// value valid. A bad key is reported on field naming the key, a bad value
// on field.key. The errors come in key order.
func CheckLabels(field string, labels map[string]string) []*FieldError {
	var out []*FieldError
	if len(labels) > MaxLabels {
		out = append(out, &FieldError{Field: field, Reason: fmt.Sprintf("%d labels, at most %d", len(labels), MaxLabels)})
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if r := CheckLabelKey(k); r != "" {
			out = append(out, &FieldError{Field: field, Reason: "key " + strconv.Quote(k) + ": " + r})
			continue
		}
		if r := CheckLabelValue(labels[k]); r != "" {
			out = append(out, &FieldError{Field: field + "." + k, Reason: "value " + r})
		}
	}
	return out
}

// LabelRequirement is one condition of a selector: the label Key has Value, or,
// with Any, the label Key is set (to any value).
type LabelRequirement struct {
	Key   string
	Value string
	Any   bool
}

func (r LabelRequirement) String() string {
	if r.Any {
		return r.Key
	}
	return r.Key + "=" + r.Value
}

// ParseLabelRequirement reads a requirement written "key=value" or "key" (the key is set).
// Its error says what is wrong with it.
func ParseLabelRequirement(s string) (LabelRequirement, error) {
	k, v, hasValue := strings.Cut(s, "=")
	if r := CheckLabelKey(k); r != "" {
		return LabelRequirement{}, fmt.Errorf("key %q: %s", k, r)
	}
	if !hasValue {
		return LabelRequirement{Key: k, Any: true}, nil
	}
	if r := CheckLabelValue(v); r != "" {
		return LabelRequirement{}, fmt.Errorf("value of %q: %s", k, r)
	}
	return LabelRequirement{Key: k, Value: v}, nil
}

// LabelsEqual returns the requirements that labels (key = value) make, in key
// order.
func LabelsEqual(labels map[string]string) []LabelRequirement {
	out := make([]LabelRequirement, 0, len(labels))
	for k, v := range labels {
		out = append(out, LabelRequirement{Key: k, Value: v})
	}
	slices.SortFunc(out, func(a, b LabelRequirement) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// LabelsMatch reports whether labels meet every requirement of sel (an empty
// sel matches everything).
func LabelsMatch(labels map[string]string, sel []LabelRequirement) bool {
	for _, r := range sel {
		v, ok := labels[r.Key]
		if !ok || !r.Any && v != r.Value {
			return false
		}
	}
	return true
}
