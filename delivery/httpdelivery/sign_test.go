package httpdelivery_test

import (
	"testing"

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
