package model

import (
	"encoding/json"
	"testing"
)

func TestConcurrencyKeyOf(t *testing.T) {
	payload := json.RawMessage(`{"customerId":"c-7","n":42,"a/b":"slash","t~x":"tilde","list":["x","y"],"obj":{"id":"deep"},"nul":null}`)
	cases := []struct{ key, want string }{
		{"", ""},
		{"scheduleId", "sch-1"},
		{"/customerId", "c-7"},
		{"/n", "42"},
		{"/a~1b", "slash"},
		{"/t~0x", "tilde"},
		{"/list/1", "y"},
		{"/list/01", ""},
		{"/list/9", ""},
		{"/obj/id", "deep"},
		{"/obj", `{"id":"deep"}`},
		{"/missing", ""},
		{"/nul", ""},
		{"/customerId/x", ""},
	}
	for _, c := range cases {
		if got := ConcurrencyKeyOf(c.key, "sch-1", payload); got != c.want {
			t.Errorf("ConcurrencyKeyOf(%q) = %q, want %q", c.key, got, c.want)
		}
	}
	if got := ConcurrencyKeyOf("/customerId", "sch-1", json.RawMessage(`not json`)); got != "" {
		t.Errorf("non-JSON payload: got %q, want \"\"", got)
	}
}

func TestCheckConcurrencyKey(t *testing.T) {
	for _, k := range []string{"", "scheduleId", "/a", "/a~0b~1c", "/"} {
		if err := CheckConcurrencyKey(k); err != nil {
			t.Errorf("%q refused: %v", k, err)
		}
	}
	for _, k := range []string{"customerId", "/a~", "/a~2", "#/a"} {
		if CheckConcurrencyKey(k) == nil {
			t.Errorf("%q accepted", k)
		}
	}
}

func TestTokenCap(t *testing.T) {
	if c := (&Policy{MaxInFlight: 5}).TokenCap(); c != 5 {
		t.Errorf("unkeyed: %d", c)
	}
	if c := (&Policy{MaxInFlight: 5, ConcurrencyKey: "/k", MaxInFlightTotal: 12}).TokenCap(); c != 12 {
		t.Errorf("keyed with total: %d", c)
	}
	if c := (&Policy{MaxInFlight: 5, ConcurrencyKey: "/k"}).TokenCap(); c <= 1<<20 {
		t.Errorf("keyed without total: %d", c)
	}
}
