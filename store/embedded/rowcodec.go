package embedded

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// Schedules and fires are stored in a binary form (the JSON of earlier
// layouts spent most of a row on field names). A row starts with its codec
// version; rows of earlier layouts are JSON objects and start with '{', and
// are still read. The id is the row's key and is not repeated in the value.
// The primitives are eventcodec.go's: uvarint-length strings, varints,
// presence-byte times read back in UTC.
const (
	scheduleCodecV1 = 0x01
	fireCodecV1     = 0x01
)

func putDuration(b []byte, d time.Duration) []byte { return binary.AppendVarint(b, int64(d)) }

func encodeSchedule(sc *model.Schedule) []byte {
	b := make([]byte, 0, 96+len(sc.TenantID)+len(sc.Name)+len(sc.Cron)+len(sc.Target.URL)+len(sc.Target.QueueURL)+len(sc.Payload))
	b = append(b, scheduleCodecV1)
	b = putStr(b, sc.TenantID)
	b = putStr(b, sc.Name)
	b = putStr(b, sc.Cron)
	b = putTimePtr(b, sc.RunAt)
	b = putStr(b, sc.Timezone)
	b = binary.AppendVarint(b, int64(sc.EventCount))
	b = putStr(b, sc.PolicyID)
	b = putDuration(b, sc.Window)
	b = putBool(b, sc.Spread)
	b = binary.AppendVarint(b, int64(sc.Priority))
	b = putStr(b, string(sc.Target.Type))
	b = putStr(b, sc.Target.URL)
	b = putStr(b, sc.Target.QueueURL)
	b = putBytes(b, sc.Payload)
	b = binary.AppendVarint(b, int64(sc.MaxAttempts))
	b = putTimePtr(b, sc.StartAt)
	b = putTimePtr(b, sc.EndAt)
	b = putStr(b, string(sc.Misfire))
	b = putStr(b, string(sc.Overlap))
	b = putStr(b, string(sc.State))
	b = binary.AppendVarint(b, int64(sc.Partition))
	b = binary.AppendVarint(b, sc.Version)
	b = putTime(b, sc.CreatedAt)
	return putTime(b, sc.UpdatedAt)
}

func decodeSchedule(id, raw []byte) (*model.Schedule, error) {
	sc := &model.Schedule{}
	if len(raw) > 0 && raw[0] == '{' {
		if err := jsonUnmarshal(raw, sc); err != nil {
			return nil, err
		}
		return sc, nil
	}
	if len(raw) == 0 || raw[0] != scheduleCodecV1 {
		return nil, fmt.Errorf("decode schedule %q: unknown row format", id)
	}
	d := decoder{b: raw[1:]}
	sc.ID = string(id)
	sc.TenantID = d.str()
	sc.Name = d.str()
	sc.Cron = d.str()
	sc.RunAt = d.timePtr()
	sc.Timezone = d.str()
	sc.EventCount = int(d.varint())
	sc.PolicyID = d.str()
	sc.Window = time.Duration(d.varint())
	sc.Spread = d.bool()
	sc.Priority = int(d.varint())
	sc.Target.Type = model.TargetType(d.str())
	sc.Target.URL = d.str()
	sc.Target.QueueURL = d.str()
	if p := d.bytes(); len(p) > 0 {
		sc.Payload = json.RawMessage(p)
	}
	sc.MaxAttempts = int(d.varint())
	sc.StartAt = d.timePtr()
	sc.EndAt = d.timePtr()
	sc.Misfire = model.MisfirePolicy(d.str())
	sc.Overlap = model.OverlapPolicy(d.str())
	sc.State = model.ScheduleState(d.str())
	sc.Partition = int(d.varint())
	sc.Version = d.varint()
	sc.CreatedAt = d.time()
	sc.UpdatedAt = d.time()
	if d.err == nil && len(d.b) > 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode schedule %q: %w", id, d.err)
	}
	return sc, nil
}

func encodeFire(f *model.Fire) []byte {
	b := make([]byte, 0, 48+len(f.ScheduleID)+len(f.TenantID)+len(f.LocalTime)+len(f.Note))
	b = append(b, fireCodecV1)
	b = putStr(b, f.ScheduleID)
	b = putStr(b, f.TenantID)
	b = putTime(b, f.FireTime)
	b = putStr(b, f.LocalTime)
	b = binary.AppendVarint(b, int64(f.Count))
	b = putStr(b, string(f.Decision))
	b = putStr(b, f.Note)
	b = binary.AppendVarint(b, int64(f.Remaining))
	return putTime(b, f.CreatedAt)
}

func decodeFire(id, raw []byte) (*model.Fire, error) {
	f := &model.Fire{}
	if len(raw) > 0 && raw[0] == '{' {
		if err := jsonUnmarshal(raw, f); err != nil {
			return nil, err
		}
		return f, nil
	}
	if len(raw) == 0 || raw[0] != fireCodecV1 {
		return nil, fmt.Errorf("decode fire %q: unknown row format", id)
	}
	d := decoder{b: raw[1:]}
	f.ID = string(id)
	f.ScheduleID = d.str()
	f.TenantID = d.str()
	f.FireTime = d.time()
	f.LocalTime = d.str()
	f.Count = int(d.varint())
	f.Decision = model.FireDecision(d.str())
	f.Note = d.str()
	f.Remaining = int(d.varint())
	f.CreatedAt = d.time()
	if d.err == nil && len(d.b) > 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode fire %q: %w", id, d.err)
	}
	return f, nil
}

// getSchedule returns the schedule id; model.ErrNotFound if there is none.
func getSchedule(tx *bolt.Tx, id []byte) (*model.Schedule, error) {
	raw := tx.Bucket(bSchedules).Get(id)
	if raw == nil {
		return nil, model.ErrNotFound
	}
	return decodeSchedule(id, raw)
}

// getFire returns the fire id; model.ErrNotFound if there is none.
func getFire(tx *bolt.Tx, id []byte) (*model.Fire, error) {
	raw := tx.Bucket(bFires).Get(id)
	if raw == nil {
		return nil, model.ErrNotFound
	}
	return decodeFire(id, raw)
}

// getScheduleInto is getSchedule into *dst.
func getScheduleInto(tx *bolt.Tx, id []byte, dst *model.Schedule) error {
	sc, err := getSchedule(tx, id)
	if err != nil {
		return err
	}
	*dst = *sc
	return nil
}

// getFireInto is getFire into *dst.
func getFireInto(tx *bolt.Tx, id []byte, dst *model.Fire) error {
	f, err := getFire(tx, id)
	if err != nil {
		return err
	}
	*dst = *f
	return nil
}

func putFire(tx *bolt.Tx, f *model.Fire) error {
	return tx.Bucket(bFires).Put([]byte(f.ID), encodeFire(f))
}
