package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"strconv"
	"time"
)

// FireID is the deterministic id of the fire of version v of a schedule at
// fireTime. Rescanning a window produces the same id, which is what makes
// emission idempotent. The version is part of the id because an edit cancels
// the future fires emitted for the old definition and emits them again for
// the new one.
func FireID(scheduleID string, version int64, fireTime time.Time) string {
	return scheduleID + "." + strconv.FormatInt(fireTime.UTC().Unix(), 10) + ".v" + strconv.FormatInt(version, 10)
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

// ShardOf maps an event onto one of k event queue shards. Events of a
// throttled policy all go to the policy's shard so that one handler (the
// owner of that shard) serialises the policy's token bucket; other events
// are spread by their id.
func ShardOf(e *Event, k int) int {
	if k <= 1 {
		return 0
	}
	key := e.ID
	if e.PolicyID != "" {
		key = "policy:" + e.PolicyID
	}
	sum := sha256.Sum256([]byte(key))
	return int(binary.BigEndian.Uint32(sum[:4]) % uint32(k))
}

// HashAPIKey returns the stored form of a clear API key.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
