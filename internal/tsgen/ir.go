package tsgen

import "strings"

// Rendering builds a small type tree first and prints it afterwards, so
// that unions can be flattened and deduplicated, an object's index
// signature can be widened by looking at its properties' types, and the
// one-line and pretty forms are printed from the same tree.

type kind uint8

const (
	kKeyword kind = iota // text is a keyword: unknown, string, null...
	kLiteral             // text is a literal type: "a", 1, true
	kUnion
	kInter
	kArray // elems[0] is the element type
	kTuple
	kObject
	kRef // text is the name of a declared type or a part
)

type tnode struct {
	kind  kind
	text  string
	elems []*tnode
	// req is how many leading tuple elements are required; the rest are
	// optional. It is len(elems) when the schema says nothing.
	req   int
	rest  *tnode // tuple rest element type, nil for a closed tuple
	props []prop
	index *tnode // object index signature type, nil for none
	line  string // memoized one-line form of a composite node
}

type prop struct {
	name     string
	optional bool
	typ      *tnode
	doc      []string // JSDoc lines, printed in the pretty form only
}

var (
	tUnknown   = &tnode{kind: kKeyword, text: "unknown"}
	tNever     = &tnode{kind: kKeyword, text: "never"}
	tString    = &tnode{kind: kKeyword, text: "string"}
	tNumber    = &tnode{kind: kKeyword, text: "number"}
	tBoolean   = &tnode{kind: kKeyword, text: "boolean"}
	tNull      = &tnode{kind: kKeyword, text: "null"}
	tUndefined = &tnode{kind: kKeyword, text: "undefined"}
)

func (n *tnode) is(k *tnode) bool { return n.kind == kKeyword && n.text == k.text }

// union flattens nested unions, drops never, collapses to unknown when any
// member is unknown (a union with unknown is unknown in TypeScript too),
// and removes duplicates by their printed form.
func union(ms ...*tnode) *tnode {
	out, absorbed := flatten(kUnion, tNever, tUnknown, ms)
	if absorbed {
		return tUnknown
	}
	switch len(out) {
	case 0:
		return tNever
	case 1:
		return out[0]
	}
	return &tnode{kind: kUnion, elems: out}
}

// inter is union's dual: unknown members vanish and never absorbs. An
// empty object ({}) vanishes next to another object type, where it adds
// nothing but noise.
func inter(ms ...*tnode) *tnode {
	out, absorbed := flatten(kInter, tUnknown, tNever, ms)
	if absorbed {
		return tNever
	}
	if len(out) > 1 {
		kept := out[:0:0]
		for _, m := range out {
			if !isEmptyObject(m) || !anyObjectish(out, m) {
				kept = append(kept, m)
			}
		}
		out = kept
	}
	switch len(out) {
	case 0:
		return tUnknown
	case 1:
		return out[0]
	}
	return &tnode{kind: kInter, elems: out}
}

// flatten collects the members of a union or intersection: nested nodes
// of the same kind are spliced in, the identity member is dropped,
// duplicates (by printed form) are dropped, and absorbed reports a member
// equal to the absorbing one.
func flatten(k kind, identity, absorbing *tnode, ms []*tnode) (out []*tnode, absorbed bool) {
	seen := map[string]bool{}
	var add func(m *tnode) bool
	add = func(m *tnode) bool {
		switch {
		case m.kind == k:
			for _, e := range m.elems {
				if !add(e) {
					return false
				}
			}
		case m.is(absorbing):
			return false
		case m.is(identity):
		default:
			if key := m.key(); !seen[key] {
				seen[key] = true
				out = append(out, m)
			}
		}
		return true
	}
	for _, m := range ms {
		if !add(m) {
			return nil, true
		}
	}
	return out, false
}

func isEmptyObject(n *tnode) bool {
	return n.kind == kObject && len(n.props) == 0 && n.index == nil
}

func anyObjectish(ms []*tnode, except *tnode) bool {
	for _, m := range ms {
		if m != except && objectish(m) {
			return true
		}
	}
	return false
}

// objectish reports a type that only admits objects, so that a bare
// "type": "object" next to it adds nothing.
func objectish(n *tnode) bool {
	switch n.kind {
	case kObject:
		return true
	case kUnion, kInter:
		for _, e := range n.elems {
			if !objectish(e) {
				return false
			}
		}
		return true
	}
	return false
}

