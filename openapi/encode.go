package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/codemode-go/codemode"
)

// Parameter serialization, as OpenAPI 3 defines it (RFC 6570 styles):
//
//	query form, explode (default)   id=3&id=4     role=admin&name=Ada
//	query form, explode false       id=3,4        id=role,admin,name,Ada
//	query deepObject                id[role]=admin&id[name]=Ada
//	path/header simple              3,4           role,admin,name,Ada (explode: role=admin,name=Ada)
//
// The specification leaves nested values open; here an array or object
// inside an array or object is sent as JSON text, and deepObject nests
// objects as id[a][b]=v and repeats array members as id[a]=1&id[a]=2.

// decodeValue decodes one input value, keeping numbers as written.
func decodeValue(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// scalar renders a primitive; ok is false for arrays and objects.
func scalar(v any) (s string, ok bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	case nil:
		return "", true
	}
	return "", false
}

// text renders any value as a string: primitives plainly, the rest as JSON.
func text(v any) string {
	if s, ok := scalar(v); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sortedKeys gives object members a stable order (the decoded map has none).
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// escape percent-encodes everything but RFC 3986 unreserved characters,
// and with reserved also the reserved ones (allowReserved), except "#",
// which would end the URL.
func escape(s string, reserved bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		case reserved && c != '#' && strings.IndexByte(":/?[]@!$&'()*+,;=", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// queryPairs serializes a query parameter into escaped "name=value" pairs.
// A null value sends nothing.
func (f *field) queryPairs(v any) []string {
	if v == nil {
		return nil
	}
	if f.asJSON {
		b, _ := json.Marshal(v)
		return []string{escape(f.name, false) + "=" + escape(string(b), f.reserved)}
	}
	val := func(s string) string { return escape(s, f.reserved) }
	name := escape(f.name, false)
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return []string{name + "="}
		}
		if f.explode || f.style == "deepObject" {
			out := make([]string, 0, len(x))
			for _, e := range x {
				out = append(out, name+"="+val(text(e)))
			}
			return out
		}
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, val(text(e)))
		}
		return []string{name + "=" + strings.Join(parts, ",")}
	case map[string]any:
		if f.style == "deepObject" {
			var out []string
			deepObject(&out, name, x, val, 0)
			return out
		}
		keys := sortedKeys(x)
		if f.explode {
			out := make([]string, 0, len(keys))
			for _, k := range keys {
				out = append(out, escape(k, false)+"="+val(text(x[k])))
			}
			return out
		}
		parts := make([]string, 0, 2*len(keys))
		for _, k := range keys {
			parts = append(parts, val(k), val(text(x[k])))
		}
		return []string{name + "=" + strings.Join(parts, ",")}
	}
	s, _ := scalar(v)
	return []string{name + "=" + val(s)}
}

// deepObject writes prefix[key]=value pairs, nesting objects.
func deepObject(out *[]string, prefix string, m map[string]any, val func(string) string, depth int) {
	for _, k := range sortedKeys(m) {
		p := prefix + "[" + escape(k, false) + "]"
		switch x := m[k].(type) {
		case map[string]any:
			if depth < 8 {
				deepObject(out, p, x, val, depth+1)
				continue
			}
			*out = append(*out, p+"="+val(text(x)))
		case []any:
			for _, e := range x {
				*out = append(*out, p+"="+val(text(e)))
			}
		case nil:
		default:
			*out = append(*out, p+"="+val(text(x)))
		}
	}
}

// simple serializes a path or header parameter with the simple style;
// each piece goes through esc (percent-encoding for paths, nothing for
// headers), the separators do not.
func (f *field) simple(v any, esc func(string) string) string {
	if f.asJSON {
		b, _ := json.Marshal(v)
		return esc(string(b))
	}
	switch x := v.(type) {
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, esc(text(e)))
		}
		return strings.Join(parts, ",")
	case map[string]any:
		var parts []string
		for _, k := range sortedKeys(x) {
			if f.explode {
				parts = append(parts, esc(k)+"="+esc(text(x[k])))
			} else {
				parts = append(parts, esc(k), esc(text(x[k])))
			}
		}
		return strings.Join(parts, ",")
	}
	s, _ := scalar(v)
	return esc(s)
}

// pathEscape escapes a path parameter: everything but the unreserved
// characters, so "/", "?", "#", "%", "\" and ";" cannot end the segment,
// the path or the URL. "." stays, as RFC 3986 wants, which is why
// dotSegment exists.
func pathEscape(s string) string { return escape(s, false) }

// Path parameters and dot segments
//
// A path parameter must address its own segment only. Escaping keeps it
// there for a server that reads the path as sent, but servers routinely
// decode %2F (some twice), treat "\" like "/", and resolve "." and ".."
// afterwards (so do proxies in front of them): a value "../../admin"
// would then move the call, with the operation's credentials, to another
// endpoint of the same host. So a value, or the segment it makes, that any
// such reading turns into "." or ".." is refused before anything is sent;
// so is a segment left empty, which servers merge with its neighbour
// ("/users//keys" → "/users/keys"). Values that merely contain dots
// ("a.b", "...", ".hidden", "v1.2") are ordinary and go as they are.

