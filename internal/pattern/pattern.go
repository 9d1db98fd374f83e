package pattern

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Glob reports whether s matches pattern, where '*' matches any run of
// characters (none included) and '?' exactly one; every other character,
// '/', '.', '[' and '\' included, matches itself.
func Glob(pattern, s string) bool {
	p, n := []rune(pattern), []rune(s)
	pi, ni := 0, 0
	star, mark := -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func wild(seg string) bool { return strings.ContainsAny(seg, "*?") }

// Pattern is a parsed tool-name pattern: a glob per segment.
type Pattern struct {
	text string
	segs []string
}

// ErrSyntax is wrapped by Parse's errors.
var ErrSyntax = errors.New("pattern: bad tool pattern")

// Parse reads a pattern written as a call site is, without "tools.":
// segments joined by dots ("orders.refund", "orders.*", "*.get*"), and a
// segment that holds dots or other characters written as a JSON string in
// brackets (`files["v1.get"]`, `ns["a/*"]`). Inside a segment '*' and '?'
// are wildcards.
func Parse(s string) (Pattern, error) {
	p := Pattern{text: s}
	rest := s
	for first := true; ; first = false {
		var seg string
		switch {
		case strings.HasPrefix(rest, "["):
			end := closingBracket(rest)
			if end < 0 {
				return Pattern{}, fmt.Errorf(`%w %q: a bracketed segment is a JSON string, as in ns["a.b"]`, ErrSyntax, s)
			}
			if err := json.Unmarshal([]byte(rest[1:end]), &seg); err != nil {
				return Pattern{}, fmt.Errorf(`%w %q: a bracketed segment is a JSON string, as in ns["a.b"]`, ErrSyntax, s)
			}
			rest = rest[end+1:]
		case !first && !strings.HasPrefix(rest, "."):
			return Pattern{}, fmt.Errorf("%w %q: segments are joined by dots", ErrSyntax, s)
		default:
			if !first {
				rest = rest[1:]
			}
			i := strings.IndexAny(rest, ".[")
			if i < 0 {
				i = len(rest)
			}
			seg, rest = rest[:i], rest[i:]
		}
		if seg == "" {
			return Pattern{}, fmt.Errorf("%w %q: an empty segment", ErrSyntax, s)
		}
		p.segs = append(p.segs, seg)
		if rest == "" {
			return p, nil
		}
	}
}

// closingBracket finds the ']' that ends the bracketed JSON string at the
// start of s, or -1.
func closingBracket(s string) int {
	if len(s) < 2 || s[1] != '"' {
		return -1
	}
	for i := 2; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			if i+1 < len(s) && s[i+1] == ']' {
				return i + 1
			}
			return -1
		}
	}
	return -1
}

// MustParse is Parse for patterns known to be valid; it panics otherwise.
func MustParse(s string) Pattern {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern as it was written.
func (p Pattern) String() string { return p.text }

// Segments returns how many segments the pattern has.
func (p Pattern) Segments() int { return len(p.segs) }

// Literal reports whether the pattern has no wildcard: it names one tool.
func (p Pattern) Literal() bool {
	for _, s := range p.segs {
		if wild(s) {
			return false
		}
	}
	return true
}

// Match reports whether the pattern matches a tool's path: as many
// segments, each matching its glob.
func (p Pattern) Match(path []string) bool {
	if len(path) != len(p.segs) {
		return false
	}
	for i, g := range p.segs {
		if !Glob(g, path[i]) {
			return false
		}
	}
	return true
}

// Within reports whether every path p matches is matched by q. It is
// conservative: when it cannot tell, it says false, so that a rule is
// treated as more specific than another only when it certainly is.
func (p Pattern) Within(q Pattern) bool {
	if len(p.segs) != len(q.segs) {
		return false
	}
	for i, a := range p.segs {
		b := q.segs[i]
		switch {
		case a == b, b == "*":
		case !wild(a) && Glob(b, a):
		default:
			return false
		}
	}
	return true
}

// MoreSpecific reports whether p is strictly more specific than q: every
// path p matches, q matches too, and not the other way round.
func (p Pattern) MoreSpecific(q Pattern) bool { return p.Within(q) && !q.Within(p) }
