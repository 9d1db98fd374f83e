package redact

import (
	"bytes"
	"encoding/json"
)

// JSON redacts a JSON text and keeps it valid where it can: a string
// literal holding a secret (in any form) is decoded, redacted and encoded
// again. A secret found outside string literals (in a number, or across
// tokens) is replaced as text; then the result may not be valid JSON, and
// valid says so. data is returned as it is when it holds no secret.
func (r *Redactor) JSON(data []byte) (out []byte, valid bool) {
	if r.Empty() {
		return data, true
	}
	spans := r.spans(string(data))
	if len(spans) == 0 {
		return data, true
	}
	var b bytes.Buffer
	b.Grow(len(data))
	last, k := 0, 0
	for i := 0; i < len(data) && k < len(spans); i++ {
		if data[i] != '"' {
			continue
		}
		// In valid JSON a quote outside a literal opens one.
		j := i + 1
		for j < len(data) && data[j] != '"' {
			if data[j] == '\\' {
				j++
			}
			j++
		}
		end := min(j+1, len(data))
		for k < len(spans) && spans[k].end <= i {
			k++
		}
		if k < len(spans) && spans[k].start < end {
			b.Write(data[last:i])
			b.Write(r.literal(data[i:end]))
			last = end
		}
		i = j
	}
	b.Write(data[last:])
	out = b.Bytes()
	// A secret the literals did not account for: its raw form across a
	// quote, in a number, or a form that only the whole text shows.
	if len(r.spans(string(out))) > 0 {
		out = []byte(r.String(string(out)))
		return out, json.Valid(out)
	}
	return out, true
}

// literal redacts one JSON string literal, quotes included.
func (r *Redactor) literal(lit []byte) []byte {
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return []byte(r.String(string(lit)))
	}
	red := r.String(s)
	if red == s {
		return lit
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<" stays "<", as the upstream most likely wrote it
	_ = enc.Encode(red)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Value redacts a decoded JSON value: strings (object keys included) and
// json.RawMessage texts, in maps and slices at any depth. Other types are
// redacted through their JSON encoding, and come back as json.RawMessage
// when that held a secret. A value without secrets is returned unchanged.
func (r *Redactor) Value(v any) any {
	if r.Empty() {
		return v
	}
	out, _ := r.value(v)
	return out
}

// value reports whether it changed anything, so that unchanged maps and
// slices are not copied.
func (r *Redactor) value(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, float64, int, int64, json.Number:
		return v, false
	case string:
		red := r.String(x)
		return red, red != x
	case json.RawMessage:
		out, valid := r.JSON(x)
		if !valid {
			return string(out), true
		}
		return json.RawMessage(out), !bytes.Equal(out, x)
	case map[string]any:
		var m map[string]any
		for k, e := range x {
			rk := r.String(k)
			re, changed := r.value(e)
			if (changed || rk != k) && m == nil {
				m = make(map[string]any, len(x))
				for k2, e2 := range x {
					m[k2] = e2
				}
			}
			if m != nil {
				if rk != k {
					delete(m, k)
				}
				m[rk] = re
			}
		}
		if m == nil {
			return v, false
		}
		return m, true
	case []any:
		var s []any
		for i, e := range x {
			re, changed := r.value(e)
			if changed && s == nil {
				s = append([]any(nil), x...)
			}
			if s != nil {
				s[i] = re
			}
		}
		if s == nil {
			return v, false
		}
		return s, true
	}
	data, err := json.Marshal(v)
	if err != nil {
		return v, false
	}
	out, valid := r.JSON(data)
	if bytes.Equal(out, data) {
		return v, false
	}
	if !valid {
		return string(out), true
	}
	return json.RawMessage(out), true
}
