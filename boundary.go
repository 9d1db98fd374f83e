package codemode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/codemode-go/codemode/internal/sandbox"
	"github.com/codemode-go/codemode/internal/spoof"
	"github.com/google/jsonschema-go/jsonschema"
)

// toolOutput marshals a tool's result and checks it is plain data.
func toolOutput(v any) (json.RawMessage, error) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
		if len(bytes.TrimSpace(raw)) == 0 {
			raw = []byte("null")
		}
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, errors.New("something that cannot be encoded as JSON")
		}
		raw = b
	}
	if err := sandbox.CheckData(raw, "the result"); err != nil {
		return nil, fmt.Errorf("something that is not plain data: %w", err)
	}
	return raw, nil
}

// validateOutput checks a result against a tool's output schema (see
// Tool.ValidateOutput).
func validateOutput(schema *jsonschema.Resolved, raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("something that is not JSON: %w", err)
	}
	if err := schema.Validate(v); err != nil {
		return fmt.Errorf("a result that does not match its output schema: %w", err)
	}
	return nil
}

// canonicalJSON writes a JSON value the one way codemode shows values to
// the people who judge them (Call.Shown): object keys sorted (of
// duplicate keys the last, as a JSON decoder keeps it), no insignificant
// whitespace, numbers as written, and every character that displays as
// nothing, as a space or reorders its neighbours (controls, zero-width
// and bidirectional marks, spaces other than U+0020, private-use and
// unassigned characters, variation selectors) escaped as \uXXXX. The result is the same JSON value, and
// no order of keys, padding or invisible character can hide or disguise
// a part of it.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if canonicalAlready(raw) {
		// What JSON.stringify writes mostly is: no need to decode it.
		return bytes.Clone(raw), nil
	}
	return canonicalSlow(raw)
}

// canonicalSlow is canonicalJSON by decoding and writing again.
func canonicalSlow(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	writeCanonical(&b, v)
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		b.WriteString(string(x))
	case string:
		writeCanonicalString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonicalString(b, k)
			b.WriteByte(':')
			writeCanonical(b, x[k])
		}
		b.WriteByte('}')
	}
}

func writeCanonicalString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f || r >= 0x80 && (r == utf8.RuneError || spoof.Hidden(r)):
			// (Runes past U+FFFF here are tag and private-use characters:
			// as a surrogate pair, the way JSON writes them.)
			for _, u := range utf16.Encode([]rune{r}) {
				b.WriteString(`\u`)
				b.WriteByte(hex[u>>12&0xf])
				b.WriteByte(hex[u>>8&0xf])
				b.WriteByte(hex[u>>4&0xf])
				b.WriteByte(hex[u&0xf])
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// canonicalAlready reports whether raw is valid JSON written exactly as
// canonicalJSON writes it: no whitespace, the keys of every object in
// increasing order, and no character or escape it would write otherwise.
// It says false when it cannot tell cheaply (a key with an escape in it).
func canonicalAlready(raw []byte) bool {
	if !json.Valid(raw) {
		return false
	}
	// Per open object: the last key seen, nil before the first.
	var keys [][]byte
	var objects []bool // per open container: whether it is an object
	expectKey := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case ' ', '\t', '\n', '\r':
			return false
		case '{':
			objects = append(objects, true)
			keys = append(keys, nil)
			expectKey = true
		case '[':
			objects = append(objects, false)
		case '}':
			objects = objects[:len(objects)-1]
			keys = keys[:len(keys)-1]
		case ']':
			objects = objects[:len(objects)-1]
		case ',':
			expectKey = len(objects) > 0 && objects[len(objects)-1]
		case '"':
			end, escaped, ok := scanCanonicalString(raw, i)
			if !ok {
				return false
			}
			if expectKey {
				key := raw[i+1 : end]
				last := &keys[len(keys)-1]
				if escaped || (*last != nil && bytes.Compare(*last, key) >= 0) {
					return false
				}
				*last = key
				expectKey = false
			}
			i = end
		}
	}
	return true
}

// scanCanonicalString checks the string starting at raw[start] (a quote)
// and returns the index of its closing quote; escaped reports a backslash
// in it. ok is false for anything canonicalJSON would write otherwise.
func scanCanonicalString(raw []byte, start int) (end int, escaped, ok bool) {
	for i := start + 1; i < len(raw); {
		c := raw[i]
		switch {
		case c == '"':
			return i, escaped, true
		case c == '\\':
			if i+1 >= len(raw) || !strings.ContainsRune(`"\\ntr`, rune(raw[i+1])) {
				return 0, false, false
			}
			escaped = true
			i += 2
		case c < 0x20 || c == 0x7f:
			return 0, false, false
		case c < 0x80:
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError || spoof.Hidden(r) {
				return 0, false, false
			}
			i += size
		}
	}
	return 0, false, false
}
