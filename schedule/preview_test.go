package schedule_test

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// TestJitterGapCountsOnlyFiresInRange: the DST gap that brings two fires a
// minute apart lies after endAt, so a two-minute jitter is fine.
func TestJitterGapCountsOnlyFiresInRange(t *testing.T) {
	sp := valid()
	sp.Cron, sp.Timezone, sp.Jitter = ptr("59 1,2 * * *"), "Europe/Berlin", "2m"
	sp.EndAt = ptr(time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC))
	c, err := schedule.Compile(sp, testLimits(), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if c.Schedule.Jitter != 2*time.Minute {
		t.Fatalf("jitter %v", c.Schedule.Jitter)
	}
	sp.EndAt = nil
	if _, err := schedule.Compile(sp, testLimits(), testNow); err == nil {
		t.Fatal("without endAt the gap of 2026-03-29 counts: want an error")
	}
}

func TestPreview(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	ny, _ := time.LoadLocation("America/New_York")
	for _, tc := range []struct {
		name, cron, zone string
		now              time.Time
		want             []string // local wall time and DST mark of each fire
	}{
		{"SpringForwardSkips", "30 2 * * *", "Europe/Berlin", time.Date(2026, 3, 27, 12, 0, 0, 0, berlin),
			[]string{"2026-03-28T02:30:00+01:00 ", "2026-03-29T03:00:00+02:00 skipped", "2026-03-30T02:30:00+02:00 "}},
		{"FallBackRepeatsHourly", "30 * * * *", "America/New_York", time.Date(2026, 11, 1, 0, 0, 0, 0, ny),
			[]string{"2026-11-01T00:30:00-04:00 ", "2026-11-01T01:30:00-04:00 repeated", "2026-11-01T01:30:00-05:00 repeated", "2026-11-01T02:30:00-05:00 "}},
		{"FallBackFiresOnceDaily", "30 1 * * *", "America/New_York", time.Date(2026, 10, 31, 12, 0, 0, 0, ny),
			[]string{"2026-11-01T01:30:00-04:00 repeated", "2026-11-02T01:30:00-05:00 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := valid()
			sp.Cron, sp.Timezone = ptr(tc.cron), tc.zone
			c, err := schedule.Compile(sp, testLimits(), tc.now)
			if err != nil {
				t.Fatal(err)
			}
			got := c.Preview("", tc.now, len(tc.want))
			if len(got) != len(tc.want) {
				t.Fatalf("%d fires, want %d", len(got), len(tc.want))
			}
			for i, p := range got {
				if s := p.Local.Format(time.RFC3339) + " " + p.DST; s != tc.want[i] {
					t.Errorf("fire %d: %q, want %q", i, s, tc.want[i])
				}
				if !p.Local.Equal(p.At) || p.At.Location() != time.UTC {
					t.Errorf("fire %d: at %v, local %v", i, p.At, p.Local)
				}
			}
		})
	}
}

func TestPreviewJitter(t *testing.T) {
	sp := valid()
	sp.Cron, sp.Jitter = ptr("0 * * * *"), "15m"
	c, err := schedule.Compile(sp, testLimits(), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if c.Describe() != "at minute 0 past every hour every day" {
		t.Fatalf("describe %q", c.Describe())
	}
	unsaved := c.Preview("", testNow, 5)
	saved := c.Preview("sch_a", testNow, 5)
	for i := range saved {
		if unsaved[i].JitterKnown || unsaved[i].Jitter != 0 {
			t.Errorf("fire %d of an unsaved definition has an offset: %+v", i, unsaved[i])
		}
		want := model.JitterOffset("sch_a", saved[i].At, 15*time.Minute)
		if !saved[i].JitterKnown || saved[i].Jitter != want || !saved[i].LaunchAt().Equal(saved[i].At.Add(want)) {
			t.Errorf("fire %d: %+v, want offset %v", i, saved[i], want)
		}
	}
}
