package mongotest

import (
	"slices"
	"strings"
	"testing"
)

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"NoPath", "mongodb://127.0.0.1:27017", "mongodb://127.0.0.1:27017/db1"},
		{"RootPath", "mongodb://127.0.0.1:27017/", "mongodb://127.0.0.1:27017/db1"},
		{"ReplacesPathKeepsQuery", "mongodb://u:p@h1,h2/old?replicaSet=rs0&authSource=admin", "mongodb://u:p@h1,h2/db1?replicaSet=rs0&authSource=admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := WithDatabase(tc.in, "db1")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDatabaseName(t *testing.T) {
	t.Parallel()
	t.Run("Unique/and:odd chars with a name that is much longer than sixty-three characters", func(t *testing.T) {
		a, b := DatabaseName(t), DatabaseName(t)
		if a == b {
			t.Fatalf("two calls gave the same name %s", a)
		}
		for _, n := range []string{a, b} {
			if len(n) > 63 || strings.ContainsAny(n, "/\\. \"$*<>:|?") {
				t.Fatalf("bad database name %q", n)
			}
		}
	})
}

func TestLogRing(t *testing.T) {
	t.Parallel()
	r := newLogRing(3)
	write := func(s string) {
		t.Helper()
		if _, err := r.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	write("a\n")
	m := r.mark()
	write("b\nc\n")
	write("level=WARN msg=\"no such command: 'endSessions'\"\n")
	write("d\n")
	if got, want := r.since(m), []string{"b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("since mark: got %q, want %q", got, want)
	}
	write("e\n")
	if got, want := r.since(m), []string{"c", "d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("since mark after overflow: got %q, want %q", got, want)
	}
}

// TestURI checks that the shared server hands out separate databases.
func TestURI(t *testing.T) {
	t.Parallel()
	a, b := URI(t), URI(t)
	if a == b {
		t.Fatalf("two calls gave the same URI %s", a)
	}
}
