package cron

import (
	"strconv"
	"strings"
)

// dayLast is Key.Day for L (last day of the month).
const dayLast = 32

var (
	classNames = [...]string{ClassH: "H", ClassW: "W", ClassM: "M", ClassMO: "MO", ClassMM: "MM", ClassMW: "MW"}
	classParts = [...]int{ClassH: 2, ClassW: 3, ClassM: 3, ClassMO: 3, ClassMM: 4, ClassMW: 4}
)

// LaunchExpression renders the shard name of the key, e.g. "MW:01:0#3:09";
// the format is documented in the package doc. An invalid key renders as
// "invalid".
func (k Key) LaunchExpression() string {
	var buf [16]byte
	b, ok := k.appendLE(buf[:0])
	if !ok {
		return "invalid"
	}
	return string(b)
}

// String is LaunchExpression + "@" + two-digit minute, e.g. "H:*@05".
func (k Key) String() string {
	var buf [20]byte
	b, ok := k.appendLE(buf[:0])
	if !ok {
		return "invalid"
	}
	b = append(b, '@')
	return string(append2(b, int(k.Minute)))
}

func (k Key) appendLE(b []byte) ([]byte, bool) {
	if int(k.Class) >= len(classNames) || k.Class == 0 {
		return b, false
	}
	b = append(b, classNames[k.Class]...)
	b = append(b, ':')
	switch k.Class {
	case ClassMO, ClassMM, ClassMW:
		b = append2(b, int(k.Month))
		b = append(b, ':')
	}
	switch k.Class {
	case ClassM, ClassMM:
		if k.Day == dayLast {
			b = append(b, 'L')
		} else {
			b = append2(b, int(k.Day))
		}
		b = append(b, ':')
	case ClassW, ClassMW:
		b = append(b, byte('0'+k.Day))
		if k.Nth != 0 {
			b = append(b, '#', byte('0'+k.Nth))
		}
		b = append(b, ':')
	}
	if k.Hour < 0 {
		return append(b, '*'), true
	}
	return append2(b, int(k.Hour)), true
}

func append2(b []byte, v int) []byte { return append(b, byte('0'+v/10%10), byte('0'+v%10)) }

// ParseKey is the inverse of Key.LaunchExpression plus a minute. It accepts
// only the canonical spelling, so ParseKey(k.LaunchExpression(), m) == k.
func ParseKey(launchExpression string, minute int) (Key, error) {
	bad := func(reason string) (Key, error) {
		return Key{}, &Error{Field: "launchExpression", Token: launchExpression, Reason: reason}
	}
	if minute < 0 || minute > 59 {
		return Key{}, &Error{Field: "minute", Token: strconv.Itoa(minute), Reason: "is out of range 0-59"}
	}
	if len(launchExpression) > 16 {
		return bad("is too long")
	}
	parts := strings.Split(launchExpression, ":")
	var k Key
	k.Minute = int8(minute)
	for c, name := range classNames {
		if name != "" && name == parts[0] {
			k.Class = Class(c)
		}
	}
	if k.Class == 0 {
		return bad("has an unknown class (want H, W, M, MO, MM or MW)")
	}
	want := classParts[k.Class]
	if len(parts) != want {
		return bad("has " + strconv.Itoa(len(parts)) + " parts; want " + strconv.Itoa(want))
	}
	rest := parts[1 : len(parts)-1]
	if h := parts[len(parts)-1]; h == "*" {
		k.Hour = -1
	} else if v, ok := two(h, 0, 23); ok {
		k.Hour = int8(v)
	} else {
		return bad("needs an hour 00-23 or *")
	}
	if k.Class == ClassMO || k.Class == ClassMM || k.Class == ClassMW {
		v, ok := two(rest[0], 1, 12)
		if !ok {
			return bad("needs a month 01-12")
		}
		k.Month = int8(v)
		rest = rest[1:]
	}
	switch k.Class {
	case ClassM, ClassMM:
		if rest[0] == "L" {
			k.Day = dayLast
			break
		}
		v, ok := two(rest[0], 1, 31)
		if !ok {
			return bad("needs a day 01-31 or L")
		}
		if k.Class == ClassMM && v > maxDaysIn(int(k.Month)) {
			return bad("names a day that the month never has")
		}
		k.Day = int8(v)
	case ClassW, ClassMW:
		s := rest[0]
		if len(s) != 1 && len(s) != 3 || s[0] < '0' || s[0] > '6' {
			return bad("needs a weekday 0-6 or d#n")
		}
		k.Day = int8(s[0] - '0')
		if len(s) == 3 {
			if s[1] != '#' || s[2] < '1' || s[2] > '5' {
				return bad("needs a weekday 0-6 or d#n with n 1-5")
			}
			k.Nth = int8(s[2] - '0')
		}
	}
	return k, nil
}

// two parses exactly two ASCII digits within [lo, hi].
func two(s string, lo, hi int) (int, bool) {
	if len(s) != 2 || !isDigits(s) {
		return 0, false
	}
	v := int(s[0]-'0')*10 + int(s[1]-'0')
	return v, v >= lo && v <= hi
}
