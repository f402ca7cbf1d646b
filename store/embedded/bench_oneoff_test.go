package embedded

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkDriverClaimCompleteOneOffs is BenchmarkDriverClaimComplete on
// 100,000 one-offs (schedule, child, fire and one event each, random ids,
// seed 1, saved as the master saves them: ScheduleNew.Fires) instead of
// fires of 1,000 events: every event claimed is held in its schedule's
// row, and the claim moves it into a group of its own (materialise).
//
//	go test -run='^$' -bench=DriverClaimCompleteOneOffs -benchtime=1x ./store/embedded
func BenchmarkDriverClaimCompleteOneOffs(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("shards-in-parallel=%d", workers), func(b *testing.B) {
			var elapsed time.Duration
			runs := 0
			for b.Loop() {
				b.StopTimer()
				s := openBench(b)
				r := rand.New(rand.NewPCG(1, 1))
				for lo := 0; lo < benchEvents; lo += benchBatch {
					items, fires := oneOffs(b, r, "ten_bench", base(), lo, lo+benchBatch, false)
					for i := range items {
						items[i].Fires = fires[i : i+1]
					}
					if _, err := s.ScheduleCreateMany(b.Context(), items); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				start := time.Now()
				claimCompleteAll(b, s, workers)
				elapsed += time.Since(start)
				runs++
			}
			b.ReportMetric(float64(benchEvents*runs)/elapsed.Seconds(), "events/s")
		})
	}
}

// BenchmarkDriverScheduleCreateManyOneOffs measures one ScheduleCreateMany
// of 1,000 one-offs with creation-ordered ids (seed 1), each written with
// its fire and event, as a batch through the API is: the commit that bounds
// the batch intake. One operation is one batch, onto the batches before it.
//
//	go test -run='^$' -bench=DriverScheduleCreateManyOneOffs -benchtime=100x ./store/embedded
func BenchmarkDriverScheduleCreateManyOneOffs(b *testing.B) {
	const batch = 1000
	s := openBench(b)
	r := rand.New(rand.NewPCG(1, 1))
	lo := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		items, fires := oneOffs(b, r, "ten_bench", base(), lo, lo+batch, true)
		for i := range items {
			items[i].Fires = fires[i : i+1]
		}
		lo += batch
		b.StartTimer()
		res, err := s.ScheduleCreateMany(b.Context(), items)
		if err != nil {
			b.Fatal(err)
		}
		for _, rerr := range res {
			if rerr != nil {
				b.Fatal(rerr)
			}
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}
