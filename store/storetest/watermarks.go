package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var watermarkTests = []namedTest{
	{"Advance", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		w, err := d.WatermarkGet(ctx, 3)
		requireNoError(t, err, "WatermarkGet unset")
		if !w.Until.IsZero() || w.Fence != 0 {
			t.Fatalf("WatermarkGet unset: got %+v, want zero", w)
		}

		requireNoError(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(time.Minute), Fence: 5}), "WatermarkAdvance")
		requireNoError(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(2 * time.Minute), Fence: 5}), "WatermarkAdvance same fence")
		requireIs(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(time.Minute), Fence: 5}), model.ErrConflict, "WatermarkAdvance backwards")
		requireIs(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(5 * time.Minute), Fence: 4}), model.ErrConflict, "WatermarkAdvance stale fence")

		w, err = d.WatermarkGet(ctx, 3)
		requireNoError(t, err, "WatermarkGet")
		requireTime(t, w.Until, at(2*time.Minute), "Until")
		requireEqual(t, w.Fence, int64(5), "Fence")
		requireEqual(t, w.Partition, 3, "Partition")

		// A new owner with a larger fence moves on; the old owner then loses.
		requireNoError(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(3 * time.Minute), Fence: 6}), "WatermarkAdvance new fence")
		requireIs(t, d.WatermarkAdvance(ctx, model.Watermark{Partition: 3, Until: at(4 * time.Minute), Fence: 5}), model.ErrConflict, "WatermarkAdvance old owner")
		w, err = d.WatermarkGet(ctx, 3)
		requireNoError(t, err, "WatermarkGet")
		requireTime(t, w.Until, at(3*time.Minute), "Until")
		requireEqual(t, w.Fence, int64(6), "Fence")

		w, err = d.WatermarkGet(ctx, 4)
		requireNoError(t, err, "WatermarkGet other partition")
		if !w.Until.IsZero() {
			t.Fatalf("watermark leaked to another partition: %+v", w)
		}
	}},
}
