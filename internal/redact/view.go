package redact

import (
	"math"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxLayers bounds how many layers of escaping are undone: two covers a
// percent-encoded URL inside a JSON string, or a URL inside a URL's query;
// three leaves a margin.
const maxLayers = 3

// maxUnit is the longest source of one decoded byte ("&#x00002F;"): the
// longest text one occurrence of an n-byte form can take after one layer
// of escaping is maxUnit*n.
const maxUnit = 10

// view is a text with one more layer of escapes decoded than its parent,
// and the way back from its positions to the parent's.
type view struct {
	text   string
	marks  []mark // the escapes decoded into text, in order
	parent *view  // nil for the original text
}

// mark is one decoded escape: text[at:at+n] in the view came from
// parent.text[from:from+size]. (int32: a body is far below 2 GiB, and a
// text full of escapes has a mark every few bytes.)
type mark struct {
	at, from int32
	n, size  uint8
}

// decodeLayer undoes one layer of escapes in s. With plus, "+" is a space
// too (form encoding); without, it is itself, since a "+" in a secret is
// more often a "+" (base64) than an encoded space. ok is false when s
// holds no escape.
func decodeLayer(s string, plus bool) (text string, marks []mark, ok bool) {
	specials := `\%&`
	if plus {
		specials += "+"
	}
	if len(s) > math.MaxInt32 || !strings.ContainsAny(s, specials) {
		return s, nil, false // (past 2 GiB only the raw text is searched)
	}
	var b strings.Builder
	b.Grow(len(s))
	// At most one mark per special character: growing the slice by
	// appending would copy it over and over on a big body.
	room := 0
	for i := 0; i < len(specials); i++ {
		room += strings.Count(s, specials[i:i+1])
	}
	marks = make([]mark, 0, room)
	var buf [utf8.UTFMax]byte
	last := 0
	for {
		j := strings.IndexAny(s[last:], specials)
		if j < 0 {
			b.WriteString(s[last:])
			break
		}
		j += last
		b.WriteString(s[last:j])
		d, n := unit(s, j, plus, &buf)
		if n == 1 && d[0] == s[j] {
			b.WriteByte(s[j])
			last = j + 1
			continue
		}
		marks = append(marks, mark{at: int32(b.Len()), from: int32(j), n: uint8(len(d)), size: uint8(n)})
		b.Write(d)
		last = j + n
	}
	if len(marks) == 0 {
		return s, nil, false
	}
	return b.String(), marks, true
}

// unit decodes the escape starting at s[i], returning its bytes (in buf)
// and its length in s; anything that is not a complete escape is the byte
// itself, length 1.
func unit(s string, i int, plus bool, buf *[utf8.UTFMax]byte) ([]byte, int) {
	one := func(c byte, n int) ([]byte, int) {
		buf[0] = c
		return buf[:1], n
	}
	char := func(r rune, n int) ([]byte, int) {
		if r > utf8.MaxRune || utf16.IsSurrogate(r) {
			return one(s[i], 1)
		}
		return buf[:utf8.EncodeRune(buf[:], r)], n
	}
	switch s[i] {
	case '\\':
		if i+1 >= len(s) {
			break
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/', '\'':
			return one(e, 2)
		case 'b':
			return one('\b', 2)
		case 'f':
			return one('\f', 2)
		case 'n':
			return one('\n', 2)
		case 'r':
			return one('\r', 2)
		case 't':
			return one('\t', 2)
		case 'x':
			if h, ok := hexValue(s, i+2, 2); ok {
				return one(byte(h), 4)
			}
		case 'u':
			r, ok := hexValue(s, i+2, 4)
			if !ok {
				break
			}
			if utf16.IsSurrogate(rune(r)) {
				// JSON writes a character outside the BMP as a pair.
				if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
					if lo, ok := hexValue(s, i+8, 4); ok {
						if c := utf16.DecodeRune(rune(r), rune(lo)); c != utf8.RuneError {
							return char(c, 12)
						}
					}
				}
				break
			}
			return char(rune(r), 6)
		}
	case '%':
		if h, ok := hexValue(s, i+1, 2); ok {
			return one(byte(h), 3)
		}
	case '&':
		if r, n := entity(s[i:]); n > 0 {
			return char(r, n)
		}
	case '+':
		if plus {
			return one(' ', 1)
		}
	}
	return one(s[i], 1)
}

// entity decodes an HTML character reference at the start of s: the five
// XML named ones and numeric ones (at most 7 digits, so that a reference
// is at most maxUnit long).
func entity(s string) (rune, int) {
	for _, e := range []struct {
		name string
		r    rune
	}{{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}} {
		if strings.HasPrefix(s, e.name) {
			return e.r, len(e.name)
		}
	}
	if len(s) < 4 || s[1] != '#' {
		return 0, 0
	}
	base, start, most := 10, 2, 7
	if s[2] == 'x' || s[2] == 'X' {
		base, start, most = 16, 3, 6
	}
	r := 0
	for j := start; j < len(s) && j < start+most+1; j++ {
		c := s[j]
		if c == ';' && j > start {
			return rune(r), j + 1
		}
		d := digit(c)
		if d < 0 || d >= base || j == start+most {
			return 0, 0
		}
		r = r*base + d
	}
	return 0, 0
}

// hexValue reads n hex digits at s[i:].
func hexValue(s string, i, n int) (int, bool) {
	if i+n > len(s) {
		return 0, false
	}
	v := 0
	for j := i; j < i+n; j++ {
		d := digit(s[j])
		if d < 0 || d > 15 {
			return 0, false
		}
		v = v<<4 | d
	}
	return v, true
}

func digit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// source maps the range [start, end) of v's text back to the original
// text, widening it to whole escapes.
func (v *view) source(start, end int) (int, int) {
	for ; v.parent != nil; v = v.parent {
		start = v.back(start, false)
		end = v.back(end-1, true)
	}
	return start, end
}

// back maps position p of v's text to its parent's: with last, to the end
// of what the byte at p came from; otherwise to its start.
func (v *view) back(p int, last bool) int {
	k := sort.Search(len(v.marks), func(k int) bool { return int(v.marks[k].at) > p }) - 1
	if k < 0 {
		if last {
			return p + 1
		}
		return p
	}
	m := v.marks[k]
	at, n, from, size := int(m.at), int(m.n), int(m.from), int(m.size)
	if p < at+n { // inside a decoded escape: all of it
		if last {
			return from + size
		}
		return from
	}
	q := from + size + (p - at - n)
	if last {
		return q + 1
	}
	return q
}
