package embedded

import (
	"bytes"
	"iter"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
)

// Schedule ids in keys: the schedules bucket and the
// tenant index (schedules_by_tcode, after the tenant code) name a schedule
// id of the API's form (model.ParseID) by
// impliedPacked and the 10 bytes its text stands for, as the due entries
// of events held in rows do (appendImpliedKey), and any other id as it is,
// NUL-terminated in the tenant index. An id whose first byte could be
// taken for a mark (0xfe or above, never in UTF-8) is stored after
// impliedMark. Packed ids sort among themselves as their texts do; the
// tenant index is walked in id order by merging the two forms
// (tenantSchedules).

// appendSchedKey appends the key of schedule id in the schedules bucket.
func appendSchedKey(b []byte, id string) []byte {
	if k := appendImpliedKey(b, id); k[len(b)] == impliedPacked {
		return k
	}
	if id != "" && id[0] >= impliedPacked {
		return append(append(b, impliedMark), id...)
	}
	return append(b, id...)
}

func schedKey(id string) []byte { return appendSchedKey(nil, id) }

// schedKeyID returns the schedule id of the key k (appendSchedKey).
func schedKeyID(k []byte) string {
	if len(k) > 0 && k[0] >= impliedPacked {
		return impliedScheduleID(k)
	}
	return string(k)
}

// appendTenantSched appends the part of a tenant index key that names
// schedule id: its schedKey, NUL-terminated unless packed.
func appendTenantSched(b []byte, id string) []byte {
	n := len(b)
	b = appendSchedKey(b, id)
	if len(b) > n && b[n] == impliedPacked {
		return b
	}
	return append(b, 0)
}

// tenantSchedID returns the schedule id that rest, a tenant index key
// after its tenant code, names (appendTenantSched).
func tenantSchedID(rest []byte) string {
	if len(rest) == 11 && rest[0] == impliedPacked {
		return impliedScheduleID(rest)
	}
	k, _ := readStr(rest)
	return schedKeyID([]byte(k))
}

// tenantSchedules walks the tenant index entries under prefix (a tenant's
// code) in the order of their schedule ids, from the first id at or after
// from (all of them for ""), yielding each id and the entry's value. The
// packed ids are a range of their own between the ids stored as they are
// and the escaped ones; the walk merges it with the others.
func tenantSchedules(b *bolt.Bucket, prefix []byte, from string) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		packedAt := append(bytes.Clone(prefix), impliedPacked)
		escapedAt := append(bytes.Clone(prefix), impliedMark)
		plain, packed := b.Cursor(), b.Cursor()
		// Where from's entry would be if it were stored as it is.
		start := bytes.Clone(prefix)
		if from != "" && from[0] >= impliedPacked {
			start = append(start, impliedMark)
		}
		qk, qv := plain.Seek(appendStr(start, from))
		var pk, pv []byte
		if lo, ok := packedFrom(from); ok {
			pk, pv = packed.Seek(append(packedAt, lo...))
		}
		for {
			if qk != nil && bytes.HasPrefix(qk, packedAt) {
				qk, qv = plain.Seek(escapedAt)
			}
			qok := qk != nil && bytes.HasPrefix(qk, prefix)
			pok := pk != nil && bytes.HasPrefix(pk, packedAt)
			var qid, pid string
			if qok {
				qid = tenantSchedID(qk[len(prefix):])
			}
			if pok {
				pid = tenantSchedID(pk[len(prefix):])
			}
			switch {
			case pok && (!qok || pid < qid):
				if !yield(pid, pv) {
					return
				}
				pk, pv = packed.Next()
			case qok:
				if !yield(qid, qv) {
					return
				}
				qk, qv = plain.Next()
			default:
				return
			}
		}
	}
}

// packedFrom returns the 10 bytes of the least id of the master's form
// that sorts at or after from; false if none does.
func packedFrom(from string) ([]byte, bool) {
	rest, ok := strings.CutPrefix(from, model.PrefixSchedule)
	if !ok {
		if from < model.PrefixSchedule {
			return make([]byte, 10), true
		}
		return nil, false
	}
	const alphabet = model.IDAlphabet
	text := make([]byte, 0, 16)
	i := 0
	for ; i < len(rest) && i < 16 && strings.IndexByte(alphabet, rest[i]) >= 0; i++ {
		text = append(text, rest[i])
	}
	// After text, every character is the least ('2') unless rest's next
	// one sorts above some or all of the alphabet.
	switch {
	case i == len(rest), i < 16 && rest[i] < alphabet[0]:
	case i < 16 && rest[i] < 'a':
		text = append(text, 'a') // between '7' and 'a'
	default:
		// Above 'z', or more than 16 characters: after every id that
		// starts with text.
		for len(text) > 0 && text[len(text)-1] == 'z' {
			text = text[:len(text)-1]
		}
		if len(text) == 0 {
			return nil, false
		}
		c := &text[len(text)-1]
		*c = alphabet[strings.IndexByte(alphabet, *c)+1]
	}
	for len(text) < 16 {
		text = append(text, alphabet[0])
	}
	raw := make([]byte, 10)
	if _, err := model.IDText.Decode(raw, text); err != nil {
		return nil, false // not reached: text is 16 characters of the alphabet
	}
	return raw, true
}
