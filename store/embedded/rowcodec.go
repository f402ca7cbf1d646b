package embedded

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// Schedules and fires are stored in a binary form. A row starts with its
// codec version (scheduleCodecV3, fireCodecV2). The id is the row's key
// and is not repeated in the value. The primitives are eventcodec.go's:
// uvarint-length strings, varints, presence-byte times read back in UTC.
//
// Enumerations are stored by a code (putEnum); a row leaves out what it
// holds already (a fire's schedule id and local time when they are what
// its id and fire time give, an update time equal to the creation time)
// and keeps a schedule's sole child inline. A schedule's tenant is stored
// by its code and its target URL's origin by a code of the origin
// dictionary (dict.go, splitOrigin), and runAt as nanoseconds from the
// creation time; the times a row gives read back as stored, to the
// nanosecond.
const (
	scheduleCodecV3 = 0x03
	fireCodecV2     = 0x02
)

// Code tables of putEnum. Codes are stored: values are only ever appended.
var (
	enumTimezone = []string{"", "UTC"}
	enumTarget   = []string{"", string(model.TargetHTTP), string(model.TargetSQS), string(model.TargetHTTPBatch)}
	enumMisfire  = []string{"", string(model.MisfireFireOnce), string(model.MisfireFireAll), string(model.MisfireSkip)}
	enumOverlap  = []string{"", string(model.OverlapAllow), string(model.OverlapSkip), string(model.OverlapCancel)}
	enumState    = []string{"", string(model.ScheduleActive), string(model.SchedulePaused), string(model.ScheduleCompleted)}
	enumDecision = []string{"", string(model.FireEmitted), string(model.FireLate), string(model.FireSkippedOverlap),
		string(model.FireCancelledByNext), string(model.FireTriggered)}
)

// putEnum writes s as one byte, its index in table plus one, or as 0 and
// the string when the table does not hold it.
func putEnum(b []byte, s string, table []string) []byte {
	if i := slices.Index(table, s); i >= 0 && i < 255 {
		return append(b, byte(i+1))
	}
	return putStr(append(b, 0), s)
}

func (d *decoder) enum(table []string) string {
	c := d.byte1()
	switch {
	case d.err != nil:
		return ""
	case c == 0:
		return d.str()
	case int(c) > len(table):
		d.err, d.b = fmt.Errorf("unknown code %d", c), nil
		return ""
	}
	return table[c-1]
}

func putDuration(b []byte, d time.Duration) []byte { return binary.AppendVarint(b, int64(d)) }

// Flags of a schedule row. The first seven are in the first
// byte of the flags' uvarint, where encodeScheduleFire,
// encodeScheduleEvent and markChildImplied set them in place.
const (
	schedUpdatedIsCreated = 1 << iota // UpdatedAt equals CreatedAt and is not stored
	schedSoleChild                    // the schedule's sole child follows (soleChild)
	schedFire                         // the one-off's fire follows (impliesFire)
	schedEvent                        // with schedFire: that fire's one event follows (impliesEvent)
	schedChildImplied                 // the sole child has no children entry and no timezone count (impliesChild)
	schedRunAt                        // runAt follows the times, from the creation time (putTimeFrom)
	schedURLWhole                     // the target URL is stored whole, not as an origin code and the rest
	schedRunAtAbs                     // with schedRunAt: runAt is stored in full
	schedChildOfRunAt                 // with schedSoleChild: the child is model.OneOffChild, not stored
	schedExt                          // the fields of scheduleExt follow the times, as JSON
)

