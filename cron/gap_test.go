package cron

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
)

// bruteMinGap is MinGap's oracle: every fire in (from, to] listed by
// NextFireTimes, and the smallest difference of neighbours.
func bruteMinGap(e *Expr, loc *time.Location, from, to time.Time) (time.Duration, time.Time) {
	var best time.Duration
	var at time.Time
	var prev time.Time
	for _, t := range NextFireTimes(e, loc, from, 200_000) {
		if t.After(to) {
			break
		}
		if !prev.IsZero() {
			if d := t.Sub(prev); best == 0 || d < best {
				best, at = d, prev
			}
		}
		prev = t
	}
	return best, at
}

func TestMinGapNamed(t *testing.T) {
	for _, tc := range []struct {
		name, expr, zone string
		from, to         time.Time
		want             time.Duration
		wantAt           time.Time
	}{
		{"Weekdays", "0 9 * * 1-5", "UTC", utc(2027, 1, 1, 0, 0), utc(2028, 1, 1, 0, 0), 24 * time.Hour, utc(2027, 1, 4, 9, 0)},
		{"Quarter", "*/15 * * * *", "Europe/Berlin", utc(2027, 1, 1, 0, 0), utc(2028, 1, 1, 0, 0), 15 * time.Minute, utc(2027, 1, 1, 0, 0).Add(15 * time.Minute)},
		// 02:59 does not exist on 2027-03-28 in Berlin: it fires at 03:00
		// CEST, a minute after 01:59 CET.
		{"SpringGapBringsFiresTogether", "59 1,2 * * *", "Europe/Berlin", utc(2027, 3, 1, 0, 0), utc(2027, 4, 1, 0, 0), time.Minute, utc(2027, 3, 28, 0, 59)},
		{"SpringGapShortensADay", "30 2 * * *", "Europe/Berlin", utc(2027, 3, 1, 0, 0), utc(2027, 4, 1, 0, 0), 23*time.Hour + 30*time.Minute, utc(2027, 3, 27, 1, 30)},
		{"FallBackHourly", "30 * * * *", "America/New_York", utc(2027, 11, 1, 0, 0), utc(2027, 11, 30, 0, 0), time.Hour, utc(2027, 11, 1, 0, 30)},
		{"LeapDayNeighbours", "0 0 28,29 2 *", "UTC", utc(2027, 1, 1, 0, 0), utc(2031, 1, 1, 0, 0), 24 * time.Hour, utc(2028, 2, 28, 0, 0)},
		{"OneFireOnly", "0 0 29 2 *", "UTC", utc(2027, 1, 1, 0, 0), utc(2031, 1, 1, 0, 0), 0, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, loc := mustParse(t, tc.expr), mustLoc(t, tc.zone)
			got, at := MinGap(e, loc, tc.from, tc.to)
			if got != tc.want || !at.Equal(tc.wantAt) {
				t.Fatalf("MinGap(%q, %s) = %v at %v, want %v at %v", tc.expr, tc.zone, got, at, tc.want, tc.wantAt)
			}
			if b, bat := bruteMinGap(e, loc, tc.from, tc.to); b != got || !bat.Equal(at) {
				t.Fatalf("oracle says %v at %v", b, bat)
			}
		})
	}
}

// TestMinGapOracle compares MinGap with every fire of random expressions
// over random stretches, half of them around a DST transition.
func TestMinGapOracle(t *testing.T) {
	seed := testseed.Get(t, "CRON_GAP_SEED", 20261202)
	g := &exprGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "Asia/Kolkata", "America/Santiago"}
	// Transition days (UTC) in 2027 of the zones above, to aim at.
	edges := []time.Time{utc(2027, 3, 28, 1, 0), utc(2027, 10, 31, 1, 0), utc(2027, 3, 14, 7, 0), utc(2027, 11, 7, 6, 0),
		utc(2027, 4, 4, 15, 0), utc(2027, 10, 2, 15, 30), utc(2027, 4, 4, 14, 0), utc(2027, 9, 25, 14, 0)}
	n := 400
	if testing.Short() || raceEnabled {
		n = 60
	}
	for i := 0; i < n; {
		x := g.next()
		if x.neverFires() {
			continue
		}
		e := mustParse(t, x.text)
		i++
		loc := mustLoc(t, zones[g.r.IntN(len(zones))])
		var from time.Time
		if i%2 == 0 {
			from = edges[g.r.IntN(len(edges))].Add(-time.Duration(g.r.IntN(20*24*60)) * time.Minute)
		} else {
			from = utc(2026, 1, 1, 0, 0).Add(time.Duration(g.r.IntN(4*365*24*60)) * time.Minute)
		}
		from = from.Add(time.Duration(g.r.IntN(60)) * time.Second)
		to := from.Add(time.Duration(1+g.r.IntN(40*24*60)) * time.Minute)
		got, at := MinGap(e, loc, from, to)
		want, wantAt := bruteMinGap(e, loc, from, to)
		if got != want || !at.Equal(wantAt) {
			t.Fatalf("seed %d: MinGap(%q, %s, %v, %v) = %v at %v, oracle %v at %v",
				seed, x.text, loc, from, to, got, at, want, wantAt)
		}
	}
}
