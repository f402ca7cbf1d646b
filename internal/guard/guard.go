// Package guard holds the admission rules that the master and the emitter
// share: the disk guard, with its estimate of a write's size, and the
// default tenant quotas. app builds them once and hands them to both.
package guard

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"

	"github.com/schedulerd/schedulerd/model"
)

// Space reports the free and total bytes of the disk the store writes to
// (internal/diskspace for the embedded store's data directory).
type Space interface {
	Usage() (free, total uint64, err error)
}

// Default disk guard threshold: the smaller of the two.
const (
	DefaultDiskMinFreeBytes   = 1 << 30
	DefaultDiskMinFreePercent = 5
)

// Disk is the disk guard: writes that add schedules or events are refused
// while the free space of the store's disk is below the smaller of
// minFreeBytes and minFreePercent of its size. A nil *Disk lets every
// write through.
type Disk struct {
	space          Space
	minFreeBytes   uint64
	minFreePercent float64
}

// NewDisk returns the guard over space; zero thresholds take the
// defaults. A nil space returns a nil guard (MongoDB's disk is not this
// process's to watch).
func NewDisk(space Space, minFreeBytes int64, minFreePercent float64) (*Disk, error) {
	switch {
	case minFreeBytes < 0:
		return nil, errors.New("disk guard: the free bytes threshold must not be negative")
	case minFreePercent < 0 || minFreePercent > 100:
		return nil, errors.New("disk guard: the free percent threshold must be between 0 and 100")
	case space == nil:
		return nil, nil
	}
	return &Disk{
		space:          space,
		minFreeBytes:   uint64(cmp.Or(minFreeBytes, DefaultDiskMinFreeBytes)),
		minFreePercent: cmp.Or(minFreePercent, DefaultDiskMinFreePercent),
	}, nil
}

// DiskStatus reports whether the guard lets writes through, and why not. A
// failing probe lets writes through (the store reports its own write
// errors) and says so.
func (d *Disk) DiskStatus() (ok bool, reason string) { return d.DiskStatusFor(0) }

// DiskStatusFor is DiskStatus for a write of about need bytes (WriteNeed):
// refused also when the write would leave less than the threshold free.
func (d *Disk) DiskStatusFor(need uint64) (ok bool, reason string) {
	if d == nil {
		return true, "not checked"
	}
	free, total, err := d.space.Usage()
	if err != nil {
		return true, "free space unknown: " + err.Error()
	}
	min := d.threshold(total)
	if free < min {
		return false, fmt.Sprintf("free space %s of %s is below the threshold of %s: new schedules, changes, triggers and resumes are refused; deliveries, releases and retention go on",
			bytesText(free), bytesText(total), bytesText(min))
	}
	if need > free-min {
		return false, fmt.Sprintf("free space %s of %s would fall below the threshold of %s with this write of about %s: make it smaller or free space",
			bytesText(free), bytesText(total), bytesText(min), bytesText(need))
	}
	return true, "ok: " + bytesText(free) + " free of " + bytesText(total)
}

// threshold is the smaller of the two thresholds for a disk of total
// bytes: enough room for deliveries, releases and retention on a small
// disk, without refusing writes with tens of gigabytes free on a large one.
func (d *Disk) threshold(total uint64) uint64 {
	pct := uint64(float64(total) * d.minFreePercent / 100)
	return min(d.minFreeBytes, pct)
}

// Disk space a created schedule is taken to need with the embedded store:
// about 4.5 KiB per item was measured for 1,000-item batches of small cron
// and one-off schedules (records, indexes, idempotency records,
// copy-on-write pages); these figures are about twice that, plus the
// schedule's JSON several times over. A one-off's events, written in the
// same commit, carry its payload each.
const (
	scheduleDiskBytes = 8 << 10
	eventDiskBytes    = 1 << 10
)

// WriteNeed estimates the disk space the creation of a schedule whose
// request body has rawBytes needs, with the events of its first fire
// written in the same commit (0 for none).
func WriteNeed(rawBytes, events int) uint64 {
	raw := uint64(rawBytes)
	return scheduleDiskBytes + 4*raw + uint64(events)*(eventDiskBytes+raw)
}

func bytesText(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// DefaultTenantQuotas are the quotas of a tenant when neither the tenant
// nor the configuration sets them (MaxEventsPerFire at most the server's
// largest eventCount, see TenantQuotaDefaults).
func DefaultTenantQuotas() model.TenantQuotas {
	return model.TenantQuotas{
		MaxSchedules:       10_000,
		MaxEventsPerFire:   100_000,
		MaxEventsPerMinute: 1_000_000,
		MaxEventsStored:    10_000_000,
		MaxCalendars:       100,
	}
}

// TenantQuotaDefaults returns the quotas of a tenant that sets none of its
// own: the configured ones (zero fields unset), else DefaultTenantQuotas,
// MaxEventsPerFire at most maxEventCount. A tenant's effective quotas are
// then its own Or these; the master and the emitter both take them from
// here.
func TenantQuotaDefaults(configured model.TenantQuotas, maxEventCount int) model.TenantQuotas {
	dq := DefaultTenantQuotas()
	dq.MaxEventsPerFire = min(dq.MaxEventsPerFire, maxEventCount)
	return configured.Or(dq)
}
