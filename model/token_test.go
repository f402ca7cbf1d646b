package model

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestDeliveryTokenRoundTrip(t *testing.T) {
	const secret = "0123abcd"
	for _, f := range []int64{0, 1, 42, 1 << 40} {
		for _, a := range []int{0, 1, 6} {
			e := &Event{ReleaseToken: secret, Fence: f, Attempts: a}
			tok := DeliveryToken(e)
			fence, attempt, ok := MatchDeliveryToken(secret, tok)
			wantAttempt := a + 1
			if f == 0 {
				wantAttempt = 0
			}
			if !ok || fence != f || attempt != wantAttempt {
				t.Errorf("fence %d attempts %d: %q matched %d, %d, %v", f, a, tok, fence, attempt, ok)
			}
			if f != 0 && strings.Contains(tok, secret) {
				t.Errorf("fence %d attempts %d: %q shows the secret", f, a, tok)
			}
			if _, _, ok := MatchDeliveryToken("another", tok); ok {
				t.Errorf("%q matches another secret", tok)
			}
		}
	}
	if got := DeliveryToken(&Event{ReleaseToken: "ab", Fence: 3, Attempts: 1}); !strings.HasSuffix(got, ".3.2") {
		t.Errorf("DeliveryToken = %q, want it to end in .3.2 (second attempt under fence 3)", got)
	}
}

// TestCopyTagIsHMAC: appendCopyTag's HMAC on stack buffers is crypto/hmac's.
func TestCopyTagIsHMAC(t *testing.T) {
	for _, secret := range []string{"", "0123abcd", strings.Repeat("k", 64), strings.Repeat("long", 40)} {
		for _, suffix := range []string{"3.1", "1099511627776.1073741824"} {
			m := hmac.New(sha256.New, []byte(secret))
			m.Write([]byte(copyTagLabel + suffix))
			if got, want := string(appendCopyTag(nil, secret, []byte(suffix))), hex.EncodeToString(m.Sum(nil)[:16]); got != want {
				t.Errorf("appendCopyTag(%q, %q) = %s, want %s", secret, suffix, got, want)
			}
		}
	}
}

// TestMatchDeliveryTokenRefusesOtherCopies: the token of one copy, its
// tag given another copy's fence or attempt, is no token of the event;
// tokens of the forms older versions issued (the secret itself, with or
// without fence and attempt) still match, for Superseded to judge.
func TestMatchDeliveryTokenRefusesOtherCopies(t *testing.T) {
	const secret = "0123abcd"
	tok := DeliveryToken(&Event{ReleaseToken: secret, Fence: 3, Attempts: 0})
	tag := strings.TrimSuffix(tok, ".3.1")
	for _, forged := range []string{tag + ".4.1", tag + ".3.2", tag + ".3", tag, tag + ".3.1.1"} {
		if f, a, ok := MatchDeliveryToken(secret, forged); ok {
			t.Errorf("%q, made from the token of copy 3.1, matches as copy %d.%d", forged, f, a)
		}
	}
	for _, legacy := range []struct {
		tok     string
		fence   int64
		attempt int
	}{{secret, 0, 0}, {secret + ".3", 3, 0}, {secret + ".3.1", 3, 1}} {
		if f, a, ok := MatchDeliveryToken(secret, legacy.tok); !ok || f != legacy.fence || a != legacy.attempt {
			t.Errorf("%q matched %d, %d, %v; want %d, %d, true", legacy.tok, f, a, ok, legacy.fence, legacy.attempt)
		}
	}
	if _, _, ok := MatchDeliveryToken("", ""); ok {
		t.Error("an empty token matches an event without a secret")
	}
}

func TestParseDeliveryToken(t *testing.T) {
	// A token of the older form <secret>.<fence>.
	if s, f, a := ParseDeliveryToken("abc.7"); s != "abc" || f != 7 || a != 0 {
		t.Errorf("abc.7 parsed %q, %d, %d", s, f, a)
	}
	// Not a fence: the whole token is the secret.
	for _, tok := range []string{"abc", "abc.", "abc.x", "abc.-1", "abc.0", "a.b.c"} {
		if secret, fence, attempt := ParseDeliveryToken(tok); fence != 0 || attempt != 0 || secret != tok {
			t.Errorf("%q: parsed %q, %d, %d; want the token itself and 0, 0", tok, secret, fence, attempt)
		}
	}
}

func TestSuperseded(t *testing.T) {
	// The event under fence 5 after two attempts finished: the third is
	// delivering, or delivered (it counted then).
	delivering := &Event{Fence: 5, Attempts: 2, Status: EventDelivering}
	delivered := &Event{Fence: 5, Attempts: 3, Status: EventDelivered}
	retrying := &Event{Fence: 5, Attempts: 3, Status: EventRetrying}
	cases := []struct {
		name    string
		e       *Event
		fence   int64
		attempt int
		want    bool
	}{
		{"current copy, delivering", delivering, 5, 3, false},
		{"current copy, delivered", delivered, 5, 3, false},
		{"earlier attempt, same fence", delivering, 5, 2, true},
		{"earlier attempt, delivered", delivered, 5, 2, true},
		{"attempt 3 timed out, retry not sent", retrying, 5, 3, true},
		{"older fence", delivered, 4, 3, true},
		{"older fence, no attempt", delivered, 4, 0, true},
		{"no fence, no attempt", delivered, 0, 0, true},
		{"fence only", delivered, 5, 0, true},
		{"attempt only", delivered, 0, 3, true},
		{"newer fence than stored", delivered, 6, 3, true},
		{"later attempt than current", delivering, 5, 4, true},
		{"never fenced, no suffix", &Event{Attempts: 1, Status: EventDelivered}, 0, 0, false},
	}
	for _, c := range cases {
		if got := Superseded(c.e, c.fence, c.attempt); got != c.want {
			t.Errorf("%s: Superseded = %v, want %v", c.name, got, c.want)
		}
	}
}

func FuzzParseDeliveryToken(f *testing.F) {
	for _, s := range []string{"", "abc", "abc.7", "abc.7.2", "abc.", ".5", "a.b.9", "x.99999999999999999999", "x.1.99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		secret, fence, attempt := ParseDeliveryToken(tok)
		if fence < 0 || attempt < 0 {
			t.Fatalf("negative fence %d or attempt %d", fence, attempt)
		}
		if fence == 0 && (secret != tok || attempt != 0) {
			t.Fatalf("no fence but secret %q != token %q or attempt %d", secret, tok, attempt)
		}
		if fence > 0 && !strings.HasPrefix(tok, secret+".") {
			t.Fatalf("secret %q is not the token's head (%q)", secret, tok)
		}
		// An event without a release token is never released by a token.
		if _, _, ok := MatchDeliveryToken("", tok); ok {
			t.Fatalf("token %q matched an empty secret", tok)
		}
		if fence > 0 && attempt > 0 && secret != "" && !strings.Contains(secret, ".") {
			canon := DeliveryToken(&Event{ReleaseToken: secret, Fence: fence, Attempts: attempt - 1})
			if f2, a2, ok := MatchDeliveryToken(secret, canon); !ok || f2 != fence || a2 != attempt {
				t.Fatalf("round trip of %q: %q -> %d, %d, %v", tok, canon, f2, a2, ok)
			}
			// The tag stands where the secret would; a short secret can
			// appear in the hex tag by chance.
			if tag, _, _ := strings.Cut(canon, "."); tag == secret || len(secret) >= 16 && strings.Contains(tag, secret) {
				t.Fatalf("delivery token %q shows the secret %q", canon, secret)
			}
		}
	})
}
