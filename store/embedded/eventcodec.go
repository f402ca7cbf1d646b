package embedded

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// The full binary form of an event: the head of an event group and a
// loose event's row (evtx.go). A row starts with its codec version,
// eventCodecV3 (2 starts a canonical row, evrow.go).
//
// Strings are a uvarint length and the bytes; integers are varints; times
// are a presence byte (0 zero time, 1 set) followed by varint Unix seconds
// and uvarint nanoseconds, read back in UTC; optional times are a presence
// byte (0 nil) and a time; booleans are one byte. The payload is kept byte
// for byte.
//
// After the version come a uvarint of flags and the fields, leaving out
// what the row gives already: the schedule id when the fire id starts with
// it (its length instead), the launch time when it is the fire time, the
// update time when it is the creation time.
// Status and target type are codes (putEnum, statusCodes). The concurrency
// key is a flag and a string. A group head of a one-off whose schedule row
// holds its tenant, target, payload, policy, priority, attempts and
// concurrency key leaves those out and names the schedule's version instead
// (evFromSchedule, refSchedule); it is read with that row (decodeEventWith),
// which also gives its fire id, fire time and creation time when they are
// the schedule's (evFireOfSchedule and the flags after it).
const eventCodecV3 = 0x03

// Flags of a version 3 event.
const (
	evSchedInFire = 1 << iota
	evLaunchIsFire
	evUpdatedIsCreated
	evFromSchedule
	// With evFromSchedule only: the fire id is
	// model.FireID of the schedule's id and version and the fire time, and
	// the schedule's id is stored instead (evFireOfSchedule); the fire time
	// is the schedule's runAt (evFireAtRunAt); the creation time is stored
	// as nanoseconds from the schedule's (evCreatedFromSchedule).
	evFireOfSchedule
	evFireAtRunAt
	evCreatedFromSchedule
	// The event's trace context (model.Event.TraceParent) follows the
	// update time.
	evTraceParent
	// ExpireAt follows the update time.
	evExpireAt
)

// refSchedule reports whether the head e can leave its fields to the row
// of sc (nil: no row): only a one-off's, whose rows change only through
// ScheduleUpdate and ScheduleDelete, which first write such heads in full
// (unrefHeads).
func refSchedule(e *model.Event, sc *model.Schedule) bool {
	return sc != nil && sc.RunAt != nil && sc.ID == e.ScheduleID && sc.TenantID == e.TenantID &&
		sc.Target == e.Target && bytes.Equal(sc.Payload, e.Payload) && sc.MaxAttempts == e.MaxAttempts &&
		sc.Priority == e.Priority && sc.PolicyID == e.PolicyID
}

// refersToSchedule reports whether the encoded event raw leaves fields to
// its schedule's row.
func refersToSchedule(raw []byte) bool {
	if len(raw) < 2 || raw[0] != eventCodecV3 {
		return false
	}
	flags, n := binary.Uvarint(raw[1:])
	return n > 0 && flags&evFromSchedule != 0
}

var errShortRow = errors.New("truncated event row")

func encodeEvent(e *model.Event) ([]byte, error) { return encodeEventRef(e, nil) }

