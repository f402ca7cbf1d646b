package httpdelivery

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"Seconds", "120", 2 * time.Minute, true},
		{"Zero", "0", 0, true},
		{"Padded", " 5 ", 5 * time.Second, true},
		{"Negative", "-1", 0, false},
		{"Huge", "99999999999999999", time.Duration(1<<63-1) / time.Second * time.Second, true},
		{"HTTPDate", now.Add(time.Hour).Format(http.TimeFormat), time.Hour, true},
		{"PastDate", now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"Empty", "", 0, false},
		{"Garbage", "soon", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseRetryAfter(tc.value, now)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.value, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
