package model_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/model"
)

func TestCheckLabels(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := []struct {
		name   string
		labels map[string]string
		field  string // "" when valid
	}{
		{"Plain", map[string]string{"team": "billing"}, ""},
		{"EmptyValue", map[string]string{"team": ""}, ""},
		{"Prefixed", map[string]string{"example.com/team": "billing"}, ""},
		{"InnerPunctuation", map[string]string{"a-b_c.d": "A.b-c_9"}, ""},
		{"LongestName", map[string]string{long: long}, ""},
		{"SixteenPairs", pairs(16), ""},
		{"SeventeenPairs", pairs(17), "labels"},
		{"EmptyKey", map[string]string{"": "x"}, "labels"},
		{"KeySpace", map[string]string{"my team": "x"}, "labels"},
		{"KeyLeadingDash", map[string]string{"-team": "x"}, "labels"},
		{"KeyTrailingDot", map[string]string{"team.": "x"}, "labels"},
		{"KeyNameTooLong", map[string]string{long + "a": "x"}, "labels"},
		{"EmptyPrefix", map[string]string{"/team": "x"}, "labels"},
		{"EmptyName", map[string]string{"example.com/": "x"}, "labels"},
		{"UpperCasePrefix", map[string]string{"Example.com/team": "x"}, "labels"},
		{"PrefixUnderscore", map[string]string{"ex_ample.com/team": "x"}, "labels"},
		{"TwoSlashes", map[string]string{"a/b/c": "x"}, "labels"},
		{"PrefixTooLong", map[string]string{strings.Repeat("a.", 127) + "a/team": "x"}, "labels"},
		{"ValueTooLong", map[string]string{"team": long + "a"}, "labels.team"},
		{"ValueSlash", map[string]string{"team": "a/b"}, "labels.team"},
		{"ValueTrailingDash", map[string]string{"team": "billing-"}, "labels.team"},
		{"ValueUnicode", map[string]string{"team": "bílling"}, "labels.team"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := model.CheckLabels("labels", tc.labels)
			if tc.field == "" {
				if len(errs) != 0 {
					t.Fatalf("Check(%v) = %v, want valid", tc.labels, errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Fatalf("Check(%v) = %v, want one error on %q", tc.labels, errs, tc.field)
			}
		})
	}
}

func pairs(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m["k"+strconv.Itoa(i)] = "v"
	}
	return m
}

func TestParseLabelRequirementAndMatch(t *testing.T) {
	labels := map[string]string{"team": "billing", "tier": ""}
	tests := []struct {
		sel   []string
		match bool
	}{
		{nil, true},
		{[]string{"team=billing"}, true},
		{[]string{"team=ops"}, false},
		{[]string{"team"}, true},
		{[]string{"tier"}, true},
		{[]string{"tier="}, true},
		{[]string{"team=billing", "tier="}, true},
		{[]string{"team=billing", "region"}, false},
		{[]string{"region="}, false},
	}
	for _, tc := range tests {
		var sel []model.LabelRequirement
		for _, s := range tc.sel {
			r, err := model.ParseLabelRequirement(s)
			if err != nil {
				t.Fatalf("Parse(%q): %v", s, err)
			}
			if r.String() != s {
				t.Errorf("Parse(%q).String() = %q", s, r.String())
			}
			sel = append(sel, r)
		}
		if got := model.LabelsMatch(labels, sel); got != tc.match {
			t.Errorf("Matches(%v, %v) = %v, want %v", labels, tc.sel, got, tc.match)
		}
	}
	for _, bad := range []string{"", "=x", "a b=c", "team=a b", "/x"} {
		if _, err := model.ParseLabelRequirement(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
