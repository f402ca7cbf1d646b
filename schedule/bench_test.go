package schedule_test

import (
	"testing"

	"github.com/schedulerd/schedulerd/schedule"
)

// BenchmarkCompileCronsJitter is the jitter check of a schedule with two
// crons whose union's gaps (3 and 7 minutes) are all longer than the
// jitter of 2 minutes: four years of merged fires (about 420,000) walked
// once.
func BenchmarkCompileCronsJitter(b *testing.B) {
	sp := valid()
	sp.Cron, sp.Crons, sp.Jitter, sp.Timezone = nil, []string{"*/10 * * * *", "3-59/10 * * * *"}, "2m", "Europe/Berlin"
	lim := testLimits()
	lim.MaxChildren = 1 << 20
	for b.Loop() {
		if _, err := schedule.Compile(sp, lim, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
