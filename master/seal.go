package master

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
type sealer struct{ aead cipher.AEAD }

// newSealer derives the AES-256 key from secret with HMAC-SHA256, so that
// the secret may be one with another use (the signing secret). An empty
// secret gets a random key: records then replay only in this process.
func newSealer(secret []byte) (*sealer, error) {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("master: idempotency record key: %w", err)
		}
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("schedulerd idempotency record key v1"))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("master: idempotency record key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("master: idempotency record key: %w", err)
	}
	return &sealer{aead: aead}, nil
}

func recordAD(scope, key, requestHash string) []byte {
	return []byte(scope + "\x00" + key + "\x00" + requestHash)
}

func (s *sealer) seal(body []byte, scope, key, requestHash string) ([]byte, error) {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(body)+s.aead.Overhead())
	out[0] = sealedV1
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal idempotency record: %w", err)
	}
	return s.aead.Seal(out, out[1:], body, recordAD(scope, key, requestHash)), nil
}

func (s *sealer) open(stored []byte, scope, key, requestHash string) ([]byte, error) {
	if len(stored) == 0 || stored[0] != sealedV1 {
		return stored, nil // written in clear by an older version
	}
	n := s.aead.NonceSize()
	if len(stored) < 1+n {
		return nil, errUnsealable
	}
	body, err := s.aead.Open(nil, stored[1:1+n], stored[1+n:], recordAD(scope, key, requestHash))
	if err != nil {
		return nil, errUnsealable
	}
	return body, nil
}