// scheduleExt holds the fields of a schedule that most schedules leave
// unset, stored as JSON behind schedExt: a row without any pays nothing,
// and a field added here needs no new layout.
type scheduleExt struct {
	Labels           map[string]string      `json:"labels,omitempty"`
	Jitter           time.Duration          `json:"jitter,omitempty"`
	PausedNote       string                 `json:"pausedNote,omitempty"`
	PausedAt         *time.Time             `json:"pausedAt,omitempty"`
	PausedBy         string                 `json:"pausedBy,omitempty"`
	ResumeAt         *time.Time             `json:"resumeAt,omitempty"`
	SkipUntil        *time.Time             `json:"skipUntil,omitempty"`
	ExcludeCalendars []string               `json:"excludeCalendars,omitempty"`
	OnExcluded       model.OnExcludedPolicy `json:"onExcluded,omitempty"`
	Interval         time.Duration          `json:"interval,omitempty"`
	IntervalNext     *time.Time             `json:"intervalNext,omitempty"`
	Crons            []string               `json:"crons,omitempty"`
	CreatedTrace     string                 `json:"createdTrace,omitempty"`
	Notify           []model.Notify         `json:"notify,omitempty"`
	After            *model.After           `json:"after,omitempty"`
	Deadline         time.Duration          `json:"deadline,omitempty"`
	OnDeadline       model.DeadlinePolicy   `json:"onDeadline,omitempty"`
	MaxEventAge      time.Duration          `json:"maxEventAge,omitempty"`
}

// extOf returns the scheduleExt of sc, and whether any of its fields is set.
func extOf(sc *model.Schedule) (scheduleExt, bool) {
	x := scheduleExt{Labels: sc.Labels, Jitter: sc.Jitter, PausedNote: sc.PausedNote, PausedAt: sc.PausedAt, PausedBy: sc.PausedBy,
		ResumeAt: sc.ResumeAt, SkipUntil: sc.SkipUntil, ExcludeCalendars: sc.ExcludeCalendars, OnExcluded: sc.OnExcluded,
		Interval: sc.Interval, IntervalNext: sc.IntervalNext, Crons: sc.Crons, Notify: sc.Notify, After: sc.After, CreatedTrace: sc.CreatedTrace,
		Deadline: sc.Deadline, OnDeadline: sc.OnDeadline, MaxEventAge: sc.MaxEventAge}
	return x, !reflect.ValueOf(x).IsZero()
}

// apply sets the fields of sc that x holds.
func (x *scheduleExt) apply(sc *model.Schedule) {
	sc.Labels = x.Labels
	sc.Jitter = x.Jitter
	sc.PausedNote, sc.PausedAt, sc.PausedBy = x.PausedNote, x.PausedAt, x.PausedBy
	sc.ResumeAt, sc.SkipUntil = x.ResumeAt, x.SkipUntil
	sc.ExcludeCalendars, sc.OnExcluded = x.ExcludeCalendars, x.OnExcluded
	sc.Interval, sc.IntervalNext, sc.Crons = x.Interval, x.IntervalNext, x.Crons
	sc.CreatedTrace = x.CreatedTrace
	sc.Notify, sc.After = x.Notify, x.After
	sc.Deadline, sc.OnDeadline, sc.MaxEventAge = x.Deadline, x.OnDeadline, x.MaxEventAge
}

// isScheduleFlagged reports whether raw is a schedule row, whose flags say
// what it holds.
func isScheduleFlagged(raw []byte) bool {
	return len(raw) >= 2 && raw[0] == scheduleCodecV3
}

// impliesFire reports whether the row of the one-off sc can hold its fire
// f: f's id is model.FireID of sc's id and version and f's fire time, so
// the row gives it, and f is not being emitted (Remaining 0: no
// fires_emitting entry) and keeps no trace context. Such a fire has no row of its own and no
// fires_by_schedule entry until it changes or the schedule's row does
// (spillFire); getFire, FireList and FireLatestBefore read it from the
// row.
func impliesFire(sc *model.Schedule, f *model.Fire) bool {
	if sc.RunAt == nil || f.ScheduleID != sc.ID || f.Remaining != 0 || f.Watched || f.Deadline != nil || f.DeadlineMissed != nil || f.TraceParent != "" {
		return false
	}
	var buf [64]byte
	return string(model.AppendFireID(buf[:0], sc.ID, sc.Version, f.FireTime)) == f.ID
}

