package model

import (
	"strings"
	"testing"
)

func TestDeliveryTokenRoundTrip(t *testing.T) {
	for _, f := range []int64{0, 1, 42, 1 << 40} {
		e := &Event{ReleaseToken: "0123abcd", Fence: f}
		secret, fence := ParseDeliveryToken(DeliveryToken(e))
		if secret != e.ReleaseToken || fence != f {
			t.Errorf("fence %d: parsed %q, %d", f, secret, fence)
		}
	}
	// Not a fence: the whole token is the secret.
	for _, tok := range []string{"abc", "abc.", "abc.x", "abc.-1", "abc.0", "a.b.c"} {
		if secret, fence := ParseDeliveryToken(tok); fence != 0 || secret != tok {
			t.Errorf("%q: parsed %q, %d; want the token itself and 0", tok, secret, fence)
		}
	}
}

func FuzzParseDeliveryToken(f *testing.F) {
	for _, s := range []string{"", "abc", "abc.7", "abc.", ".5", "a.b.9", "x.99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		secret, fence := ParseDeliveryToken(tok)
		if fence < 0 {
			t.Fatalf("negative fence %d", fence)
		}
		if fence == 0 && secret != tok {
			t.Fatalf("no fence but secret %q != token %q", secret, tok)
		}
		if fence > 0 {
			if !strings.HasPrefix(tok, secret+".") {
				t.Fatalf("secret %q is not the token's head (%q)", secret, tok)
			}
			if got := DeliveryToken(&Event{ReleaseToken: secret, Fence: fence}); got != tok && !strings.HasPrefix(tok[len(secret)+1:], "+") && !strings.HasPrefix(tok[len(secret)+1:], "0") {
				t.Fatalf("round trip %q -> %q", tok, got)
			}
		}
	})
}
