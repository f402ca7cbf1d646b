package idempotency

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// sealedV1 starts a sealed idempotency record body: version 1 is AES-256-GCM,
// then the nonce, then the ciphertext. A JSON body never starts with it, so a
// record stored in clear by an older version is still replayed as it is.
const sealedV1 = 0x01

// errUnsealable: the record was sealed with another secret (the secret
// changed) or is damaged.
var errUnsealable = errors.New("idempotency record cannot be opened")

// sealer encrypts the answers kept in idempotency records: an answer may
// carry a secret (a new API key's clear key), which must not be at rest in
// clear. The additional data binds a body to its record, so a sealed body
// copied into another record does not open.
type sealer struct {
	// aeads are the keys of the current secret, then of each previous one:
	// records are sealed with the first and opened with any.
	aeads []cipher.AEAD
}

// newSealer derives the AES-256 keys from secret and the previous secrets
// with HMAC-SHA256, so that a secret may be one with another use (the
// signing secret). An empty secret gets a random key: records then replay
// only in this process.
func newSealer(secret []byte, previous [][]byte) (*sealer, error) {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("idempotency: record key: %w", err)
		}
	}
	s := &sealer{}
	for i, sec := range append([][]byte{secret}, previous...) {
		if len(sec) == 0 {
			return nil, fmt.Errorf("idempotency: previous secret %d: empty", i-1)
		}
		mac := hmac.New(sha256.New, sec)
		mac.Write([]byte("schedulerd idempotency record key v1"))
		block, err := aes.NewCipher(mac.Sum(nil))
		if err != nil {
			return nil, fmt.Errorf("idempotency: record key: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("idempotency: record key: %w", err)
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

func recordAD(scope, key, requestHash string) []byte {
	return []byte(scope + "\x00" + key + "\x00" + requestHash)
}

func (s *sealer) seal(body []byte, scope, key, requestHash string) ([]byte, error) {
	aead := s.aeads[0]
	out := make([]byte, 1+aead.NonceSize(), 1+aead.NonceSize()+len(body)+aead.Overhead())
	out[0] = sealedV1
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal idempotency record: %w", err)
	}
	return aead.Seal(out, out[1:], body, recordAD(scope, key, requestHash)), nil
}

func (s *sealer) open(stored []byte, scope, key, requestHash string) ([]byte, error) {
	if len(stored) == 0 || stored[0] != sealedV1 {
		return stored, nil // written in clear by an older version
	}
	ad := recordAD(scope, key, requestHash)
	for _, aead := range s.aeads {
		n := aead.NonceSize()
		if len(stored) < 1+n {
			return nil, errUnsealable
		}
		if body, err := aead.Open(nil, stored[1:1+n], stored[1+n:], ad); err == nil {
			return body, nil
		}
	}
	return nil, errUnsealable
}
