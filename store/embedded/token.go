package embedded

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Release tokens the store can give again: ReleaseToken derives an event's
// token from its id under a key the store keeps (the meta bucket's
// token_key, made when the store is created). A row whose event carries
// that token keeps a flag instead of the token's 16 bytes; any other token is stored as it is. The key never
// leaves the store file, so the tokens are as secret as random ones to
// anyone who cannot read it.

var keyTokenKey = []byte("token_key")

const tokenKeyLen = 32

// tokenKey derives release tokens: the first 16 bytes of HMAC-SHA256 of
// the event id. Safe for concurrent use.
type tokenKey struct {
	key  []byte
	macs sync.Pool // of hash.Hash keyed with key
}

func newTokenKey(key []byte) *tokenKey {
	k := &tokenKey{key: key}
	k.macs.New = func() any { return hmac.New(sha256.New, k.key) }
	return k
}

// appendToken appends the 16 bytes of eventID's token to dst.
func (k *tokenKey) appendToken(dst []byte, eventID string) []byte {
	h := k.macs.Get().(hash.Hash)
	h.Reset()
	_, _ = io.WriteString(h, eventID)
	var sum [sha256.Size]byte
	dst = append(dst, h.Sum(sum[:0])[:16]...)
	k.macs.Put(h)
	return dst
}

// derives reports whether token, the bytes of a release token's hex
// (tokenBytes), is eventID's token under k. A nil k derives none.
func (k *tokenKey) derives(eventID string, token []byte) bool {
	if k == nil || len(token) != 16 {
		return false
	}
	var buf [16]byte
	return hmac.Equal(k.appendToken(buf[:0], eventID), token)
}

// token returns eventID's token under k as text; an error for a nil k (a
// row that says its token is derived, read without the store's key).
func (k *tokenKey) token(eventID string) (string, error) {
	if k == nil {
		return "", errors.New("a derived release token without the store's key")
	}
	var buf [16]byte
	return hex.EncodeToString(k.appendToken(buf[:0], eventID)), nil
}

// ReleaseToken returns the release token of a new event with this id, as
// the emitter makes them (32 lower-case hex digits): rows keep it as a
// flag instead of its bytes.
func (s *Store) ReleaseToken(eventID string) string {
	t, _ := s.tokens.token(eventID)
	return t
}

// ensureTokenKey makes the store's token key if it has none.
func ensureTokenKey(tx *bolt.Tx) error {
	b := tx.Bucket(bMeta)
	if len(b.Get(keyTokenKey)) == tokenKeyLen {
		return nil
	}
	key := make([]byte, tokenKeyLen)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("make the token key: %w", err)
	}
	return b.Put(keyTokenKey, key)
}

// readTokenKey returns the token key of tx's store; nil if it has none.
func readTokenKey(tx *bolt.Tx) *tokenKey {
	key := tx.Bucket(bMeta).Get(keyTokenKey)
	if len(key) != tokenKeyLen {
		return nil
	}
	return newTokenKey(bytes.Clone(key)) // bbolt's memory map holds key for the transaction only
}
