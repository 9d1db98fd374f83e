package spoof

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Find returns the byte offsets [i, j) of the first part of s that does
// not show as itself, or -1, -1 when there is none. A part is one
// character, or a sequence NFKC would change as a whole (a letter and its
// combining accents); a byte that is not UTF-8 is a part of its own.
func Find(s string) (i, j int) {
	if plain(s) {
		return -1, -1
	}
	for i := 0; i < len(s); {
		n, bad := segment(s[i:])
		if bad {
			return i, i + n
		}
		i += n
	}
	return -1, -1
}

// Escape returns s with every character of the parts Find reports written
// as a JavaScript escape: \u200b, \ud835\udc1a above U+FFFF, \n and its
// kin for the controls that have one; a byte that is not UTF-8 becomes
// \ufffd. Everything else is kept as it is, backslashes included, so
// Escape is for messages and logs; [Quote] makes a literal.
func Escape(s string) string {
	if plain(s) {
		return s
	}
	var b strings.Builder
	write(&b, s, false)
	return b.String()
}

// Quote returns s as a double-quoted string literal that means s both in
// JavaScript and in JSON: the parts Find reports escaped as [Escape]
// escapes them, and '"' and '\' escaped too. Other characters, non-ASCII
// letters included, are kept as they are, as encoding/json with
// SetEscapeHTML(false) keeps them.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	write(&b, s, true)
	b.WriteByte('"')
	return b.String()
}

// Runes lists the code points of a part Find reports, as U+200B (U+FFFD
// for a byte that is not UTF-8), for messages that name what was found.
func Runes(part string) string {
	var out []string
	for _, r := range part {
		out = append(out, fmt.Sprintf("U+%04X", r))
	}
	return strings.Join(out, " ")
}

// plain reports text that is printable ASCII only, the common case, which
// holds nothing to find.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// segment returns the length of the part at the start of s (up to NFKC's
// next boundary, so that a part is normalized on its own) and whether it
// does not show as itself.
func segment(s string) (n int, bad bool) {
	n = norm.NFKC.NextBoundaryInString(s, true)
	if n <= 0 {
		n = len(s)
	}
	part := s[:n]
	if !utf8.ValidString(part) {
		return n, true
	}
	for _, r := range part {
		if Hidden(r) {
			return n, true
		}
	}
	return n, !norm.NFKC.IsNormalString(part)
}

// Hidden reports a character that shows as nothing, or as something it is
// not: anything but letters, marks, numbers, punctuation, symbols and the
// ASCII space (so every control, format, separator, private-use and
// unassigned code point), and the default-ignorable characters Unicode
// files under other categories (the Hangul fillers, the combining
// grapheme joiner, variation selectors).
func Hidden(r rune) bool {
	return !unicode.IsPrint(r) ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r)
}

// write writes s with its hidden parts escaped, and with '"' and '\'
// escaped too when literal is set.
func write(b *strings.Builder, s string, literal bool) {
	for i := 0; i < len(s); {
		n, bad := 1, false
		if s[i] < 0x20 || s[i] > 0x7e || (i+1 < len(s) && s[i+1] > 0x7e) {
			n, bad = segment(s[i:])
		}
		part := s[i : i+n]
		i += n
		if !bad {
			if literal {
				for j := 0; j < len(part); j++ {
					if c := part[j]; c == '"' || c == '\\' {
						b.WriteByte('\\')
					}
					b.WriteByte(part[j])
				}
			} else {
				b.WriteString(part)
			}
			continue
		}
		for j := 0; j < len(part); {
			r, size := utf8.DecodeRuneInString(part[j:])
			j += size
			escape(b, r)
		}
	}
}

// escape writes one character as a JavaScript and JSON escape.
func escape(b *strings.Builder, r rune) {
	switch r {
	case '\b':
		b.WriteString(`\b`)
	case '\f':
		b.WriteString(`\f`)
	case '\n':
		b.WriteString(`\n`)
	case '\r':
		b.WriteString(`\r`)
	case '\t':
		b.WriteString(`\t`)
	default:
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(b, `\u%04x\u%04x`, hi, lo)
			return
		}
		fmt.Fprintf(b, `\u%04x`, r)
	}
}
