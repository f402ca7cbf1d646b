package emitter_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/store/embedded"
)

func TestZZProbeLoad(t *testing.T) {
	for _, mm := range []int{0, 4 << 30} {
		dir, _ := os.MkdirTemp("/dev/shm", "probe")
		defer os.RemoveAll(dir)
		st, err := embedded.Open(dir, embedded.Options{InitialMmapSize: mm})
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		for i := range 20000 {
			s := benchSchedule(i + 20000)
			if err := st.ScheduleCreate(context.Background(), s, childrenOf(t, s)); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("mmap %d: %s per schedule", mm, time.Since(began)/20000)
		st.Close()
	}
}
