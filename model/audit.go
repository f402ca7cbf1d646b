package model

import (
	"encoding/binary"
	"encoding/json"
	"time"
)

// AuditRecord is one mutating API call, kept for the audit retention: who
// (the tenant and the displayed prefix of the caller's key, "admin" for
// the admin key) did what (Action, the operation) to which object at
// which version, what changed (Diff) and the request it came in.
type AuditRecord struct {
	ID        string    `json:"id"`
	At        time.Time `json:"at"`
	TenantID  string    `json:"tenantId"`
	KeyPrefix string    `json:"keyPrefix,omitempty"`
	Action    string    `json:"action"`
	ObjectID  string    `json:"objectId,omitempty"`
	// Version is the object's version after the change (0: not versioned).
	Version int64 `json:"version,omitempty"`
	// Diff is a JSON object of the changed members, each {before, after}
	// (a member absent on one side has no before or after). Never a key
	// or a secret.
	Diff      json.RawMessage `json:"diff,omitempty"`
	Note      string          `json:"note,omitempty"`
	RequestID string          `json:"requestId,omitempty"`
	// Previous is the whole schedule as stored before the change (version
	// Version-1), for its versions; nil for other objects.
	Previous json.RawMessage `json:"previous,omitempty"`
}

// AuditIDPrefix starts the id of every audit record.
const AuditIDPrefix = "aud_"

// AuditIDFloor is the least audit id made in t's second: ids of records
// made at t or later sort at or after it.
func AuditIDFloor(t time.Time) string {
	var raw [10]byte
	binary.BigEndian.PutUint32(raw[:4], uint32(t.Unix()))
	return FormatID(AuditIDPrefix, raw)
}

// AuditIDSecond is the Unix second an audit id was made in; false for an
// id not of the audit form.
func AuditIDSecond(id string) (int64, bool) {
	raw, ok := ParseID(AuditIDPrefix, id)
	if !ok {
		return 0, false
	}
	return int64(binary.BigEndian.Uint32(raw[:4])), true
}
