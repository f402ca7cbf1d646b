package model

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// Prefixes of the ids the API gives out: a prefix and the IDText of 10
// bytes (16 characters).
const (
	PrefixSchedule = "sch_"
	PrefixPolicy   = "pol_"
	PrefixCalendar = "cal_"
	PrefixTenant   = "ten_"
	PrefixKey      = "key_"
)

// IDAlphabet is IDText's, in byte order, so that ids sort as their bytes
// do.
const IDAlphabet = "234567abcdefghijklmnopqrstuvwxyz"

// IDText writes the 10 bytes of an id as its 16 characters; 16 characters
// stand for exactly 10 bytes and come back from them unchanged, so a store
// may keep an id by its bytes (ParseID).
var IDText = base32.NewEncoding(IDAlphabet).WithPadding(base32.NoPadding)

// FormatID is the id of prefix and raw.
func FormatID(prefix string, raw [10]byte) string { return prefix + IDText.EncodeToString(raw[:]) }

// ParseID returns the 10 bytes of id if it is of prefix's form
// (FormatID); false otherwise.
func ParseID(prefix, id string) ([10]byte, bool) {
	var raw [10]byte
	text, ok := strings.CutPrefix(id, prefix)
	if !ok || len(text) != 16 {
		return raw, false
	}
	n, err := IDText.Decode(raw[:], []byte(text))
	return raw, err == nil && n == len(raw)
}

// FireInstant is the fire time of something due at t: t rounded up to the
// next whole millisecond (t itself if it is one). Fire times are whole
// milliseconds so that their ids are short and deterministic; rounding up
// keeps every launch at or after the instant asked for.
func FireInstant(t time.Time) time.Time {
	t = t.UTC()
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}

// FireID is the deterministic id of the fire of version v of a schedule at
// fireTime (a whole millisecond: see FireInstant). Rescanning a window
// produces the same id, which is what makes emission idempotent. The version
// is part of the id because an edit cancels the future fires emitted for the
// old definition and emits them again for the new one.
//
// The time part is the Unix second, followed by ".mmm" only when the fire is
// not on a whole second: ids of whole-second fires (every cron fire) are
// those earlier releases gave them, so stored fires keep their ids.
func FireID(scheduleID string, version int64, fireTime time.Time) string {
	var buf [64]byte
	return string(AppendFireID(buf[:0], scheduleID, version, fireTime))
}

// AppendFireID appends FireID(scheduleID, version, fireTime) to b.
func AppendFireID(b []byte, scheduleID string, version int64, fireTime time.Time) []byte {
	ms := fireTime.UnixMilli()
	sec, frac := ms/1000, ms%1000
	if frac < 0 {
		sec, frac = sec-1, frac+1000
	}
	b = append(b, scheduleID...)
	b = append(b, '.')
	b = strconv.AppendInt(b, sec, 10)
	if frac != 0 {
		b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	}
	b = append(b, ".v"...)
	return strconv.AppendInt(b, version, 10)
}

// EventID is the deterministic id of event index (0-based) of a fire.
func EventID(fireID string, index int) string {
	return fireID + "." + strconv.Itoa(index)
}

// PartitionOf maps a schedule id onto one of p emitter partitions.
func PartitionOf(scheduleID string, p int) int {
	if p <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(scheduleID))
	return int(h.Sum32() % uint32(p))
}

// JitterOffset is the launch offset of the fire at fireTime of the schedule
// scheduleID whose jitter is jitter: a whole number of milliseconds in
// [0, jitter), a hash of the schedule id and the fire time, so that every
// pass and every instance computes the same offset and schedules with the
// same cron spread apart. 0 when jitter is under a millisecond.
func JitterOffset(scheduleID string, fireTime time.Time, jitter time.Duration) time.Duration {
	span := jitter.Milliseconds()
	if span <= 0 {
		return 0
	}
	b := make([]byte, 0, len(scheduleID)+8)
	b = binary.BigEndian.AppendUint64(append(b, scheduleID...), uint64(fireTime.UnixMilli()))
	sum := sha256.Sum256(b)
	return time.Duration(binary.BigEndian.Uint64(sum[:8])%uint64(span)) * time.Millisecond
}

// ShardRun is the number of consecutive events of a fire that ShardOf puts
// on one shard. A claim then takes runs of neighbouring rows, so a commit
// rewrites a few store pages per run instead of one per event, however far
// the shards' claims have drifted apart in a long fire
// (docs/benchmarks.md).
const ShardRun = 64

// ShardOf maps an event onto one of k event queue shards. Events of a
// throttled policy all go to the policy's shard so that one handler (the
// owner of that shard) serialises the policy's token bucket; other events
// are spread by a hash of their fire and run: EventID(fire, i) with the
// same fire and i/ShardRun share a shard.
func ShardOf(e *Event, k int) int {
	if k <= 1 {
		return 0
	}
	key := e.ID
	if e.PolicyID != "" {
		key = "policy:" + e.PolicyID
	} else if dot := strings.LastIndexByte(key, '.'); dot >= 0 {
		if i, err := strconv.Atoi(key[dot+1:]); err == nil && i >= 0 {
			key = key[:dot+1] + strconv.Itoa(i/ShardRun)
		}
	}
	sum := sha256.Sum256([]byte(key))
	return int(binary.BigEndian.Uint32(sum[:4]) % uint32(k))
}

// HashAPIKey returns the stored form of a clear API key.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
