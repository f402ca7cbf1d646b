package httpdelivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
)

// Header names of a delivery request.
const (
	HeaderEventID   = "X-Scheduler-Event-Id"
	HeaderTimestamp = "X-Scheduler-Timestamp"
	HeaderSignature = "X-Scheduler-Signature"
)

// signatureVersion prefixes each signature in the header so that the scheme
// can change later without breaking consumers that check v1.
const signatureVersion = "v1="

// Sign returns the X-Scheduler-Signature value of body sent at unix time ts:
// "v1=" followed by the hex HMAC-SHA256 under secret of "<ts>.<body>".
// The timestamp is part of the signed text so that a captured request cannot
// be replayed later with a fresh timestamp. Consumers check it with package
// consumer (consumer.Verifier).
func Sign(secret []byte, ts int64, body []byte) string {
	return signatureVersion + hex.EncodeToString(mac(secret, strconv.FormatInt(ts, 10), body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	return appendMAC(nil, hmac.New(sha256.New, secret), []byte(ts), body)
}

// appendMAC appends the MAC of "<ts>.<body>" under h, an HMAC-SHA256 under
// the signing secret (reset first, so that a pooled one serves).
func appendMAC(dst []byte, h hash.Hash, ts, body []byte) []byte {
	h.Reset()
	h.Write(ts)
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(dst)
}
