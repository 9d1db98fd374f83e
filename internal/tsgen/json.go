package tsgen

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// object is a decoded JSON object that keeps its key order: a schema's
// properties should appear in the order its author wrote them, which a Go
// map would lose.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) str(k string) (string, bool) {
	s, ok := o.vals[k].(string)
	return s, ok
}

func (o *object) isTrue(k string) bool {
	b, _ := o.vals[k].(bool)
	return b
}

// parse decodes a JSON document into nil, bool, string, json.Number, []any
// and *object. json.Valid runs first, so the hand-written decoder below
// can trust its input; json.Valid also caps nesting depth, which bounds
// the decoder's recursion.
func parse(data []byte) (any, bool) {
	if !json.Valid(data) {
		return nil, false
	}
	p := parser{data: data}
	return p.value(), true
}

// absent reports a schema that was not given at all, as opposed to one
// that was given and is malformed.
func absent(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) == 0 || string(t) == "null"
}

type parser struct {
	data []byte
	pos  int
}

func (p *parser) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() any {
	p.ws()
	switch p.data[p.pos] {
	case '{':
		p.pos++
		o := &object{vals: map[string]any{}}
		p.ws()
		if p.data[p.pos] == '}' {
			p.pos++
			return o
		}
		for {
			p.ws()
			k := p.str()
			p.ws()
			p.pos++ // ':'
			v := p.value()
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v // the last duplicate wins, as in encoding/json
			p.ws()
			c := p.data[p.pos]
			p.pos++
			if c == '}' {
				return o
			}
		}
	case '[':
		p.pos++
		a := []any{}
		p.ws()
		if p.data[p.pos] == ']' {
			p.pos++
			return a
		}
		for {
			a = append(a, p.value())
			p.ws()
			c := p.data[p.pos]
			p.pos++
			if c == ']' {
				return a
			}
		}
	case '"':
		return p.str()
	case 't':
		p.pos += 4
		return true
	case 'f':
		p.pos += 5
		return false
	case 'n':
		p.pos += 4
		return nil
	}
	start := p.pos
	for p.pos < len(p.data) && isNumberByte(p.data[p.pos]) {
		p.pos++
	}
	return json.Number(p.data[start:p.pos])
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func (p *parser) str() string {
	start := p.pos
	p.pos++
	esc := false
	for {
		c := p.data[p.pos]
		if c == '\\' {
			esc = true
			p.pos += 2
			continue
		}
		p.pos++
		if c == '"' {
			break
		}
	}
	raw := p.data[start:p.pos]
	if !esc && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	// Escapes and invalid UTF-8 are rare; encoding/json decodes them the
	// standard way (invalid bytes become U+FFFD).
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
