package defaults

import (
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	a, b := 0, 7
	Set(&a, 5)
	Set(&b, 5)
	d := time.Duration(0)
	Set(&d, time.Second)
	if a != 5 || b != 7 || d != time.Second {
		t.Fatalf("got %d %d %v, want 5 7 1s", a, b, d)
	}
}
