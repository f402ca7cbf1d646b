package embedded

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// Events are stored by fire. The first
// event stored of a fire opens the fire's event group: a sequence number and
// a head, the full encoding of that first event, which holds what the
// fire's events share (tenant, schedule, target, payload, policy, ...).
// Every event is then a row keyed by rowKey (group sequence, slot) that
// keeps only what differs from the head, which for an event as the emitter
// writes it is its status, shard and launch time: a dozen bytes.
//
// An event is canonical when its id is model.EventID(FireID, Index) and its
// tenant and schedule are the head's: its slot is its Index, its id is
// derived from the key, and the group's keys in the tenant and schedule
// indexes stand for it. Any other event is loose: it gets a slot from
// 1<<31 up, a full row (encodeEvent), an id -> rowKey entry and index keys
// of its own. The store contract holds for both; the emitter writes
// canonical events only.

const (
	rowKeyLen = 12
	looseSlot = 1 << 31
	// eventRowV2 starts a canonical row: a bit set of the fields present,
	// then those fields in bit order.
	eventRowV2 = 0x02
)

func rowKey(seq uint64, slot uint32) []byte {
	b := make([]byte, rowKeyLen)
	binary.BigEndian.PutUint64(b, seq)
	binary.BigEndian.PutUint32(b[8:], slot)
	return b
}

func seqOf(rk []byte) uint64 { return binary.BigEndian.Uint64(rk) }

func slotOf(rk []byte) uint32 { return binary.BigEndian.Uint32(rk[8:]) }

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// Status codes in index keys: one byte instead of the name.
var (
	statusCodes = map[model.EventStatus]byte{
		model.EventPending: 1, model.EventScheduled: 2, model.EventDelivering: 3, model.EventDelivered: 4,
		model.EventReleased: 5, model.EventRetrying: 6, model.EventDead: 7, model.EventCancelled: 8,
		model.EventExpired: 9,
	}
	statusByCode = func() [256]model.EventStatus {
		var out [256]model.EventStatus
		for s, c := range statusCodes {
			out[c] = s
		}
		return out
	}()
)

func statusCode(s model.EventStatus) (byte, error) {
	c, ok := statusCodes[s]
	if !ok {
		return 0, fmt.Errorf("event status %q: %w", s, model.ErrInvalid)
	}
	return c, nil
}

// canonical reports whether e can be stored as a canonical event of the
// group whose head is h.
func canonical(e, h *model.Event) bool {
	return e.Index >= 0 && e.Index < looseSlot && e.FireID == h.FireID &&
		e.TenantID == h.TenantID && e.ScheduleID == h.ScheduleID &&
		e.ID == model.EventID(e.FireID, e.Index)
}

// Bits of a canonical row, in the order of its fields.
const (
	fFireTime = 1 << iota
	fCount
	fDeadline
	fPriority
	fPolicy
	fTarget
	fPayload
	fMaxAttempts
	fCreatedAt
	fUpdatedAt
	fShard
	fStatus
	fLaunchDelta
	fLaunchAt
	fAttempts
	fLastError
	fFence
	fReleaseToken
	fTokenExpiresAt
	fTokenTimedOut
	fDeliveredAt
	fFinishedAt
	// The release token as the bytes its hex digits give (tokenBytes),
	// instead of fReleaseToken's text: half the bytes of the emitter's.
	fReleaseTokenBytes
	// The release token is the store's for the event id (tokenKey): not
	// stored.
	fReleaseTokenDerived
	// The trace context, when it differs from the head's.
	fTraceParent
	// ExpireAt differs from the head's (nil: none).
	fExpireAt
)

// sameTime is equality as the codec keeps it: instants read back in UTC.
func sameTime(a, b time.Time) bool { return a.Equal(b) }

