package embedded

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
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
// that token keeps a flag instead of the token's 16 bytes; any other token
// is stored as it is. With Options.TokenKeySecrets the key is kept sealed (AES-256-GCM under a key
// derived from the first secret), so that the store file alone, a backup
// of it, does not give the key away; without them it is kept in clear.

var keyTokenKey = []byte("token_key")

const tokenKeyLen = 32

// sealedTokenKeyV1 starts a sealed token key: then the nonce and the
// sealed key. A key in clear is tokenKeyLen bytes without a version.
const sealedTokenKeyV1 = 0x01

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

// setupTokenKey returns the store's token key, made if it has none, and
// writes it back as secrets say: sealed under the first secret, or in
// clear without secrets. A key sealed under a later secret (a rotation) is
// sealed again under the first. A sealed key without secrets gives nil:
// the store then derives no tokens, and a row whose token is derived does
// not decode. An error if no secret opens the sealed key.
func setupTokenKey(tx *bolt.Tx, secrets [][]byte) (*tokenKey, error) {
	b := tx.Bucket(bMeta)
	raw := b.Get(keyTokenKey)
	var key []byte
	switch {
	case len(raw) == tokenKeyLen:
		key = bytes.Clone(raw) // bbolt's memory map holds raw for the transaction only
		if len(secrets) == 0 {
			return newTokenKey(key), nil
		}
	case isSealedTokenKey(raw):
		if len(secrets) == 0 {
			return nil, nil
		}
		var which int
		var err error
		if key, which, err = openTokenKey(raw, secrets); err != nil {
			return nil, err
		}
		if which == 0 {
			return newTokenKey(key), nil
		}
	default:
		key = make([]byte, tokenKeyLen)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("make the token key: %w", err)
		}
	}
	stored := key
	if len(secrets) > 0 {
		var err error
		if stored, err = sealTokenKey(key, secrets[0]); err != nil {
			return nil, err
		}
	}
	if err := b.Put(keyTokenKey, stored); err != nil {
		return nil, err
	}
	return newTokenKey(key), nil
}

// tokenKeyAEAD is the AES-256-GCM that seals the token key under secret.
func tokenKeyAEAD(secret []byte) (cipher.AEAD, error) {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("schedulerd release token key seal v1"))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("token key seal: %w", err)
	}
	return cipher.NewGCM(block)
}

func isSealedTokenKey(raw []byte) bool {
	const nonce, overhead = 12, 16
	return len(raw) == 1+nonce+tokenKeyLen+overhead && raw[0] == sealedTokenKeyV1
}

func sealTokenKey(key, secret []byte) ([]byte, error) {
	aead, err := tokenKeyAEAD(secret)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 1+aead.NonceSize(), 1+aead.NonceSize()+len(key)+aead.Overhead())
	out[0] = sealedTokenKeyV1
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal the token key: %w", err)
	}
	return aead.Seal(out, out[1:], key, keyTokenKey), nil
}

// openTokenKey opens a sealed token key with the first of secrets that
// does and says which.
func openTokenKey(raw []byte, secrets [][]byte) (key []byte, which int, err error) {
	for i, secret := range secrets {
		aead, err := tokenKeyAEAD(secret)
		if err != nil {
			return nil, 0, err
		}
		n := aead.NonceSize()
		if key, err := aead.Open(nil, raw[1:1+n], raw[1+n:], keyTokenKey); err == nil {
			return key, i, nil
		}
	}
	return nil, 0, ErrTokenKeySealed
}

// ErrTokenKeySealed: Open was given secrets of which none opens the
// store's sealed release-token key (the signing secret changed without the
// old one kept in the list).
var ErrTokenKeySealed = errors.New("no secret given opens the store's release-token key")
