package main

import (
	"strings"
	"testing"
)

// FuzzNotifyOf: a --notify value is refused or makes one receiver with
// one address and its kinds, the address being what follows the first
// '=' (less "sqs:" for a queue).
func FuzzNotifyOf(f *testing.F) {
	for _, s := range []string{"fire.finished=https://ops.example.com/h", "a,b=sqs:https://sqs.x/1/q", "=x", "k=", "no-equals", "k=a=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := notifyOf([]string{v})
		if err != nil {
			return
		}
		if got == nil || len(*got) != 1 {
			t.Fatalf("%q: %v", v, got)
		}
		n := (*got)[0]
		kinds, addr, _ := strings.Cut(v, "=")
		if len(n.On) != len(strings.Split(kinds, ",")) {
			t.Fatalf("%q: kinds %v", v, n.On)
		}
		switch {
		case n.Url != nil && n.QueueUrl == nil:
			if *n.Url != addr {
				t.Fatalf("%q: url %q", v, *n.Url)
			}
		case n.QueueUrl != nil && n.Url == nil:
			if "sqs:"+*n.QueueUrl != addr {
				t.Fatalf("%q: queue %q", v, *n.QueueUrl)
			}
		default:
			t.Fatalf("%q: %+v", v, n)
		}
	})
}