// encodeRow encodes canonical e against its group's head h, with the
// store's token key k.
func encodeRow(e, h *model.Event, k *tokenKey) []byte {
	var flags uint64
	set := func(bit uint64, cond bool) {
		if cond {
			flags |= bit
		}
	}
	set(fFireTime, !sameTime(e.FireTime, h.FireTime))
	set(fCount, e.Count != h.Count)
	set(fDeadline, !sameDeadline(e.Deadline, h.Deadline))
	set(fPriority, e.Priority != h.Priority)
	set(fPolicy, e.PolicyID != h.PolicyID)
	set(fTarget, e.Target != h.Target)
	set(fPayload, !bytes.Equal(e.Payload, h.Payload))
	set(fMaxAttempts, e.MaxAttempts != h.MaxAttempts)
	set(fCreatedAt, !sameTime(e.CreatedAt, h.CreatedAt))
	set(fUpdatedAt, !sameTime(e.UpdatedAt, h.UpdatedAt))
	set(fShard, e.Shard != h.Shard)
	set(fStatus, e.Status != h.Status)
	if !sameTime(e.LaunchAt, h.LaunchAt) {
		if e.LaunchAt.IsZero() || h.LaunchAt.IsZero() {
			flags |= fLaunchAt
		} else {
			flags |= fLaunchDelta
		}
	}
	set(fAttempts, e.Attempts != 0)
	set(fLastError, e.LastError != "")
	set(fFence, e.Fence != 0)
	token, tokenHex := tokenBytes(e.ReleaseToken)
	derived := tokenHex && k.derives(e.ID, token)
	set(fReleaseToken, e.ReleaseToken != "" && !tokenHex)
	set(fReleaseTokenBytes, tokenHex && !derived)
	set(fReleaseTokenDerived, derived)
	set(fTokenExpiresAt, e.TokenExpiresAt != nil)
	set(fTokenTimedOut, e.TokenTimedOut)
	set(fDeliveredAt, e.DeliveredAt != nil)
	set(fFinishedAt, e.FinishedAt != nil)
	set(fTraceParent, e.TraceParent != h.TraceParent)
	set(fExpireAt, !sameDeadline(e.ExpireAt, h.ExpireAt))

	b := make([]byte, 0, 16)
	b = append(b, eventRowV2)
	b = binary.AppendUvarint(b, flags)
	if flags&fFireTime != 0 {
		b = putTime(b, e.FireTime)
	}
	if flags&fCount != 0 {
		b = binary.AppendVarint(b, int64(e.Count))
	}
	if flags&fDeadline != 0 {
		b = putTimePtr(b, e.Deadline)
	}
	if flags&fPriority != 0 {
		b = binary.AppendVarint(b, int64(e.Priority))
	}
	if flags&fPolicy != 0 {
		b = putStr(b, e.PolicyID)
	}
	if flags&fTarget != 0 {
		b = putStr(b, string(e.Target.Type))
		b = putStr(b, e.Target.URL)
		b = putStr(b, e.Target.QueueURL)
	}
	if flags&fPayload != 0 {
		b = putBytes(b, e.Payload)
	}
	if flags&fMaxAttempts != 0 {
		b = binary.AppendVarint(b, int64(e.MaxAttempts))
	}
	if flags&fCreatedAt != 0 {
		b = putTime(b, e.CreatedAt)
	}
	if flags&fUpdatedAt != 0 {
		b = putTime(b, e.UpdatedAt)
	}
	if flags&fShard != 0 {
		b = binary.AppendVarint(b, int64(e.Shard))
	}
	if flags&fStatus != 0 {
		// A status code, or 0 and the name of a status without one.
		if c, ok := statusCodes[e.Status]; ok {
			b = append(b, c)
		} else {
			b = putStr(append(b, 0), string(e.Status))
		}
	}
	if flags&fLaunchDelta != 0 {
		b = binary.AppendVarint(b, e.LaunchAt.Unix()-h.LaunchAt.Unix())
		b = binary.AppendUvarint(b, uint64(e.LaunchAt.Nanosecond()))
	}
	if flags&fLaunchAt != 0 {
		b = putTime(b, e.LaunchAt)
	}
	if flags&fAttempts != 0 {
		b = binary.AppendVarint(b, int64(e.Attempts))
	}
	if flags&fLastError != 0 {
		b = putStr(b, e.LastError)
	}
	if flags&fFence != 0 {
		b = binary.AppendVarint(b, e.Fence)
	}
	if flags&fReleaseToken != 0 {
		b = putStr(b, e.ReleaseToken)
	}
	if flags&fTokenExpiresAt != 0 {
		b = putTime(b, *e.TokenExpiresAt)
	}
	if flags&fDeliveredAt != 0 {
		b = putTime(b, *e.DeliveredAt)
	}
	if flags&fFinishedAt != 0 {
		b = putTime(b, *e.FinishedAt)
	}
	if flags&fReleaseTokenBytes != 0 {
		b = putBytes(b, token)
	}
	if flags&fTraceParent != 0 {
		b = putStr(b, e.TraceParent)
	}
	if flags&fExpireAt != 0 {
		b = putTimePtr(b, e.ExpireAt)
	}
	return b
}