// encodeScheduleFire is encodeScheduleRow with the fire f (impliesFire)
// held in the row as its last field (encodeRowFire).
func encodeScheduleFire(sc *model.Schedule, child *model.Child, f *model.Fire, c rowCodes) ([]byte, error) {
	b, err := encodeScheduleRow(sc, child, c)
	if err != nil {
		return nil, err
	}
	b[1] |= schedFire // in the first byte of the flags, after the version
	return putBytes(b, encodeRowFire(sc, f)), nil
}

// Flags of a fire held in its schedule's row.
const (
	rowFireTenant     = 1 << iota // the tenant is not the schedule's: stored
	rowFireLocal                  // the local time is not the fire time in UTC (localLayout): stored
	rowFireTimeAbs                // the fire time is stored in full, not from the schedule's runAt
	rowFireCreatedAbs             // the creation time is stored in full, not from the schedule's
	rowFireJitter                 // the jitter offset follows the creation time
	rowFirePayload                // the fire's own payload follows (the jitter)
)

// encodeRowFire encodes the fire f that the row of sc holds, against that
// row: its id and schedule are the row's (impliesFire), its tenant
// usually, its fire time and creation time as nanoseconds from runAt and
// the schedule's creation time; Remaining is 0.
func encodeRowFire(sc *model.Schedule, f *model.Fire) []byte {
	var flags uint64
	if f.TenantID != sc.TenantID {
		flags |= rowFireTenant
	}
	if !isUTCLocal(f) {
		flags |= rowFireLocal
	}
	if _, ok := timeDelta(*sc.RunAt, f.FireTime); !ok {
		flags |= rowFireTimeAbs
	}
	if _, ok := timeDelta(sc.CreatedAt, f.CreatedAt); !ok {
		flags |= rowFireCreatedAbs
	}
	if f.Jitter != 0 {
		flags |= rowFireJitter
	}
	if f.Payload != nil {
		flags |= rowFirePayload
	}
	b := binary.AppendUvarint(make([]byte, 0, 16+len(f.Note)), flags)
	if flags&rowFireTenant != 0 {
		b = putStr(b, f.TenantID)
	}
	b = putTimeFrom(b, *sc.RunAt, f.FireTime)
	if flags&rowFireLocal != 0 {
		b = putStr(b, f.LocalTime)
	}
	b = binary.AppendVarint(b, int64(f.Count))
	b = putEnum(b, string(f.Decision), enumDecision)
	b = putStr(b, f.Note)
	b = putTimeFrom(b, sc.CreatedAt, f.CreatedAt)
	if flags&rowFireJitter != 0 {
		b = putDuration(b, f.Jitter)
	}
	if flags&rowFirePayload != 0 {
		b = putBytes(b, f.Payload)
	}
	return b
}

// timeDelta returns t - from when from plus it gives t back exactly (both
// set, within a Duration of each other).
func timeDelta(from, t time.Time) (time.Duration, bool) {
	if from.IsZero() || t.IsZero() {
		return 0, false
	}
	d := t.Sub(from)
	return d, from.Add(d).Equal(t)
}

// putTimeFrom appends t as nanoseconds from base when timeDelta allows
// it, else in full: the row's flags say which (d.timeFrom reads it back).
func putTimeFrom(b []byte, base, t time.Time) []byte {
	if delta, ok := timeDelta(base, t); ok {
		return binary.AppendVarint(b, int64(delta))
	}
	return putTime(b, t)
}

// rowFlags returns the flags of the schedule row raw (isScheduleFlagged);
// 0 for other rows.
func rowFlags(raw []byte) uint64 {
	if !isScheduleFlagged(raw) {
		return 0
	}
	flags, n := binary.Uvarint(raw[1:])
	if n <= 0 {
		return 0
	}
	return flags
}

// rowHasFire reports, without decoding it, whether the schedule row raw
// holds its fire.
func rowHasFire(raw []byte) bool { return rowFlags(raw)&schedFire != 0 }

