package cron

import "testing"

func TestDescribe(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"0 9 * * 1-5", "at 09:00 on Monday through Friday"},
		{"0 9 * * MON-FRI", "at 09:00 on Monday through Friday"},
		{"30 12 * * 6", "at 12:30 on Saturday"},
		{"0 3 * * *", "at 03:00 every day"},
		{"0 9,17 * * *", "at 09:00 and 17:00 every day"},
		{"* * * * *", "every minute every day"},
		{"*/15 * * * *", "every 15 minutes every day"},
		{"5 * * * *", "at minute 5 past every hour every day"},
		{"5,35 * * * *", "at minutes 5 and 35 past every hour every day"},
		{"*/10 9-17 * * 1-5", "every 10 minutes from 09:00 through 17:59 on Monday through Friday"},
		{"0 */2 * * *", "at minute 0 past every 2 hours every day"},
		{"0 0 1 * *", "at 00:00 on day 1 of the month"},
		{"0 0 1,15 * *", "at 00:00 on days 1 and 15 of the month"},
		{"0 0 L * *", "at 00:00 on the last day of the month"},
		{"0 0 L 2 *", "at 00:00 on the last day of the month in February"},
		{"0 10 * * 0#3", "at 10:00 on the third Sunday of the month"},
		{"0 10 * 1 0#3", "at 10:00 on the third Sunday of the month in January"},
		{"0 0 1 * 1", "at 00:00 on day 1 of the month or on Monday"},
		{"0 8 * 6-8 1,3,5", "at 08:00 on Monday, Wednesday and Friday in June through August"},
		{"* 9 * * *", "every minute from 09:00 through 09:59 every day"},
		{"0 0 25 12 *", "at 00:00 on day 25 of the month in December"},
		{"15 1,3,5,7,9 * * *", "at minute 15 during hours 1, 3, 5, 7 and 9 every day"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			if got := mustParse(t, tc.expr).Describe(); got != tc.want {
				t.Fatalf("Describe(%q) = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}
