package httpdelivery_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
)

func TestSign(t *testing.T) {
	t.Run("KnownVector", func(t *testing.T) {
		// printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac secret
		got := httpdelivery.Sign([]byte("secret"), 1700000000, []byte(`{"a":1}`))
		want := "v1=49f24e537407743fa4a0242bb63b94b9a47ee99cbbe071ccd8a22550ae411686"
		if got != want {
			t.Fatalf("Sign = %q, want %q", got, want)
		}
	})
}

func TestVerify(t *testing.T) {
	secret := []byte("s3cret")
	body := []byte(`{"eventId":"e1"}`)
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := httpdelivery.Sign(secret, now.Unix(), body)
	other := httpdelivery.Sign([]byte("old-secret"), now.Unix(), body)

	for _, tc := range []struct {
		name    string
		secret  []byte
		header  string
		ts      string
		body    []byte
		now     time.Time
		wantErr error
	}{
		{"Valid", secret, sig, ts, body, now, nil},
		{"ValidWithinTolerance", secret, sig, ts, body, now.Add(4 * time.Minute), nil},
		{"ValidAmongRotatedSignatures", secret, other + ", " + sig, ts, body, now, nil},
		{"IgnoresUnknownVersions", secret, "v0=abc," + sig, ts, body, now, nil},
		{"WrongSecret", []byte("nope"), sig, ts, body, now, httpdelivery.ErrSignatureMismatch},
		{"TamperedBody", secret, sig, ts, []byte(`{"eventId":"e2"}`), now, httpdelivery.ErrSignatureMismatch},
		{"TamperedTimestamp", secret, sig, strconv.FormatInt(now.Unix()+1, 10), body, now, httpdelivery.ErrSignatureMismatch},
		{"StaleTimestamp", secret, sig, ts, body, now.Add(6 * time.Minute), httpdelivery.ErrTimestampOutOfTolerance},
		{"FutureTimestamp", secret, sig, ts, body, now.Add(-6 * time.Minute), httpdelivery.ErrTimestampOutOfTolerance},
		{"MalformedTimestamp", secret, sig, "yesterday", body, now, httpdelivery.ErrMalformedSignature},
		{"EmptyHeader", secret, "", ts, body, now, httpdelivery.ErrMalformedSignature},
		{"NoV1Signature", secret, "sha256=abcd", ts, body, now, httpdelivery.ErrMalformedSignature},
		{"ShortSignature", secret, "v1=abcd", ts, body, now, httpdelivery.ErrMalformedSignature},
		{"NotHex", secret, "v1=" + string(make([]byte, 64)), ts, body, now, httpdelivery.ErrMalformedSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := httpdelivery.Verify(tc.secret, tc.header, tc.ts, tc.body, tc.now, 5*time.Minute)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.wantErr)
			}
		})
	}

	t.Run("ZeroToleranceSkipsTimestampCheck", func(t *testing.T) {
		if err := httpdelivery.Verify(secret, sig, ts, body, now.Add(24*time.Hour), 0); err != nil {
			t.Fatalf("Verify = %v, want nil", err)
		}
	})
}

// FuzzVerify feeds arbitrary headers and timestamps to Verify: it must never
// panic, and must accept exactly the signature Sign produced.
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
		err := httpdelivery.Verify(secret, header, ts, body, now, time.Hour)
		if err != nil && !errors.Is(err, httpdelivery.ErrMalformedSignature) &&
			!errors.Is(err, httpdelivery.ErrSignatureMismatch) && !errors.Is(err, httpdelivery.ErrTimestampOutOfTolerance) {
			t.Fatalf("Verify returned an undocumented error: %v", err)
		}
		if sec, perr := strconv.ParseInt(ts, 10, 64); perr == nil && strconv.FormatInt(sec, 10) == ts {
			good := httpdelivery.Sign(secret, sec, body)
			if err := httpdelivery.Verify(secret, good, ts, body, time.Unix(sec, 0), time.Minute); err != nil {
				t.Fatalf("Verify(Sign(%d)) = %v, want nil", sec, err)
			}
		}
	})
}
