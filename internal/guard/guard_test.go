package guard_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/internal/guard"
	"github.com/schedulerd/schedulerd/model"
)

// space is a Space with the figures the test sets.
type space struct {
	free, total uint64
	err         error
}

func (s *space) Usage() (uint64, uint64, error) { return s.free, s.total, s.err }

func TestDisk(t *testing.T) {
	s := &space{free: 500_000, total: 1_000_000}
	// Threshold: the smaller of 1000 bytes and 5% (the default) of 1,000,000.
	d, err := guard.NewDisk(s, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ok, reason := d.DiskStatus(); !ok || !strings.HasPrefix(reason, "ok") {
		t.Fatalf("with room: %v %q", ok, reason)
	}
	if ok, reason := d.DiskStatusFor(499_001); ok || !strings.Contains(reason, "with this write of about") {
		t.Fatalf("a write leaving less than the threshold: %v %q, want refused, naming its size", ok, reason)
	}
	if ok, _ := d.DiskStatusFor(499_000); !ok {
		t.Fatal("a write leaving the threshold free was refused")
	}
	s.free = 999
	if ok, reason := d.DiskStatus(); ok || !strings.Contains(reason, "below the threshold of 1000 B") {
		t.Fatalf("when low: %v %q, want refused, naming the threshold", ok, reason)
	}
	s.err = errors.New("statfs failed")
	if ok, reason := d.DiskStatus(); !ok || !strings.Contains(reason, "statfs failed") {
		t.Fatalf("failing probe: %v %q, want let through, saying why", ok, reason)
	}
	// The percentage is the threshold where it is the smaller.
	s.free, s.err = 40_000, nil
	if ok, _ := d.DiskStatus(); !ok {
		t.Fatal("refused above the byte threshold")
	}
	pct, err := guard.NewDisk(s, 1<<30, 5)
	if err != nil {
		t.Fatal(err)
	}
	if ok, reason := pct.DiskStatus(); ok || !strings.Contains(reason, "below the threshold of 48.8 KiB") {
		t.Fatalf("below 5%%: %v %q", ok, reason)
	}
}

func TestDiskUnguarded(t *testing.T) {
	d, err := guard.NewDisk(nil, 0, 0)
	if err != nil || d != nil {
		t.Fatalf("NewDisk(nil) = %v, %v; want no guard", d, err)
	}
	if ok, reason := d.DiskStatusFor(1 << 60); !ok || reason != "not checked" {
		t.Fatalf("no guard: %v %q", ok, reason)
	}
}

func TestNewDiskRefusesBadThresholds(t *testing.T) {
	s := &space{total: 1}
	if _, err := guard.NewDisk(s, -1, 0); err == nil {
		t.Error("negative bytes accepted")
	}
	for _, p := range []float64{-1, 101} {
		if _, err := guard.NewDisk(s, 0, p); err == nil {
			t.Errorf("percent %v accepted", p)
		}
	}
}

func TestWriteNeed(t *testing.T) {
	cron, oneOff := guard.WriteNeed(100, 0), guard.WriteNeed(100, 10)
	if cron == 0 || oneOff <= cron {
		t.Fatalf("need of a cron schedule %d, of a one-off with 10 events %d: the events must add", cron, oneOff)
	}
	if guard.WriteNeed(1000, 0) <= cron {
		t.Fatal("a larger body does not need more")
	}
}

func TestTenantQuotaDefaults(t *testing.T) {
	def := guard.DefaultTenantQuotas()
	t.Run("ConfiguredOverBuiltIn", func(t *testing.T) {
		got := guard.TenantQuotaDefaults(model.TenantQuotas{MaxEventsPerMinute: 5}, def.MaxEventsPerFire)
		want := def
		want.MaxEventsPerMinute = 5
		if got != want {
			t.Fatalf("defaults = %+v, want %+v", got, want)
		}
	})
	t.Run("PerFireAtMostMaxEventCount", func(t *testing.T) {
		if got := guard.TenantQuotaDefaults(model.TenantQuotas{}, 50); got.MaxEventsPerFire != 50 {
			t.Fatalf("maxEventsPerFire = %d, want 50 (MaxEventCount)", got.MaxEventsPerFire)
		}
	})
}
