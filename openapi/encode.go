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

func pathEscape(s string) string { return escape(s, false) }

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