// fillPath puts the escaped parameter values into the path template,
// refusing a parameter segment that comes out empty or a dot segment.
func (o *operation) fillPath(values map[string]string) (string, error) {
	keys := map[string]string{}
	for _, f := range o.fields {
		if f.in == "path" {
			keys[f.name] = f.key
		}
	}
	var b strings.Builder
	start := 0      // where the current segment begins in b
	var in []string // input keys of the parameters in the current segment
	end := func() error {
		if len(in) == 0 {
			return nil
		}
		seg := b.String()[start:]
		if seg == "" {
			return codemode.ToolErrorf("invalid input property %q: a path parameter cannot be empty, since the path would lose a segment and could name another endpoint", in[0])
		}
		if dotSegment(seg) {
			return errDotSegment(in[0])
		}
		return nil
	}
	// literal writes template text, where every "/" ends a segment (the
	// values are escaped and hold none).
	literal := func(s string) error {
		for {
			i := strings.IndexByte(s, '/')
			if i < 0 {
				b.WriteString(s)
				return nil
			}
			b.WriteString(s[:i])
			if err := end(); err != nil {
				return err
			}
			b.WriteByte('/')
			start, in = b.Len(), nil
			s = s[i+1:]
		}
	}
	last := 0
	for _, m := range templateVar.FindAllStringSubmatchIndex(o.path, -1) {
		if err := literal(o.path[last:m[0]]); err != nil {
			return "", err
		}
		name := o.path[m[2]:m[3]]
		if v, ok := values[name]; ok {
			b.WriteString(v)
			in = append(in, keys[name])
		} else {
			b.WriteString(o.path[m[0]:m[1]]) // not a parameter (FromSpec refuses those)
		}
		last = m[1]
	}
	if err := literal(o.path[last:]); err != nil {
		return "", err
	}
	if err := end(); err != nil {
		return "", err
	}
	return b.String(), nil
}

func errDotSegment(key string) error {
	return codemode.ToolErrorf(`invalid input property %q: a path parameter cannot be "." or ".." (nor one percent-encoded, or between slashes or backslashes), since a server could resolve it to another path`, key)
}

// dotSegment reports whether a path segment, as sent, could be taken for
// "." or ".." by some server: as it is, or percent-decoded up to three
// times (%uXXXX too, as IIS decodes); split at "/" and at "\"; each piece
// read up to a ";" (Tomcat's "..;") or a NUL, without surrounding spaces,
// and with overlong UTF-8 and Unicode look-alikes of "." taken for ".".
func dotSegment(seg string) bool {
	s := seg
	for i := 0; ; i++ {
		for _, piece := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
			if dotPiece(piece) {
				return true
			}
		}
		d := percentDecode(s)
		if i == 3 || d == s {
			return false
		}
		s = d
	}
}

// dotLookalikes are read as "." by some decoder or normalizer: overlong
// UTF-8 encodings of "." (C0 AE, E0 80 AE), and the characters NFKC folds
// to it (fullwidth full stop, one dot leader, small full stop).
var dotLookalikes = strings.NewReplacer("\xc0\xae", ".", "\xe0\x80\xae", ".", "\uff0e", ".", "\u2024", ".", "\ufe52", ".")

func dotPiece(p string) bool {
	if i := strings.IndexAny(p, ";\x00"); i >= 0 {
		p = p[:i]
	}
	p = strings.TrimSpace(dotLookalikes.Replace(p))
	return p == "." || p == ".."
}

// percentDecode decodes %XX and %uXXXX escapes and leaves anything else,
// broken escapes included, as it is (servers differ, so the check must
// not give up where one of them would carry on).
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]) {
				b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
				i += 2
				continue
			}
			if i+5 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U') && ishex(s[i+2]) && ishex(s[i+3]) && ishex(s[i+4]) && ishex(s[i+5]) {
				r := rune(unhex(s[i+2]))<<12 | rune(unhex(s[i+3]))<<8 | rune(unhex(s[i+4]))<<4 | rune(unhex(s[i+5]))
				b.WriteRune(r)
				i += 5
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// headerValue serializes a header parameter, refusing what HTTP cannot
// carry (a line break would otherwise smuggle in another header).
func (f *field) headerValue(v any) (string, error) {
	s := f.simple(v, func(s string) string { return s })
	if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return "", codemode.ToolErrorf("header parameter %q contains a control character (such as a line break)", f.name)
	}
	return s, nil
}

// setQuery replaces every name parameter of a raw query with one value.
func setQuery(rawQuery, name, value string) string {
	var keep []string
	for _, pair := range strings.Split(rawQuery, "&") {
		if pair == "" {
			continue
		}
		k, _, _ := strings.Cut(pair, "=")
		if dk, err := url.QueryUnescape(k); err == nil && dk == name {
			continue
		}
		keep = append(keep, pair)
	}
	keep = append(keep, escape(name, false)+"="+escape(value, false))
	return strings.Join(keep, "&")
}
