package schedule_test

import (
	"testing"

	"github.com/schedulerd/schedulerd/schedule"
)

// BenchmarkCompileCronsJitter is the jitter check of a schedule with two
// crons whose union's gaps are all longer than the jitter: four years of
// merged fires (about 720,000) walked once.
func BenchmarkCompileCronsJitter(b *testing.B) {
	sp := valid()
	sp.Cron, sp.Crons, sp.Jitter, sp.Timezone = nil, []string{"*/5 * * * *", "*/7 * * * *"}, "30s", "Europe/Berlin"
	lim := testLimits()
	lim.MaxChildren = 1 << 20
	for b.Loop() {
		if _, err := schedule.Compile(sp, lim, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