// decodeRowFire returns the fire that the row of sc holds, from its
// encoding raw (encodeRowFire).
func decodeRowFire(sc *model.Schedule, raw []byte) (*model.Fire, error) {
	if sc.RunAt == nil {
		return nil, errors.New("a fire in the row of a schedule without runAt")
	}
	d := decoder{b: raw}
	flags := d.uvarint()
	f := &model.Fire{ScheduleID: sc.ID, TenantID: sc.TenantID}
	if flags&rowFireTenant != 0 {
		f.TenantID = d.str()
	}
	f.FireTime = d.timeFrom(flags&rowFireTimeAbs != 0, *sc.RunAt)
	if flags&rowFireLocal != 0 {
		f.LocalTime = d.str()
	} else {
		f.LocalTime = f.FireTime.Format(localLayout)
	}
	f.Count = int(d.varint())
	f.Decision = model.FireDecision(d.enum(enumDecision))
	f.Note = d.str()
	f.CreatedAt = d.timeFrom(flags&rowFireCreatedAbs != 0, sc.CreatedAt)
	if flags&rowFireJitter != 0 {
		f.Jitter = time.Duration(d.varint())
	}
	if flags&rowFirePayload != 0 {
		f.Payload = d.bytes()
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("fire in the row: %w", d.err)
	}
	f.ID = model.FireID(sc.ID, sc.Version, f.FireTime)
	return f, nil
}

// soleChild returns the child of children that a row of sc can hold
// inline: the only one, of sc's id, tenant, version and partition, so that
// the row gives all of its key but its timezone, launch expression and
// minute. Such a child has no entry in children_by_schedule; the row stands
// for it (see putChildren and dropSoleChild). nil otherwise.
func soleChild(sc *model.Schedule, children []model.Child) *model.Child {
	if len(children) != 1 {
		return nil
	}
	c := &children[0]
	if c.ScheduleID != sc.ID || c.TenantID != sc.TenantID || c.ScheduleVersion != sc.Version || c.Partition != sc.Partition {
		return nil
	}
	return c
}

// splitOrigin splits url into its origin, scheme "://" authority, which
// the origin dictionary holds, and the rest, when it has one that is worth
// a code: a scheme of RFC 3986, a non-empty authority without userinfo
// (credentials are not kept in a dictionary that outlives the schedule)
// and not too long. origin + rest is url.
func splitOrigin(url string) (origin, rest string, ok bool) {
	const maxOrigin = 128
	i := strings.Index(url, "://")
	if i <= 0 || !isScheme(url[:i]) {
		return "", "", false
	}
	end := len(url)
	if j := strings.IndexAny(url[i+3:], "/?#"); j >= 0 {
		end = i + 3 + j
	}
	if end == i+3 || end > maxOrigin || strings.IndexByte(url[i+3:end], '@') >= 0 {
		return "", "", false
	}
	return url[:end], url[end:], true
}

