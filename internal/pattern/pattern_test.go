package pattern

import (
	"errors"
	"testing"
)

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "a/b", true},
		{"*", "x.y", true},
		{"get*", "getCustomer", true},
		{"get*", "forget", false},
		{"*get*", "forget", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a?c", "a\u202ec", true}, // '?' is one character, not one byte
		{"[ab]", "a", false},      // no character classes
		{"[ab]", "[ab]", true},
		{`a\*`, `a\bc`, true}, // no escapes: '\' is itself
		{"write_*", "write_file", true},
		{"*_file", "write_file", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
	} {
		if got := Glob(c.pattern, c.s); got != c.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

func TestParseAndMatch(t *testing.T) {
	for _, c := range []struct {
		pattern string
		path    []string
		want    bool
	}{
		{"evil.*", []string{"evil", "refund"}, true},
		{"evil.*", []string{"evil", "a/b"}, true},
		{"evil.*", []string{"evil", "x.y"}, true},
		{"evil.*", []string{"evil", "a", "b"}, false},
		{"*.get*", []string{"shop", "getCustomer"}, true},
		{`files["v1.get"]`, []string{"files", "v1.get"}, true},
		{`files["v1.get"]`, []string{"files", "v1", "get"}, false},
		{"files.v1.get", []string{"files", "v1.get"}, false},
		{`["a.b"]["c"]`, []string{"a.b", "c"}, true},
		{`ns["*"]`, []string{"ns", "anything"}, true},
		{"orders.refund", []string{"orders", "refund"}, true},
		{"orders.refund", []string{"orders", "refunds"}, false},
		{"*", []string{"orders", "refund"}, false},
	} {
		p, err := Parse(c.pattern)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.pattern, err)
		}
		if got := p.Match(c.path); got != c.want {
			t.Errorf("%q.Match(%q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
	for _, bad := range []string{"", ".", "a.", ".a", "a..b", `a["b`, `a[b]`, `a["b"]c`, `a[""]`, `a["\x"]`, `a["b"`} {
		if _, err := Parse(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q): %v, want ErrSyntax", bad, err)
		}
	}
}

func TestSpecificity(t *testing.T) {
	for _, c := range []struct {
		p, q string
		want bool // p strictly more specific than q
	}{
		{"shop.getCustomer", "shop.*", true},
		{"shop.get*", "shop.*", true},
		{"shop.*", "shop.get*", false},
		{"shop.*", "*.*", true},
		{"shop.*", "*.get*", false}, // neither covers the other
		{"*.get*", "shop.*", false},
		{"shop.*", "shop.*", false},
		{"shop.get*", "shop.g*", false}, // true, but not provable here: conservative
		{"a.b", "a.b.*", false},
		{"orders.refund", "*.refund", true},
	} {
		if got := MustParse(c.p).MoreSpecific(MustParse(c.q)); got != c.want {
			t.Errorf("%q more specific than %q: %v, want %v", c.p, c.q, got, c.want)
		}
	}
}