func sameDeadline(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return sameTime(*a, *b)
}

// decodeRow returns the event of the row raw stored at slot of the group
// whose head is h (nil for a loose row, which needs none).
func decodeRow(raw []byte, h *model.Event, slot uint32, k *tokenKey) (*model.Event, error) {
	if len(raw) == 0 {
		return nil, errors.New("decode event: empty row")
	}
	if raw[0] != eventRowV2 {
		return decodeEvent(raw)
	}
	if h == nil {
		return nil, errors.New("decode event: canonical row without its group head")
	}
	d := decoder{b: raw[1:]}
	flags := d.uvarint()
	e := &model.Event{
		ID: model.EventID(h.FireID, int(slot)), TenantID: h.TenantID, ScheduleID: h.ScheduleID,
		FireID: h.FireID, FireTime: h.FireTime, Index: int(slot), Count: h.Count, LaunchAt: h.LaunchAt,
		Priority: h.Priority, PolicyID: h.PolicyID, Target: h.Target,
		MaxAttempts: h.MaxAttempts, Shard: h.Shard, Status: h.Status, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt,
		TraceParent: h.TraceParent,
	}
	if h.Deadline != nil {
		t := *h.Deadline
		e.Deadline = &t
	}
	if h.ExpireAt != nil {
		t := *h.ExpireAt
		e.ExpireAt = &t
	}
	if len(h.Payload) > 0 {
		e.Payload = json.RawMessage(bytes.Clone(h.Payload))
	}
	if flags&fFireTime != 0 {
		e.FireTime = d.time()
	}
	if flags&fCount != 0 {
		e.Count = int(d.varint())
	}
	if flags&fDeadline != 0 {
		e.Deadline = d.timePtr()
	}
	if flags&fPriority != 0 {
		e.Priority = int(d.varint())
	}
	if flags&fPolicy != 0 {
		e.PolicyID = d.str()
	}
	if flags&fTarget != 0 {
		e.Target.Type = model.TargetType(d.str())
		e.Target.URL = d.str()
		e.Target.QueueURL = d.str()
	}
	if flags&fPayload != 0 {
		e.Payload = nil
		if p := d.bytes(); len(p) > 0 {
			e.Payload = json.RawMessage(p)
		}
	}
	if flags&fMaxAttempts != 0 {
		e.MaxAttempts = int(d.varint())
	}
	if flags&fCreatedAt != 0 {
		e.CreatedAt = d.time()
	}
	if flags&fUpdatedAt != 0 {
		e.UpdatedAt = d.time()
	}
	if flags&fShard != 0 {
		e.Shard = int(d.varint())
	}
	if flags&fStatus != 0 {
		if c := d.byte1(); c != 0 {
			e.Status = statusByCode[c]
		} else {
			e.Status = model.EventStatus(d.str())
		}
	}
	if flags&fLaunchDelta != 0 {
		sec := h.LaunchAt.Unix() + d.varint()
		e.LaunchAt = time.Unix(sec, int64(d.uvarint())).UTC()
	}
	if flags&fLaunchAt != 0 {
		e.LaunchAt = d.time()
	}
	if flags&fAttempts != 0 {
		e.Attempts = int(d.varint())
	}
	if flags&fLastError != 0 {
		e.LastError = d.str()
	}
	if flags&fFence != 0 {
		e.Fence = d.varint()
	}
	if flags&fReleaseToken != 0 {
		e.ReleaseToken = d.str()
	}
	if flags&fTokenExpiresAt != 0 {
		t := d.time()
		e.TokenExpiresAt = &t
	}
	e.TokenTimedOut = flags&fTokenTimedOut != 0
	if flags&fDeliveredAt != 0 {
		t := d.time()
		e.DeliveredAt = &t
	}
	if flags&fFinishedAt != 0 {
		t := d.time()
		e.FinishedAt = &t
	}
	if flags&fReleaseTokenBytes != 0 {
		e.ReleaseToken = hex.EncodeToString(d.bytes())
	}
	if flags&fReleaseTokenDerived != 0 {
		var err error
		if e.ReleaseToken, err = k.token(e.ID); err != nil && d.err == nil {
			d.err = err
		}
	}
	if flags&fTraceParent != 0 {
		e.TraceParent = d.str()
	}
	if flags&fExpireAt != 0 {
		e.ExpireAt = d.timePtr()
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = errors.New("decode event: trailing bytes in row")
	}
	if d.err != nil {
		return nil, d.err
	}
	return e, nil
}
