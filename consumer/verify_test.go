package consumer_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
)

// TestVerify checks the Verifier against the scheduler's own signer.
func TestVerify(t *testing.T) {
	secret := []byte("s3cret")
	body := []byte(`{"eventId":"e1"}`)
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := httpdelivery.Sign(secret, now.Unix(), body)
	other := httpdelivery.Sign([]byte("old-secret"), now.Unix(), body)

	for _, tc := range []struct {
		name    string
		secrets []string
		header  string
		ts      string
		body    []byte
		now     time.Time
		want    error
	}{
		{"Valid", []string{"s3cret"}, sig, ts, body, now, nil},
		{"ValidWithinTolerance", []string{"s3cret"}, sig, ts, body, now.Add(4 * time.Minute), nil},
		{"ValidAmongRotatedSignatures", []string{"s3cret"}, other + ", " + sig, ts, body, now, nil},
		{"ValidUnderTheSecondSecret", []string{"new", "s3cret"}, sig, ts, body, now, nil},
		{"IgnoresUnknownVersions", []string{"s3cret"}, "v0=abc," + sig, ts, body, now, nil},
		{"NoSecrets", nil, sig, ts, body, now, consumer.ErrBadSignature},
		{"WrongSecret", []string{"nope"}, sig, ts, body, now, consumer.ErrBadSignature},
		{"TamperedBody", []string{"s3cret"}, sig, ts, []byte(`{"eventId":"e2"}`), now, consumer.ErrBadSignature},
		{"TamperedTimestamp", []string{"s3cret"}, sig, strconv.FormatInt(now.Unix()+1, 10), body, now, consumer.ErrBadSignature},
		{"MalformedTimestamp", []string{"s3cret"}, sig, "yesterday", body, now, consumer.ErrBadSignature},
		{"StaleTimestamp", []string{"s3cret"}, sig, ts, body, now.Add(6 * time.Minute), consumer.ErrStale},
		{"FutureTimestamp", []string{"s3cret"}, sig, ts, body, now.Add(-6 * time.Minute), consumer.ErrStale},
		{"NoTimestamp", []string{"s3cret"}, sig, "", body, now, consumer.ErrNoSignature},
		{"EmptyHeader", []string{"s3cret"}, "", ts, body, now, consumer.ErrNoSignature},
		{"NoV1Signature", []string{"s3cret"}, "sha256=abcd", ts, body, now, consumer.ErrNoSignature},
		{"ShortSignature", []string{"s3cret"}, "v1=abcd", ts, body, now, consumer.ErrNoSignature},
		{"NotHex", []string{"s3cret"}, "v1=" + string(make([]byte, 64)), ts, body, now, consumer.ErrNoSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := consumer.NewVerifier(tc.secrets...)
			v.Now = func() time.Time { return tc.now }
			signed, err := v.Verify(tc.header, tc.ts, tc.body)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if err == nil && !signed.Equal(now) {
				t.Fatalf("signed at %s, want %s", signed, now)
			}
		})
	}

	t.Run("NegativeToleranceSkipsTimestampCheck", func(t *testing.T) {
		v := &consumer.Verifier{Secrets: [][]byte{secret}, Tolerance: -1, Now: func() time.Time { return now.Add(24 * time.Hour) }}
		if _, err := v.Verify(sig, ts, body); err != nil {
			t.Fatalf("Verify = %v, want nil", err)
		}
	})
}

// FuzzVerify feeds arbitrary headers and timestamps to Verify: it must never
// panic, must fail only with a *SignatureError, and must accept exactly the
// signature the scheduler's Sign produced.
func FuzzVerify(f *testing.F) {
	secret := []byte("fuzz-secret")
	body := []byte(`{"eventId":"e1"}`)
	f.Add(httpdelivery.Sign(secret, 1700000000, body), "1700000000")
	f.Add("v1=", "0")
	f.Add("v1=zz,v1=", "-1")
	f.Add(",,,v1=00", "9223372036854775807")
	f.Add("v1="+string(make([]byte, 64)), "-9223372036854775808")
	f.Add("v0=abc, v1=ABCDEF", " 17 ")
	f.Add("\xff\xfe", "1e9")
	now := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, header, ts string) {
		v := &consumer.Verifier{Secrets: [][]byte{secret}, Tolerance: time.Hour, Now: func() time.Time { return now }}
		_, err := v.Verify(header, ts, body)
		var se *consumer.SignatureError
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("Verify returned an undocumented error: %v", err)
		}
		if sec, perr := strconv.ParseInt(ts, 10, 64); perr == nil && strconv.FormatInt(sec, 10) == ts {
			good := httpdelivery.Sign(secret, sec, body)
			v := &consumer.Verifier{Secrets: [][]byte{secret}, Tolerance: time.Minute, Now: func() time.Time { return time.Unix(sec, 0) }}
			if _, err := v.Verify(good, ts, body); err != nil {
				t.Fatalf("Verify(Sign(%d)) = %v, want nil", sec, err)
			}
		}
	})
}
