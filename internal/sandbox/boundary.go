package sandbox

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// MaxDepth is the deepest nesting of arrays and objects that crosses the
// data boundary, in either direction.
const MaxDepth = 32

// CheckData verifies JSON text against the data rules: well-formed,
// nested at most MaxDepth levels, and free of the keys __proto__,
// constructor and prototype (which change meaning inside a program).
// what names the value in the error ("the input").
//
// It scans the bytes once without allocating for valid input: it runs on
// every tool call's input and result.
func CheckData(raw []byte, what string) error {
	s := scanner{b: raw}
	s.space()
	if !s.value(0) {
		return s.err(what)
	}
	s.space()
	if s.i != len(s.b) {
		s.problem = "not valid JSON"
		return s.err(what)
	}
	return nil
}

type scanner struct {
	b       []byte
	i       int
	problem string
	path    []string // innermost last, filled while unwinding after a problem
}

func (s *scanner) err(what string) error {
	if s.problem == "" {
		s.problem = "not valid JSON"
	}
	at := ""
	if len(s.path) > 0 {
		var b strings.Builder
		for i := len(s.path) - 1; i >= 0; i-- {
			b.WriteString(s.path[i])
		}
		at = " at " + what + b.String()
	}
	switch {
	case strings.HasPrefix(s.problem, "uses"):
		return fmt.Errorf("%s %s%s; rename it", what, s.problem, at)
	case strings.HasPrefix(s.problem, "is nested"):
		return fmt.Errorf("%s %s%s", what, s.problem, at)
	}
	return fmt.Errorf("%s is %s", what, s.problem)
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) {
		s.problem = "truncated JSON"
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return false
}

func (s *scanner) nest(depth int) bool {
	if depth > MaxDepth {
		s.problem = fmt.Sprintf("is nested deeper than %d levels", MaxDepth)
		return false
	}
	return true
}

func (s *scanner) object(depth int) bool {
	if !s.nest(depth) {
		return false
	}
	s.i++ // {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.truncatedOr()
		}
		raw, escaped, ok := s.str()
		if !ok {
			return false
		}
		if key := reservedKey(raw, escaped); key != "" {
			s.problem = fmt.Sprintf("uses the reserved key %q", key)
			return false
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.truncatedOr()
		}
		s.i++
		s.space()
		if !s.value(depth) {
			if s.ruleBroken() {
				s.path = append(s.path, keyPath(decodeKey(raw, escaped)))
			}
			return false
		}
		if more, ok := s.afterElement('}'); !more {
			return ok
		}
	}
}

func (s *scanner) array(depth int) bool {
	if !s.nest(depth) {
		return false
	}
	s.i++ // [
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for n := 0; ; n++ {
		s.space()
		if !s.value(depth) {
			if s.ruleBroken() {
				s.path = append(s.path, "["+strconv.Itoa(n)+"]")
			}
			return false
		}
		if more, ok := s.afterElement(']'); !more {
			return ok
		}
	}
}

// afterElement consumes what follows an element: a comma (more) or the
// closing bracket (done, ok).
func (s *scanner) afterElement(closing byte) (more, ok bool) {
	s.space()
	if s.i >= len(s.b) {
		return false, s.truncatedOr()
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return true, true
	case closing:
		s.i++
		return false, true
	}
	return false, false
}

// ruleBroken reports a data-rule problem (as opposed to bad JSON), whose
// error names where it is.
func (s *scanner) ruleBroken() bool {
	return s.problem != "" && s.problem != "not valid JSON" && s.problem != "truncated JSON"
}

func (s *scanner) truncatedOr() bool {
	if s.i >= len(s.b) {
		s.problem = "truncated JSON"
	}
	return false
}

// str scans a string; raw is its text between the quotes.
func (s *scanner) str() (raw []byte, escaped, ok bool) {
	s.i++ // opening quote
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped, true
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				s.problem = "truncated JSON"
				return nil, false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if len(s.b)-s.i < 6 || !isHex(s.b[s.i+2]) || !isHex(s.b[s.i+3]) || !isHex(s.b[s.i+4]) || !isHex(s.b[s.i+5]) {
					return nil, false, false
				}
				s.i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			s.i++
		}
	}
	s.problem = "truncated JSON"
	return nil, false, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// reservedKey returns the key when it is reserved, else "". Comparing
// string(raw) does not allocate; only keys with escapes are decoded.
func reservedKey(raw []byte, escaped bool) string {
	k := ""
	if escaped {
		k = decodeKey(raw, true)
	} else {
		switch string(raw) {
		case "__proto__", "constructor", "prototype":
			k = string(raw)
		}
	}
	switch k {
	case "__proto__", "constructor", "prototype":
		return k
	}
	return ""
}

func decodeKey(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw)
	}
	var v string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	_ = json.Unmarshal(q, &v)
	return v
}

func (s *scanner) lit(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.truncatedOr()
	}
	s.i += len(word)
	return true
}

func (s *scanner) number() bool {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return s.truncatedOr()
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return s.truncatedOr()
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return s.truncatedOr()
		}
	}
	return s.i > start
}

// keyPath renders one object key of an error path.
func keyPath(key string) string {
	if isIdentifier(key) {
		return "." + key
	}
	q, _ := json.Marshal(key)
	return "[" + string(q) + "]"
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r == '$' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}
