// Package jsoncheck holds the two byte-level checks of request bodies that
// github.com/go-json-experiment/json does not make: the nesting depth of a
// body, bounded before anything decodes it, and the date-time format of the
// API description.
package jsoncheck

// TooDeep reports whether the objects and arrays of body nest deeper than
// maxDepth levels, in one pass over its bytes. Brackets inside strings do not
// count; a malformed body is left to the decoders, which stop at the first
// error. jsontext has no such bound of its own (it nests up to 10,000
// levels), and reading a body token by token to count is the cost the
// bound is there to avoid.
func TooDeep(body []byte, maxDepth int) bool {
	depth, inString := 0, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > maxDepth {
				return true
			}
		case '}', ']':
			depth = max(depth-1, 0) // a stray one: the decoders stop there
		}
	}
	return false
}

// DateTime reports whether s matches openapi3.FormatOfStringDateTime, the
// pattern of kin-openapi's date-time format, without a regexp:
// [0-9]{4}-(0[1-9]|10|11|12)-(0[1-9]|[12][0-9]|3[01])T([0-1][0-9]|2[0-3]):
// [0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|(\+|-)[0-9]{2}:[0-9]{2}), whole.
// time.Parse accepts more (one-digit hours, say).
func DateTime(s []byte) bool {
	digit := func(i int) bool { return i < len(s) && s[i] >= '0' && s[i] <= '9' }
	at := func(i int, c byte) bool { return i < len(s) && s[i] == c }
	if len(s) < 20 || !digit(0) || !digit(1) || !digit(2) || !digit(3) || !at(4, '-') ||
		!digit(5) || !digit(6) || !at(7, '-') || !digit(8) || !digit(9) || !at(10, 'T') ||
		!digit(11) || !digit(12) || !at(13, ':') || !digit(14) || !digit(15) || !at(16, ':') ||
		!digit(17) || !digit(18) {
		return false
	}
	month := int(s[5]-'0')*10 + int(s[6]-'0')
	day := int(s[8]-'0')*10 + int(s[9]-'0')
	hour := int(s[11]-'0')*10 + int(s[12]-'0')
	sec := int(s[17]-'0')*10 + int(s[18]-'0')
	if month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || s[14] > '5' || sec > 60 {
		return false
	}
	i := 19
	if at(i, '.') {
		i++
		if !digit(i) {
			return false
		}
		for digit(i) {
			i++
		}
	}
	switch {
	case at(i, 'Z'):
		i++
	case at(i, '+') || at(i, '-'):
		if !digit(i+1) || !digit(i+2) || !at(i+3, ':') || !digit(i+4) || !digit(i+5) {
			return false
		}
		i += 6
	default:
		return false
	}
	return i == len(s)
}
