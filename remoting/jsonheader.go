package remoting

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// scanJSONHeader decodes the JSON header clients send on every request
// without reflection: one object of code, language, version, opaque, flag,
// remark (strings and integers as RocketMQ writes them), extFields (an
// object of strings) and other keys with string values. ok is false for
// anything else, a null, a duplicate field or a key that differs from a
// field's name only in case among them: encoding/json then decides
// (decodeJSONHeader). What it accepts it decodes as encoding/json decodes
// it into jsonHeaderFast (FuzzScanJSONHeader holds it to that).
func scanJSONHeader(b []byte) (h jsonHeaderFast, ok bool) {
	s := jsonScanner{b: b}
	if !s.next('{') {
		return h, false
	}
	if s.next('}') {
		return h, s.end()
	}
	var seen uint8
	for {
		key, ok := s.str()
		if !ok || !s.next(':') {
			return h, false
		}
		var bit uint8
		switch key {
		case "code":
			bit = 1
			h.Code, ok = s.int32()
		case "language":
			bit = 2
			h.Language, ok = s.str()
		case "version":
			bit = 4
			h.Version, ok = s.int32()
		case "opaque":
			bit = 8
			h.Opaque, ok = s.int32()
		case "flag":
			bit = 16
			h.Flag, ok = s.int32()
		case "remark":
			bit = 32
			h.Remark, ok = s.str()
		case "extFields":
			bit = 64
			h.ExtFields, ok = s.strMap()
		default:
			for _, f := range jsonHeaderFields {
				if strings.EqualFold(key, f) {
					return h, false // encoding/json matches names in any case
				}
			}
			_, ok = s.str()
		}
		if !ok || seen&bit != 0 {
			return h, false
		}
		seen |= bit
		if s.next('}') {
			return h, s.end()
		}
		if !s.next(',') {
			return h, false
		}
	}
}

var jsonHeaderFields = [...]string{"code", "language", "version", "opaque", "flag", "remark", "extFields"}

type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next consumes c, after white space, if it is there.
func (s *jsonScanner) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *jsonScanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// int32 reads an integer that fits 32 bits: no fraction, no exponent.
func (s *jsonScanner) int32() (int32, bool) {
	s.space()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || (s.b[digits] == '0' && s.i-digits > 1) {
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 32)
	return int32(n), err == nil
}

// str reads a string. It refuses invalid UTF-8 and escaped lone
// surrogates, which encoding/json replaces with U+FFFD.
func (s *jsonScanner) str() (string, bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return string(v), utf8.Valid(v)
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			return "", false
		}
		s.i++
	}
	return "", false
}

// escaped goes on reading the string that started at start from its first
// backslash (RocketMQ's properties separate their pairs with \u0001 and
// \u0002).
func (s *jsonScanner) escaped(start int) (string, bool) {
	out := make([]byte, s.i-start, s.i-start+32)
	copy(out, s.b[start:s.i])
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(out), utf8.Valid(out)
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return "", false
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if s.i+4 > len(s.b) {
				return "", false
			}
			n, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 16)
			if err != nil {
				return "", false
			}
			s.i += 4
			r := rune(n)
			if utf16.IsSurrogate(r) {
				return "", false
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return "", false
}

// strMap reads an object of strings.
func (s *jsonScanner) strMap() (map[string]string, bool) {
	if !s.next('{') {
		return nil, false
	}
	m := make(map[string]string, 8)
	if s.next('}') {
		return m, true
	}
	for {
		k, ok := s.str()
		if !ok || !s.next(':') {
			return nil, false
		}
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		m[k] = v
		if s.next('}') {
			return m, true
		}
		if !s.next(',') {
			return nil, false
		}
	}
}

// appendJSONHeader appends h as encoding/json marshals it, byte for byte
// (FuzzAppendJSONHeader holds it to that), without reflection: every
// answer's header is written through it.
func appendJSONHeader(b []byte, h *jsonHeader) []byte {
	b = strconv.AppendInt(append(b, `{"code":`...), int64(h.Code), 10)
	b = appendJSONString(append(b, `,"language":`...), h.Language)
	b = strconv.AppendInt(append(b, `,"version":`...), int64(h.Version), 10)
	b = strconv.AppendInt(append(b, `,"opaque":`...), int64(h.Opaque), 10)
	b = strconv.AppendInt(append(b, `,"flag":`...), int64(h.Flag), 10)
	if h.Remark != "" {
		b = appendJSONString(append(b, `,"remark":`...), h.Remark)
	}
	b = append(b, `,"extFields":`...)
	if h.ExtFields == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		for i, k := range slices.Sorted(maps.Keys(h.ExtFields)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = appendJSONString(append(b, ':'), h.ExtFields[k])
		}
		b = append(b, '}')
	}
	b = appendJSONString(append(b, `,"serializeTypeCurrentRPC":`...), h.SerializeTypeCurrentRPC)
	return append(b, '}')
}

// appendJSONString appends s quoted as encoding/json quotes it: HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
