package tsgen

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/codemode-go/codemode/internal/spoof"
)

// object renders the object keywords of o: properties, required,
// additionalProperties, patternProperties and unevaluatedProperties.
func (r *renderer) object(o *object, depth int) *tnode {
	if depth >= maxDepth {
		return tUnknown
	}
	n := &tnode{kind: kObject}
	required := map[string]bool{}
	if req, ok := o.vals["required"].([]any); ok {
		for _, k := range req {
			if s, ok := k.(string); ok {
				required[s] = true
			}
		}
	}
	props, _ := o.vals["properties"].(*object)
	if props != nil {
		for _, k := range props.keys {
			s := props.vals[k]
			n.props = append(n.props, prop{
				name:     k,
				optional: !required[k],
				typ:      r.schema(s, depth+1),
				doc:      r.propDoc(s),
			})
		}
	}

	var idx []*tnode
	patterns, _ := o.vals["patternProperties"].(*object)
	if patterns != nil {
		for _, k := range patterns.keys {
			idx = append(idx, r.schema(patterns.vals[k], depth+1))
		}
	}
	addl, ok := o.get("additionalProperties")
	if !ok {
		addl, _ = o.get("unevaluatedProperties")
	}
	switch a := addl.(type) {
	case bool:
		if a {
			idx = append(idx, tUnknown)
		}
	case *object:
		idx = append(idx, r.schema(a, depth+1))
	default:
		// Absent or malformed: JSON Schema allows any extra property, but
		// declared properties alone read better, so only an object that
		// declares nothing gets an open index signature.
		if len(n.props) == 0 && patterns == nil {
			idx = append(idx, tUnknown)
		}
	}
	if len(idx) > 0 {
		n.index = widenIndex(union(idx...), n.props)
	}
	return n
}

// widenIndex makes an index signature admit every declared property:
// TypeScript rejects { a: string; [key: string]: number }, and an optional
// property adds undefined to its type. A widening that grows large is
// replaced by unknown, which always compiles.
func widenIndex(t *tnode, props []prop) *tnode {
	if len(props) == 0 || t.is(tUnknown) {
		return t
	}
	ms := []*tnode{t}
	optional := false
	for _, p := range props {
		ms = append(ms, p.typ)
		optional = optional || p.optional
	}
	if optional {
		ms = append(ms, tUndefined)
	}
	w := union(ms...)
	if w.size(maxIndexWidth) > maxIndexWidth {
		return tUnknown
	}
	return w
}

// array renders items, prefixItems and additionalItems as an array or a
// tuple type.
func (r *renderer) array(o *object, depth int) *tnode {
	if depth >= maxDepth {
		return tUnknown
	}
	items, hasItems := o.get("items")
	prefix, tuple := o.vals["prefixItems"].([]any)
	rest, hasRest := items, hasItems
	if !tuple {
		if list, ok := items.([]any); ok {
			// Draft-07 and earlier spell a tuple as an items array.
			prefix, tuple = list, true
			rest, hasRest = o.get("additionalItems")
		}
	}
	if !tuple {
		switch it := items.(type) {
		case bool:
			if !it {
				return &tnode{kind: kTuple}
			}
		case *object:
			return &tnode{kind: kArray, elems: []*tnode{r.schema(it, depth+1)}}
		}
		return &tnode{kind: kArray, elems: []*tnode{tUnknown}}
	}
	n := &tnode{kind: kTuple, req: len(prefix)}
	for _, e := range prefix {
		n.elems = append(n.elems, r.schema(e, depth+1))
	}
	if m, ok := intValue(o.vals["minItems"]); ok && m >= 0 && m < len(prefix) {
		n.req = m
	}
	if hasRest {
		switch a := rest.(type) {
		case bool:
			if a {
				n.rest = tUnknown
			}
		case *object:
			n.rest = r.schema(a, depth+1)
		}
	}
	return n
}

func intValue(v any) (int, bool) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := num.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<30 {
		return 0, false
	}
	return int(f), true
}

// Limits on const and enum values that render as object or array literal
// types; bigger ones become unknown.
const (
	maxLiteralNodes = 32
	maxLiteralDepth = 3
)

// literal renders a const or enum value as a literal type.
func literal(v any) *tnode {
	budget := maxLiteralNodes
	return literalAt(v, 0, &budget)
}

func literalAt(v any, depth int, budget *int) *tnode {
	*budget--
	if *budget < 0 || depth > maxLiteralDepth {
		return tUnknown
	}
	switch x := v.(type) {
	case nil:
		return tNull
	case bool:
		return &tnode{kind: kLiteral, text: strconv.FormatBool(x)}
	case string:
		return &tnode{kind: kLiteral, text: quote(x)}
	case json.Number:
		// TypeScript reads an out-of-range literal such as 1e999 as
		// Infinity; number is the honest type for it.
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return tNumber
		}
		return &tnode{kind: kLiteral, text: string(x)}
	case []any:
		n := &tnode{kind: kTuple}
		for _, e := range x {
			t := literalAt(e, depth+1, budget)
			if t.is(tUnknown) {
				return tUnknown
			}
			n.elems = append(n.elems, t)
		}
		n.req = len(n.elems)
		return n
	case *object:
		n := &tnode{kind: kObject}
		for _, k := range x.keys {
			t := literalAt(x.vals[k], depth+1, budget)
			if t.is(tUnknown) {
				return tUnknown
			}
			n.props = append(n.props, prop{name: k, typ: t})
		}
		return n
	}
	return tUnknown
}

// quote spells s as a JSON string, which is also a valid TypeScript string
// literal, with what would not show as itself (a zero-width space, a
// bidirectional control, a fullwidth look-alike) escaped: a model reading
// a tool path, a property name or an enum value must see what it holds.
// The escaped literal still means the same string to the compiler and to
// JavaScript. HTML escaping would only make the output harder to read.
func quote(s string) string { return spoof.Quote(s) }