// isScheme reports whether s is a URI scheme: a letter, then letters,
// digits, "+", "-" and ".".
func isScheme(s string) bool {
	for i := range len(s) {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

func encodeSchedule(sc *model.Schedule, c rowCodes) ([]byte, error) {
	return encodeScheduleRow(sc, nil, c)
}

// encodeScheduleRow encodes sc with child (nil: none) inline, with the
// codes of c.
func encodeScheduleRow(sc *model.Schedule, child *model.Child, c rowCodes) ([]byte, error) {
	tenant, err := c.code(dictTenant, sc.TenantID)
	if err != nil {
		return nil, err
	}
	var flags uint64
	origin, rest, split := splitOrigin(sc.Target.URL)
	var originCode []byte
	if split {
		if originCode, err = c.code(dictOrigin, origin); err != nil {
			return nil, err
		}
	} else {
		flags |= schedURLWhole
	}
	if sameTime(sc.UpdatedAt, sc.CreatedAt) {
		flags |= schedUpdatedIsCreated
	}
	if child != nil {
		flags |= schedSoleChild
		if sc.RunAt != nil && *child == model.OneOffChild(sc) {
			flags |= schedChildOfRunAt
		}
	}
	if sc.RunAt != nil {
		flags |= schedRunAt
		if _, ok := timeDelta(sc.CreatedAt, *sc.RunAt); !ok {
			flags |= schedRunAtAbs
		}
	}
	var ext []byte
	if x, ok := extOf(sc); ok {
		flags |= schedExt
		if ext, err = json.Marshal(x); err != nil {
			return nil, fmt.Errorf("encode schedule %q: %w", sc.ID, err)
		}
	}
	b := make([]byte, 0, 64+len(sc.Name)+len(sc.Cron)+len(rest)+len(sc.Target.QueueURL)+len(sc.Payload))
	b = append(b, scheduleCodecV3)
	b = binary.AppendUvarint(b, flags)
	b = append(b, tenant...) // a uvarint: prefix-free
	b = putStr(b, sc.Name)
	b = putStr(b, sc.Cron)
	b = putEnum(b, sc.Timezone, enumTimezone)
	b = binary.AppendVarint(b, int64(sc.EventCount))
	b = putStr(b, sc.PolicyID)
	b = putDuration(b, sc.Window)
	b = putBool(b, sc.Spread)
	b = binary.AppendVarint(b, int64(sc.Priority))
	b = putEnum(b, string(sc.Target.Type), enumTarget)
	if split {
		b = putStr(append(b, originCode...), rest)
	} else {
		b = putStr(b, sc.Target.URL)
	}
	b = putStr(b, sc.Target.QueueURL)
	b = putBytes(b, sc.Payload)
	b = binary.AppendVarint(b, int64(sc.MaxAttempts))
	b = putTimePtr(b, sc.StartAt)
	b = putTimePtr(b, sc.EndAt)
	b = putEnum(b, string(sc.Misfire), enumMisfire)
	b = putEnum(b, string(sc.Overlap), enumOverlap)
	b = putEnum(b, string(sc.State), enumState)
	b = binary.AppendVarint(b, int64(sc.Partition))
	b = binary.AppendVarint(b, sc.Version)
	b = putTime(b, sc.CreatedAt)
	if flags&schedUpdatedIsCreated == 0 {
		b = putTime(b, sc.UpdatedAt)
	}
	if sc.RunAt != nil {
		b = putTimeFrom(b, sc.CreatedAt, *sc.RunAt)
	}
	if ext != nil {
		b = putBytes(b, ext)
	}
	if child != nil && flags&schedChildOfRunAt == 0 {
		b = putEnum(b, child.Timezone, enumTimezone)
		b = putStr(b, child.LaunchExpression)
		b = binary.AppendVarint(b, int64(child.Minute))
	}
	return b, nil
}

func decodeSchedule(id, raw []byte, c rowCodes) (*model.Schedule, error) {
	sc, _, _, _, err := decodeScheduleParts(id, raw, c)
	return sc, err
}

// decodeScheduleRow returns the schedule of a row and the child it holds
// inline (nil if none).
func decodeScheduleRow(id, raw []byte, c rowCodes) (*model.Schedule, *model.Child, error) {
	sc, child, _, _, err := decodeScheduleParts(id, raw, c)
	return sc, child, err
}

// decodeScheduleFire returns the schedule of a row, the child it holds
// inline and the fire it holds (nil if none).
func decodeScheduleFire(id, raw []byte, c rowCodes) (*model.Schedule, *model.Child, *model.Fire, error) {
	sc, child, fire, _, err := decodeScheduleParts(id, raw, c)
	if err != nil || fire == nil {
		return sc, child, nil, err
	}
	f, err := decodeRowFire(sc, fire)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("decode schedule %q: %w", id, err)
	}
	return sc, child, f, nil
}

// decodeScheduleParts returns the schedule of a row, the child it holds
// inline (nil if none) and the encodings of the fire and of the event it
// holds (nil if none). c maps the row's codes.
func decodeScheduleParts(id, raw []byte, c rowCodes) (*model.Schedule, *model.Child, []byte, []byte, error) {
	if len(raw) == 0 || raw[0] != scheduleCodecV3 {
		return nil, nil, nil, nil, fmt.Errorf("decode schedule %q: unknown row format", id)
	}
	sc := &model.Schedule{}
	d := decoder{b: raw[1:]}
	flags := d.uvarint()
	sc.ID = string(id)
	sc.TenantID = d.name(c, dictTenant)
	sc.Name = d.str()
	sc.Cron = d.str()
	sc.Timezone = d.enum(enumTimezone)
	sc.EventCount = int(d.varint())
	sc.PolicyID = d.str()
	sc.Window = time.Duration(d.varint())
	sc.Spread = d.bool()
	sc.Priority = int(d.varint())
	sc.Target.Type = model.TargetType(d.enum(enumTarget))
	if flags&schedURLWhole == 0 {
		origin := d.name(c, dictOrigin)
		sc.Target.URL = origin + string(d.raw())
	} else {
		sc.Target.URL = d.str()
	}
	sc.Target.QueueURL = d.str()
	if p := d.bytes(); len(p) > 0 {
		sc.Payload = json.RawMessage(p)
	}
	sc.MaxAttempts = int(d.varint())
	sc.StartAt = d.timePtr()
	sc.EndAt = d.timePtr()
	sc.Misfire = model.MisfirePolicy(d.enum(enumMisfire))
	sc.Overlap = model.OverlapPolicy(d.enum(enumOverlap))
	sc.State = model.ScheduleState(d.enum(enumState))
	sc.Partition = int(d.varint())
	sc.Version = d.varint()
	sc.CreatedAt = d.time()
	if flags&schedUpdatedIsCreated != 0 {
		sc.UpdatedAt = sc.CreatedAt
	} else {
		sc.UpdatedAt = d.time()
	}
	if flags&schedRunAt != 0 {
		t := d.timeFrom(flags&schedRunAtAbs != 0, sc.CreatedAt)
		sc.RunAt = &t
	}
	if flags&schedExt != 0 {
		var x scheduleExt
		if err := json.Unmarshal(d.bytes(), &x); err != nil && d.err == nil {
			d.err = fmt.Errorf("extension: %w", err)
		}
		x.apply(sc)
	}
	var child *model.Child
	switch {
	case flags&schedSoleChild == 0:
	case flags&schedChildOfRunAt != 0 && sc.RunAt != nil:
		c := model.OneOffChild(sc)
		child = &c
	case flags&schedChildOfRunAt != 0:
		d.err = errors.New("a one-off's child without runAt")
	default:
		child = &model.Child{
			ScheduleID: sc.ID, TenantID: sc.TenantID, ScheduleVersion: sc.Version, Partition: sc.Partition,
			Timezone: d.enum(enumTimezone), LaunchExpression: d.str(), Minute: int(d.varint()),
		}
	}
	// Not copied: decodeRowFire and decodeRowEvent copy what they keep.
	var fire, event []byte
	if flags&schedFire != 0 {
		fire = d.part("fire")
	}
	if flags&schedEvent != 0 {
		event = d.part("event")
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, nil, nil, nil, fmt.Errorf("decode schedule %q: %w", id, d.err)
	}
	return sc, child, fire, event, nil
}

// name reads a dictionary code (a uvarint) and returns its name in c.
func (d *decoder) name(c rowCodes, dk dictKind) string {
	b := d.b
	d.uvarint()
	if d.err != nil {
		return ""
	}
	s, err := c.name(dk, b[:len(b)-len(d.b)])
	if err != nil {
		d.err, d.b = err, nil
	}
	return s
}

// raw reads a uvarint-length string without copying it.
func (d *decoder) raw() []byte {
	l := d.uvarint()
	if uint64(len(d.b)) < l {
		d.fail()
		return nil
	}
	v := d.b[:l]
	d.b = d.b[l:]
	return v
}

// part reads a length-prefixed part of a row without copying it: the
// fire or the event that a schedule's row holds.
func (d *decoder) part(what string) []byte {
	l := d.uvarint()
	if d.err != nil {
		return nil
	}
	if l == 0 || uint64(len(d.b)) < l {
		d.err, d.b = fmt.Errorf("bad %s", what), nil
		return nil
	}
	p := d.b[:l]
	d.b = d.b[l:]
	return p
}

// Flags of a fire row.
const (
	fireSchedInID   = 1 << iota // the schedule id is the start of the fire id: its length is stored
	fireLocalIsUTC              // LocalTime is FireTime in UTC (localLayout) and is not stored
	fireJitter                  // the jitter offset follows the creation time
	firePayload                 // the fire's own payload follows (the jitter)
	fireDeadline                // the deadline and onDeadline follow (the payload)
	fireMissed                  // the deadline miss follows (the deadline)
	fireTraceParent             // the fire span's traceparent follows (the deadline miss)
)

// localLayout is the emitter's format of a fire's local time.
const localLayout = "2006-01-02T15:04:05.999Z07:00"

// isUTCLocal reports whether f's local time is its fire time in UTC
// (localLayout), formatted on the stack.
func isUTCLocal(f *model.Fire) bool {
	var buf [len(localLayout) + 8]byte
	return string(f.FireTime.UTC().AppendFormat(buf[:0], localLayout)) == f.LocalTime
}

func encodeFire(f *model.Fire) []byte {
	b := make([]byte, 0, 48+len(f.TenantID)+len(f.Note))
	var flags uint64
	if strings.HasPrefix(f.ID, f.ScheduleID+".") {
		flags |= fireSchedInID
	}
	if isUTCLocal(f) {
		flags |= fireLocalIsUTC
	}
	if f.Jitter != 0 {
		flags |= fireJitter
	}
	if f.Payload != nil {
		flags |= firePayload
	}
	if f.Deadline != nil {
		flags |= fireDeadline
	}
	if f.DeadlineMissed != nil {
		flags |= fireMissed
	}
	if f.TraceParent != "" {
		flags |= fireTraceParent
	}
	b = append(b, fireCodecV2)
	b = binary.AppendUvarint(b, flags)
	if flags&fireSchedInID != 0 {
		b = binary.AppendUvarint(b, uint64(len(f.ScheduleID)))
	} else {
		b = putStr(b, f.ScheduleID)
	}
	b = putStr(b, f.TenantID)
	b = putTime(b, f.FireTime)
	if flags&fireLocalIsUTC == 0 {
		b = putStr(b, f.LocalTime)
	}
	b = binary.AppendVarint(b, int64(f.Count))
	b = putEnum(b, string(f.Decision), enumDecision)
	b = putStr(b, f.Note)
	b = binary.AppendVarint(b, int64(f.Remaining))
	b = putTime(b, f.CreatedAt)
	if flags&fireJitter != 0 {
		b = putDuration(b, f.Jitter)
	}
	if flags&firePayload != 0 {
		b = putBytes(b, f.Payload)
	}
	if flags&fireDeadline != 0 {
		b = putTime(b, *f.Deadline)
		b = putStr(b, string(f.OnDeadline))
	}
	if flags&fireMissed != 0 {
		b = putTime(b, f.DeadlineMissed.At)
		b = binary.AppendVarint(b, int64(f.DeadlineMissed.Remaining))
	}
	if flags&fireTraceParent != 0 {
		b = putStr(b, f.TraceParent)
	}
	return b
}

func decodeFire(id, raw []byte) (*model.Fire, error) {
	if len(raw) == 0 || raw[0] != fireCodecV2 {
		return nil, fmt.Errorf("decode fire %q: unknown row format", id)
	}
	f := &model.Fire{}
	d := decoder{b: raw[1:]}
	flags := d.uvarint()
	f.ID = string(id)
	if flags&fireSchedInID != 0 {
		if n := d.uvarint(); n < uint64(len(id)) {
			f.ScheduleID = string(id[:n])
		} else if d.err == nil {
			d.err = fmt.Errorf("schedule id of %d bytes in a fire id of %d", n, len(id))
		}
	} else {
		f.ScheduleID = d.str()
	}
	f.TenantID = d.str()
	f.FireTime = d.time()
	if flags&fireLocalIsUTC != 0 {
		f.LocalTime = f.FireTime.Format(localLayout)
	} else {
		f.LocalTime = d.str()
	}
	f.Count = int(d.varint())
	f.Decision = model.FireDecision(d.enum(enumDecision))
	f.Note = d.str()
	f.Remaining = int(d.varint())
	f.CreatedAt = d.time()
	if flags&fireJitter != 0 {
		f.Jitter = time.Duration(d.varint())
	}
	if flags&firePayload != 0 {
		f.Payload = d.bytes()
	}
	if flags&fireDeadline != 0 {
		t := d.time()
		f.Deadline, f.OnDeadline = &t, model.DeadlinePolicy(d.str())
	}
	if flags&fireMissed != 0 {
		f.DeadlineMissed = &model.DeadlineMiss{At: d.time()}
		f.DeadlineMissed.Remaining = int(d.varint())
	}
	if flags&fireTraceParent != 0 {
		f.TraceParent = d.str()
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode fire %q: %w", id, d.err)
	}
	return f, nil
}

// getSchedule returns the schedule id; model.ErrNotFound if there is none.
func getSchedule(r *rowDict, id []byte) (*model.Schedule, error) {
	raw := r.tx.Bucket(bSchedules).Get(schedKey(string(id)))
	if raw == nil {
		return nil, model.ErrNotFound
	}
	return decodeSchedule(id, raw, r)
}

// getFire returns the fire id, stored in its row or in its schedule's
// (impliesFire); model.ErrNotFound if there is none.
func getFire(r *rowDict, id []byte) (*model.Fire, error) {
	raw := r.tx.Bucket(bFires).Get(id)
	if raw == nil {
		return rowFire(r, string(id))
	}
	f, err := decodeFire(id, raw)
	if err == nil {
		fillWatch(r.tx, f)
	}
	return f, err
}

// rowFire returns the fire id that its schedule's row holds;
// model.ErrNotFound if there is none. The schedule is one of those
// fireScheduleIDs names.
func rowFire(r *rowDict, id string) (*model.Fire, error) {
	b := r.tx.Bucket(bSchedules)
	for _, sid := range fireScheduleIDs(id) {
		raw := b.Get(schedKey(sid))
		if !rowHasFire(raw) {
			continue
		}
		_, _, f, err := decodeScheduleFire([]byte(sid), raw, r)
		if err != nil {
			return nil, err
		}
		if f.ID == id {
			return f, nil
		}
	}
	return nil, model.ErrNotFound
}

// fireExists reports whether fire id is stored, in its row or its
// schedule's.
func fireExists(r *rowDict, id string) (bool, error) {
	if r.tx.Bucket(bFires).Get([]byte(id)) != nil {
		return true, nil
	}
	switch _, err := rowFire(r, id); err {
	case nil:
		return true, nil
	case model.ErrNotFound:
		return false, nil
	default:
		return false, err
	}
}

// getScheduleInto is getSchedule into *dst.
func getScheduleInto(r *rowDict, id []byte, dst *model.Schedule) error {
	sc, err := getSchedule(r, id)
	if err != nil {
		return err
	}
	*dst = *sc
	return nil
}

// getFireInto is getFire into *dst.
func getFireInto(r *rowDict, id []byte, dst *model.Fire) error {
	f, err := getFire(r, id)
	if err != nil {
		return err
	}
	*dst = *f
	return nil
}

func putFire(tx *bolt.Tx, f *model.Fire) error {
	return tx.Bucket(bFires).Put([]byte(f.ID), encodeFire(f))
}
