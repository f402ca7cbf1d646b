package embedded

import (
	"encoding/binary"
	"fmt"
)

// memCodes is a rowCodes in memory for the codec's tests: codes given out
// in order from 1, as the buckets' sequences do.
type memCodes struct {
	codes  [dictKinds]map[string][]byte
	names  [dictKinds]map[string]string
	tokens *tokenKey // nil: derives no token
}

func (m *memCodes) tokenKey() *tokenKey { return m.tokens }

func (m *memCodes) code(d dictKind, name string) ([]byte, error) {
	if c, ok := m.codes[d][name]; ok {
		return c, nil
	}
	if m.codes[d] == nil {
		m.codes[d], m.names[d] = map[string][]byte{}, map[string]string{}
	}
	c := binary.AppendUvarint(nil, uint64(len(m.codes[d])+1))
	m.codes[d][name], m.names[d][string(c)] = c, name
	return c, nil
}

func (m *memCodes) name(d dictKind, code []byte) (string, error) {
	if s, ok := m.names[d][string(code)]; ok {
		return s, nil
	}
	return "", fmt.Errorf("%s code %x: none", dicts[d].what, code)
}

// must returns v, and panics on err: for encodings that cannot fail.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