// size counts nodes, stopping early past limit.
func (n *tnode) size(limit int) int {
	c := 1
	add := func(m *tnode) {
		if m != nil && c <= limit {
			c += m.size(limit - c)
		}
	}
	for _, e := range n.elems {
		add(e)
	}
	add(n.rest)
	add(n.index)
	for _, p := range n.props {
		add(p.typ)
	}
	return c
}

// key is the one-line form, which identifies a type for deduplication.
func (n *tnode) key() string {
	if n.kind == kKeyword || n.kind == kLiteral || n.kind == kRef {
		return n.text
	}
	if n.line == "" {
		var p printer
		p.node(n, 0)
		n.line = p.b.String()
	}
	return n.line
}

type printer struct {
	b      strings.Builder
	pretty bool
}

func format(n *tnode, pretty bool) string {
	if !pretty {
		return n.key()
	}
	p := printer{pretty: true}
	p.node(n, 0)
	return p.b.String()
}

func (p *printer) indent(level int) {
	for range level {
		p.b.WriteString("  ")
	}
}

// node prints n as it appears on a line indented by level; multi-line
// objects put their fields at level+1 and their closing brace at level.
func (p *printer) node(n *tnode, level int) {
	if !p.pretty && n.line != "" {
		p.b.WriteString(n.line)
		return
	}
	switch n.kind {
	case kKeyword, kLiteral, kRef:
		p.b.WriteString(n.text)
	case kUnion:
		for i, e := range n.elems {
			if i > 0 {
				p.b.WriteString(" | ")
			}
			p.node(e, level)
		}
	case kInter:
		for i, e := range n.elems {
			if i > 0 {
				p.b.WriteString(" & ")
			}
			p.grouped(e, level, e.kind == kUnion)
		}
	case kArray:
		p.b.WriteString("Array<")
		p.node(n.elems[0], level)
		p.b.WriteString(">")
	case kTuple:
		p.b.WriteString("[")
		for i, e := range n.elems {
			if i > 0 {
				p.b.WriteString(", ")
			}
			if i < n.req {
				p.node(e, level)
				continue
			}
			// "string | number?" would make only number optional.
			p.grouped(e, level, e.kind == kUnion || e.kind == kInter)
			p.b.WriteString("?")
		}
		if n.rest != nil {
			if len(n.elems) > 0 {
				p.b.WriteString(", ")
			}
			p.b.WriteString("...Array<")
			p.node(n.rest, level)
			p.b.WriteString(">")
		}
		p.b.WriteString("]")
	case kObject:
		p.object(n, level)
	}
}

func (p *printer) grouped(n *tnode, level int, paren bool) {
	if paren {
		p.b.WriteString("(")
	}
	p.node(n, level)
	if paren {
		p.b.WriteString(")")
	}
}

func (p *printer) object(n *tnode, level int) {
	if len(n.props) == 0 && n.index == nil {
		p.b.WriteString("{}")
		return
	}
	if !p.pretty {
		p.b.WriteString("{ ")
		for i, f := range n.props {
			if i > 0 {
				p.b.WriteString("; ")
			}
			p.field(f, level)
		}
		if n.index != nil {
			if len(n.props) > 0 {
				p.b.WriteString("; ")
			}
			p.b.WriteString("[key: string]: ")
			p.node(n.index, level)
		}
		p.b.WriteString(" }")
		return
	}
	p.b.WriteString("{\n")
	for _, f := range n.props {
		writeDoc(&p.b, f.doc, level+1)
		p.indent(level + 1)
		p.field(f, level+1)
		p.b.WriteString(";\n")
	}
	if n.index != nil {
		p.indent(level + 1)
		p.b.WriteString("[key: string]: ")
		p.node(n.index, level+1)
		p.b.WriteString(";\n")
	}
	p.indent(level)
	p.b.WriteString("}")
}

func (p *printer) field(f prop, level int) {
	p.b.WriteString(propertyName(f.name))
	if f.optional {
		p.b.WriteString("?")
	}
	p.b.WriteString(": ")
	p.node(f.typ, level)
}

// propertyName leaves identifiers bare and quotes everything else. Reserved
// words are valid bare property names in a type literal.
func propertyName(name string) string {
	if isIdentifier(name) {
		return name
	}
	return quote(name)
}

// isIdentifier accepts ASCII identifiers only: the Unicode ones are valid
// too, but quoting them is always correct and needs no tables.
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