// encodeEventRef encodes e; sc, if refSchedule(e, sc), is the schedule
// whose row e's fields are left to.
func encodeEventRef(e *model.Event, sc *model.Schedule) ([]byte, error) {
	n := 64 + len(e.ID) + len(e.TenantID) + len(e.FireID) + len(e.PolicyID) +
		len(e.Target.URL) + len(e.Target.QueueURL) + len(e.Payload) + len(e.LastError) + len(e.ReleaseToken) + 12*9
	var flags uint64
	if strings.HasPrefix(e.FireID, e.ScheduleID+".") {
		flags |= evSchedInFire
	}
	if sameTime(e.LaunchAt, e.FireTime) {
		flags |= evLaunchIsFire
	}
	if sameTime(e.UpdatedAt, e.CreatedAt) {
		flags |= evUpdatedIsCreated
	}
	if e.TraceParent != "" {
		flags |= evTraceParent
	}
	if e.ExpireAt != nil {
		flags |= evExpireAt
	}
	ref := refSchedule(e, sc)
	var createdDelta time.Duration
	if ref {
		flags |= evFromSchedule
		if e.FireID == model.FireID(sc.ID, sc.Version, e.FireTime) {
			flags |= evFireOfSchedule
		}
		if sc.RunAt != nil && e.FireTime.Equal(*sc.RunAt) {
			flags |= evFireAtRunAt
		}
		var ok bool
		if createdDelta, ok = timeDelta(sc.CreatedAt, e.CreatedAt); ok {
			flags |= evCreatedFromSchedule
		}
	}
	b := make([]byte, 0, n)
	b = append(b, eventCodecV3)
	b = binary.AppendUvarint(b, flags)
	if ref {
		b = binary.AppendVarint(b, sc.Version)
	}
	b = putStr(b, e.ID)
	if !ref {
		b = putStr(b, e.TenantID)
	}
	switch {
	case flags&evFireOfSchedule != 0:
		b = putStr(b, e.ScheduleID)
	case flags&evSchedInFire != 0:
		b = binary.AppendUvarint(b, uint64(len(e.ScheduleID)))
		b = putStr(b, e.FireID)
	default:
		b = putStr(b, e.ScheduleID)
		b = putStr(b, e.FireID)
	}
	if flags&evFireAtRunAt == 0 {
		b = putTime(b, e.FireTime)
	}
	b = binary.AppendVarint(b, int64(e.Index))
	b = binary.AppendVarint(b, int64(e.Count))
	if flags&evLaunchIsFire == 0 {
		b = putTime(b, e.LaunchAt)
	}
	b = putTimePtr(b, e.Deadline)
	if !ref {
		b = binary.AppendVarint(b, int64(e.Priority))
		b = putStr(b, e.PolicyID)
		b = putEnum(b, string(e.Target.Type), enumTarget)
		b = putStr(b, e.Target.URL)
		b = putStr(b, e.Target.QueueURL)
		b = putBytes(b, e.Payload)
		b = binary.AppendVarint(b, int64(e.MaxAttempts))
	}
	b = binary.AppendVarint(b, int64(e.Shard))
	if c, ok := statusCodes[e.Status]; ok {
		b = append(b, c)
	} else {
		b = putStr(append(b, 0), string(e.Status))
	}
	b = binary.AppendVarint(b, int64(e.Attempts))
	b = putStr(b, e.LastError)
	b = binary.AppendVarint(b, e.Fence)
	b = putStr(b, e.ReleaseToken)
	b = putTimePtr(b, e.TokenExpiresAt)
	b = putBool(b, e.TokenTimedOut)
	b = putTimePtr(b, e.DeliveredAt)
	b = putTimePtr(b, e.FinishedAt)
	if flags&evCreatedFromSchedule != 0 {
		b = binary.AppendVarint(b, int64(createdDelta))
	} else {
		b = putTime(b, e.CreatedAt)
	}
	if flags&evUpdatedIsCreated == 0 {
		b = putTime(b, e.UpdatedAt)
	}
	if flags&evTraceParent != 0 {
		b = putStr(b, e.TraceParent)
	}
	if flags&evExpireAt != 0 {
		b = putTime(b, *e.ExpireAt)
	}
	return b, nil
}

func decodeEvent(raw []byte) (*model.Event, error) { return decodeEventWith(raw, nil) }

// decodeEventWith decodes raw; schedule returns the stored schedule a head
// leaves fields to (nil: such a head is an error).
func decodeEventWith(raw []byte, schedule func(id string) (*model.Schedule, error)) (*model.Event, error) {
	if len(raw) == 0 || raw[0] != eventCodecV3 {
		return nil, errors.New("decode event: unknown row format")
	}
	return decodeEventV3(raw[1:], schedule)
}

