package tsgen

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxTagValue caps how much of a default value a @default tag shows; a
// large default is noise in a prompt.
const maxTagValue = 240

// propDoc builds the JSDoc lines for a property from its schema: the
// description (or the title when there is none) and tags for the keywords
// TypeScript cannot express. A property that is only a $ref borrows the
// documentation of the schema it points to.
func (r *renderer) propDoc(s any) []string {
	o, ok := s.(*object)
	if !ok {
		return nil
	}
	get := func(k string) (any, bool) { return o.get(k) }
	if !hasAny(o, "description", "title") {
		if t := r.follow(o); t != nil {
			get = func(k string) (any, bool) {
				if v, ok := o.get(k); ok {
					return v, ok
				}
				return t.get(k)
			}
		}
	}
	str := func(k string) string {
		v, _ := get(k)
		s, _ := v.(string)
		return s
	}
	text := str("description")
	if strings.TrimSpace(text) == "" {
		text = str("title")
	}
	lines := docText(plainText(text, maxFieldDoc))

	tag := func(name, value string) {
		if value != "" {
			name += " " + oneLine(value)
		}
		lines = append(lines, name)
	}
	if v, _ := get("deprecated"); v == true {
		tag("@deprecated", "")
	}
	if v, ok := get("default"); ok {
		js := compactJSON(v)
		if utf8.RuneCountInString(js) > maxTagValue {
			js = string([]rune(js)[:maxTagValue]) + "…"
		}
		tag("@default", js)
	}
	if f := str("format"); f != "" {
		tag("@format", f)
	}
	number := func(k string) string {
		v, _ := get(k)
		n, _ := v.(json.Number)
		return string(n)
	}
	for _, k := range [...]string{"minItems", "maxItems"} {
		if n := number(k); n != "" {
			tag("@"+k, n)
		}
	}
	// Draft-04 spells an exclusive bound as a boolean beside the bound.
	exMin, _ := get("exclusiveMinimum")
	exMax, _ := get("exclusiveMaximum")
	if n := number("minimum"); n != "" && exMin != true {
		tag("@minimum", n)
	}
	if n := number("maximum"); n != "" && exMax != true {
		tag("@maximum", n)
	}
	if n := number("exclusiveMinimum"); n != "" {
		tag("@exclusiveMinimum", n)
	} else if n := number("minimum"); n != "" && exMin == true {
		tag("@exclusiveMinimum", n)
	}
	if n := number("exclusiveMaximum"); n != "" {
		tag("@exclusiveMaximum", n)
	} else if n := number("maximum"); n != "" && exMax == true {
		tag("@exclusiveMaximum", n)
	}
	for _, k := range [...]string{"minLength", "maxLength"} {
		if n := number(k); n != "" {
			tag("@"+k, n)
		}
	}
	if p := str("pattern"); p != "" {
		tag("@pattern", p)
	}
	for _, k := range [...]string{"multipleOf", "minProperties", "maxProperties"} {
		if n := number(k); n != "" {
			tag("@"+k, n)
		}
	}
	if v, _ := get("uniqueItems"); v == true {
		tag("@uniqueItems", "")
	}
	return lines
}

// docText turns free text into comment lines that cannot end the comment
// early or break its layout: control characters go (tabs become spaces),
// "*/" becomes "*\/", line breaks of every kind split lines, trailing
// spaces and blank lines at either end are trimmed, and runs of blank
// lines collapse to one.
func docText(s string) []string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case c == '\r':
			if i < len(s) && s[i] == '\n' {
				i++
			}
			b.WriteByte('\n')
		case c == '\n' || c == '\u2028' || c == '\u2029':
			b.WriteByte('\n')
		case c == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(c):
		default:
			b.WriteRune(c)
		}
	}
	// After control characters are gone, so "*\x00/" cannot reassemble.
	text := strings.ReplaceAll(b.String(), "*/", "*\\/")
	var lines []string
	blank := false
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimRightFunc(l, unicode.IsSpace)
		if l == "" {
			blank = len(lines) > 0
			continue
		}
		if blank {
			lines = append(lines, "")
			blank = false
		}
		lines = append(lines, l)
	}
	return lines
}

// oneLine sanitizes a tag value, which must stay on its tag's line.
func oneLine(s string) string {
	return strings.Join(docText(s), " ")
}

// writeDoc writes lines as a JSDoc comment at the given indent level: on
// one line when there is one line, else as a block.
func writeDoc(b *strings.Builder, lines []string, level int) {
	if len(lines) == 0 {
		return
	}
	pad := strings.Repeat("  ", level)
	if len(lines) == 1 {
		b.WriteString(pad + "/** " + lines[0] + " */\n")
		return
	}
	b.WriteString(pad + "/**\n")
	for _, l := range lines {
		if l == "" {
			b.WriteString(pad + " *\n")
		} else {
			b.WriteString(pad + " * " + l + "\n")
		}
	}
	b.WriteString(pad + " */\n")
}

// compactJSON spells a decoded value as one-line JSON, keeping key order.
func compactJSON(v any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case nil:
			b.WriteString("null")
		case bool:
			if x {
				b.WriteString("true")
			} else {
				b.WriteString("false")
			}
		case string:
			b.WriteString(quote(x))
		case json.Number:
			b.WriteString(string(x))
		case []any:
			b.WriteString("[")
			for i, e := range x {
				if i > 0 {
					b.WriteString(",")
				}
				walk(e)
			}
			b.WriteString("]")
		case *object:
			b.WriteString("{")
			for i, k := range x.keys {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(quote(k) + ":")
				walk(x.vals[k])
			}
			b.WriteString("}")
		}
	}
	walk(v)
	return b.String()
}
