package emitter

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

func TestKeyCache(t *testing.T) {
	t.Run("HoldsTheExpressionsChildrenKeys", func(t *testing.T) {
		var c keyCache
		ks, err := c.get("0 3 * * 1,5")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for k := range ks {
			got = append(got, k.String())
		}
		slices.Sort(got)
		if want := []string{"W:1:03@00", "W:5:03@00"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("keys %v, want %v", got, want)
		}
	})
	t.Run("ParsesAnExpressionOnce", func(t *testing.T) {
		var c keyCache
		a, err := c.get("*/20 9 * * *")
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.get("*/20 9 * * *")
		if err != nil {
			t.Fatal(err)
		}
		if c.misses != 1 || reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
			t.Fatalf("%d parses; same set: %v", c.misses, reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer())
		}
	})
	t.Run("RejectsAnInvalidExpressionWithoutHoldingIt", func(t *testing.T) {
		var c keyCache
		if _, err := c.get("0 24 * * *"); err == nil {
			t.Fatal("no error")
		}
		if len(c.sets) != 0 || c.held != 0 {
			t.Fatalf("holds %d sets, %d keys", len(c.sets), c.held)
		}
	})
	t.Run("StaysWithinItsBound", func(t *testing.T) {
		var c keyCache
		n := 0
		for m := 1; m <= 12 && n*60 <= 2*keyCacheMax; m++ {
			for d := 1; d <= 28; d++ {
				for h := range 24 {
					if _, err := c.get(fmt.Sprintf("* %d %d %d *", h, d, m)); err != nil {
						t.Fatal(err)
					}
					n++
				}
			}
		}
		sum := 0
		for _, ks := range c.sets {
			sum += len(ks)
		}
		if c.held != sum || c.held > keyCacheMax || c.held < keyCacheMax-60 {
			t.Fatalf("held %d, sets hold %d, bound %d, after %d expressions", c.held, sum, keyCacheMax, n)
		}
	})
}