func decodeEventV3(b []byte, schedule func(id string) (*model.Schedule, error)) (*model.Event, error) {
	d := decoder{b: b}
	e := &model.Event{}
	flags := d.uvarint()
	ref := flags&evFromSchedule != 0
	var version int64
	if ref {
		version = d.varint()
	}
	e.ID = d.str()
	if !ref {
		e.TenantID = d.str()
	}
	// The schedule, read first when the fire's id and times are its.
	var sc *model.Schedule
	switch {
	case flags&(evFireOfSchedule|evFireAtRunAt|evCreatedFromSchedule) != 0 && !ref:
		return nil, errors.New("decode event: fields of a schedule without a reference to it")
	case flags&evFireOfSchedule != 0:
		e.ScheduleID = d.str()
	case flags&evSchedInFire != 0:
		schedLen := d.uvarint()
		e.FireID = d.str()
		if schedLen < uint64(len(e.FireID)) {
			e.ScheduleID = e.FireID[:schedLen]
		} else if d.err == nil {
			d.err, d.b = fmt.Errorf("decode event: schedule id of %d bytes in a fire id of %d", schedLen, len(e.FireID)), nil
		}
	default:
		e.ScheduleID = d.str()
		e.FireID = d.str()
	}
	if d.err != nil {
		return nil, d.err
	}
	if flags&(evFireOfSchedule|evFireAtRunAt|evCreatedFromSchedule) != 0 {
		var err error
		if sc, err = referredSchedule(e, version, schedule); err != nil {
			return nil, err
		}
	}
	if flags&evFireAtRunAt != 0 {
		if sc.RunAt == nil {
			return nil, fmt.Errorf("decode event: fire time of schedule %q, which has no runAt", sc.ID)
		}
		e.FireTime = *sc.RunAt
	} else {
		e.FireTime = d.time()
	}
	if flags&evFireOfSchedule != 0 {
		e.FireID = model.FireID(e.ScheduleID, version, e.FireTime)
	}
	e.Index = int(d.varint())
	e.Count = int(d.varint())
	if flags&evLaunchIsFire != 0 {
		e.LaunchAt = e.FireTime
	} else {
		e.LaunchAt = d.time()
	}
	e.Deadline = d.timePtr()
	if !ref {
		e.Priority = int(d.varint())
		e.PolicyID = d.str()
		e.Target.Type = model.TargetType(d.enum(enumTarget))
		e.Target.URL = d.str()
		e.Target.QueueURL = d.str()
		if p := d.bytes(); len(p) > 0 {
			e.Payload = json.RawMessage(p)
		}
		e.MaxAttempts = int(d.varint())
	}
	e.Shard = int(d.varint())
	if c := d.byte1(); c != 0 {
		if e.Status = statusByCode[c]; e.Status == "" && d.err == nil {
			d.err, d.b = fmt.Errorf("decode event: unknown status code %d", c), nil
		}
	} else {
		e.Status = model.EventStatus(d.str())
	}
	readDeliveryState(&d, e)
	if flags&evCreatedFromSchedule != 0 {
		e.CreatedAt = sc.CreatedAt.Add(time.Duration(d.varint()))
	} else {
		e.CreatedAt = d.time()
	}
	if flags&evUpdatedIsCreated != 0 {
		e.UpdatedAt = e.CreatedAt
	} else {
		e.UpdatedAt = d.time()
	}
	if flags&evTraceParent != 0 {
		e.TraceParent = d.str()
	}
	if flags&evExpireAt != 0 {
		t := d.time()
		e.ExpireAt = &t
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = errors.New("decode event: trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	if ref {
		if err := fromSchedule(e, version, schedule); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// referredSchedule returns version of e's schedule, which head e refers
// to.
func referredSchedule(e *model.Event, version int64, schedule func(id string) (*model.Schedule, error)) (*model.Schedule, error) {
	if schedule == nil {
		return nil, fmt.Errorf("decode event: schedule %q: a head that refers to its schedule, read without it", e.ScheduleID)
	}
	sc, err := schedule(e.ScheduleID)
	if err != nil {
		return nil, fmt.Errorf("decode event: schedule %q: %w", e.ScheduleID, err)
	}
	if sc.Version != version {
		return nil, fmt.Errorf("decode event: refers to version %d of schedule %q, which is at %d", version, e.ScheduleID, sc.Version)
	}
	return sc, nil
}

// fromSchedule fills the fields head e left to version of its schedule.
func fromSchedule(e *model.Event, version int64, schedule func(id string) (*model.Schedule, error)) error {
	sc, err := referredSchedule(e, version, schedule)
	if err != nil {
		return fmt.Errorf("fire %q: %w", e.FireID, err)
	}
	e.TenantID, e.Priority, e.PolicyID, e.Target = sc.TenantID, sc.Priority, sc.PolicyID, sc.Target
	e.MaxAttempts = sc.MaxAttempts
	if len(sc.Payload) > 0 {
		e.Payload = json.RawMessage(bytes.Clone(sc.Payload))
	}
	return nil
}

func putStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func putBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func putBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func putTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func putTimePtr(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, 0)
	}
	return putTime(append(b, 1), *t)
}

// decoder reads a binary event row; the first error sticks and later reads
// return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errShortRow
	}
	d.b = nil
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	l := d.uvarint()
	if uint64(len(d.b)) < l {
		d.fail()
		return nil
	}
	v := make([]byte, l)
	copy(v, d.b[:l])
	d.b = d.b[l:]
	return v
}

func (d *decoder) str() string {
	l := d.uvarint()
	if uint64(len(d.b)) < l {
		d.fail()
		return ""
	}
	v := string(d.b[:l])
	d.b = d.b[l:]
	return v
}

func (d *decoder) byte1() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bool() bool { return d.byte1() == 1 }

func (d *decoder) time() time.Time {
	if d.byte1() == 0 {
		return time.Time{}
	}
	sec := d.varint()
	nsec := d.uvarint()
	return time.Unix(sec, int64(nsec)).UTC()
}

// timeFrom reads what putTimeFrom wrote against base: the time in full
// when abs, else nanoseconds from base.
func (d *decoder) timeFrom(abs bool, base time.Time) time.Time {
	if abs {
		return d.time()
	}
	return base.Add(time.Duration(d.varint()))
}

func (d *decoder) timePtr() *time.Time {
	if d.byte1() == 0 {
		return nil
	}
	t := d.time()
	return &t
}

// readDeliveryState reads the delivery state of an event, in this
// order: attempts, last error, fence, release token, token expiry and
// timeout, delivery and finish times.
func readDeliveryState(d *decoder, e *model.Event) {
	e.Attempts = int(d.varint())
	e.LastError = d.str()
	e.Fence = d.varint()
	e.ReleaseToken = d.str()
	e.TokenExpiresAt = d.timePtr()
	e.TokenTimedOut = d.bool()
	e.DeliveredAt = d.timePtr()
	e.FinishedAt = d.timePtr()
}
