package tsgen

import (
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"strings"
)

// schemaGen makes pseudo-random schemas that mix every construct the
// renderer handles, including malformed keywords, hostile strings and
// reference cycles. It is deterministic for a seed, so a failure found by
// the tsc test reproduces.
type schemaGen struct {
	rnd  *rand.Rand
	defs []string // names of the $defs of the current document
}

func newSchemaGen(seed uint64) *schemaGen {
	return &schemaGen{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

var genKeys = []string{
	"id", "name", "a", "b", "kind", "value", "items", "default", "class", "$codemode",
	"content-type", "2fa", "with space", "quote\"d", "back\\slash", "new\nline",
	"*/", "é", "__proto__", "constructor", "", "x-rate", "key", "0", "tab\there",
}

var genStrings = []string{
	"", "a", "open", "closed", "quote\"d", "*/", "/*", "line\nbreak", "ctl\x00\x07",
	"</script>", "é€😀", "\u2028", "back\\slash", "tab\t", "  spaced  ",
}

var genDocs = []string{
	"A plain description.", "Ends early */ maybe", "Line one\nLine two\r\nLine three",
	"ctl\x00\x1b[0m\x7f", "trailing   ", "\n\nblank edges\n\n", "tab\tin text", "* star start",
	"ends with star *", "/", "@deprecated lookalike", "unicode ✓ \u2029 sep",
}

func (g *schemaGen) pick(xs []string) string { return xs[g.rnd.IntN(len(xs))] }

func (g *schemaGen) chance(p float64) bool { return g.rnd.Float64() < p }

// document returns one schema document with $defs that refer to each other.
func (g *schemaGen) document() []byte {
	n := g.rnd.IntN(5)
	g.defs = g.defs[:0]
	names := []string{"Node", "a/b", "m~n", "sp ace", "per%cent", "Item", "x"}
	for i := 0; i < n; i++ {
		g.defs = append(g.defs, names[g.rnd.IntN(len(names))])
	}
	root, _ := g.schema(0).(map[string]any)
	if g.chance(0.5) {
		// Tool inputs are mostly objects; make the corpus look like them.
		root = map[string]any{}
		g.object(root, 0)
		g.docs(root)
	} else if root == nil || g.chance(0.1) {
		root = map[string]any{"anyOf": []any{g.schema(0), g.schema(0)}}
	}
	if n > 0 {
		defs := map[string]any{}
		for _, name := range g.defs {
			defs[name] = g.schema(1)
		}
		key := "$defs"
		if g.chance(0.3) {
			key = "definitions"
		}
		root[key] = defs
	}
	data, err := json.Marshal(root)
	if err != nil {
		panic(err)
	}
	return data
}

func (g *schemaGen) schema(depth int) any {
	if depth > 5 || g.chance(0.05) {
		return g.chance(0.7) // the true and false schemas
	}
	s := map[string]any{}
	switch g.rnd.IntN(14) {
	case 0, 1:
		s["type"] = g.pick([]string{"string", "integer", "number", "boolean", "null", "any"})
	case 2:
		s["type"] = []any{"string", g.pick([]string{"null", "number", "object", "array"})}
	case 3:
		s["const"] = g.value(0)
	case 4:
		vals := make([]any, g.rnd.IntN(5))
		for i := range vals {
			vals[i] = g.value(1)
		}
		s["enum"] = vals
	case 5, 6, 7:
		g.object(s, depth)
	case 8, 9:
		g.array(s, depth)
	case 10:
		k := g.pick([]string{"anyOf", "oneOf", "allOf"})
		ms := make([]any, g.rnd.IntN(4))
		for i := range ms {
			ms[i] = g.schema(depth + 1)
		}
		s[k] = ms
		if g.chance(0.5) {
			g.object(s, depth) // siblings next to a composition
		}
	case 11:
		s["$ref"] = g.ref()
	case 12:
		g.malformed(s)
	case 13:
		// no type: unknown unless another keyword says more
	}
	if g.chance(0.15) {
		s["nullable"] = true
	}
	g.docs(s)
	return s
}

func (g *schemaGen) ref() string {
	if len(g.defs) == 0 || g.chance(0.1) {
		return g.pick([]string{"#", "#/$defs/missing", "other.json#/x", "#anchor", "#/%zz"})
	}
	name := g.defs[g.rnd.IntN(len(g.defs))]
	tok := strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
	return "#/$defs/" + url.PathEscape(tok)
}

func (g *schemaGen) object(s map[string]any, depth int) {
	if g.chance(0.9) {
		s["type"] = "object"
	}
	props := map[string]any{}
	var req []any
	for i := g.rnd.IntN(5); i > 0; i-- {
		k := g.pick(genKeys)
		props[k] = g.schema(depth + 1)
		if g.chance(0.5) {
			req = append(req, k)
		}
	}
	if len(props) > 0 || g.chance(0.3) {
		s["properties"] = props
	}
	if g.chance(0.1) {
		req = append(req, "undeclared")
	}
	if len(req) > 0 {
		s["required"] = req
	}
	switch g.rnd.IntN(5) {
	case 0:
		s["additionalProperties"] = g.chance(0.5)
	case 1:
		s["additionalProperties"] = g.schema(depth + 1)
	}
	if g.chance(0.1) {
		s["patternProperties"] = map[string]any{"^x-": g.schema(depth + 1)}
	}
}

func (g *schemaGen) array(s map[string]any, depth int) {
	s["type"] = "array"
	switch g.rnd.IntN(5) {
	case 0:
		// items absent
	case 1:
		s["items"] = g.chance(0.5)
	case 2:
		prefix := make([]any, g.rnd.IntN(4))
		for i := range prefix {
			prefix[i] = g.schema(depth + 1)
		}
		s["prefixItems"] = prefix
		if g.chance(0.6) {
			s["items"] = g.schema(depth + 1)
		}
		if g.chance(0.3) {
			s["minItems"] = g.rnd.IntN(3)
		}
	case 3:
		items := make([]any, 1+g.rnd.IntN(3))
		for i := range items {
			items[i] = g.schema(depth + 1)
		}
		s["items"] = items
		if g.chance(0.6) {
			s["additionalItems"] = g.schema(depth + 1)
		}
	default:
		s["items"] = g.schema(depth + 1)
	}
}

// malformed puts keyword values of the wrong JSON type into s.
func (g *schemaGen) malformed(s map[string]any) {
	bad := []any{5, "x", nil, []any{1}, map[string]any{"k": 1}, true}
	for _, k := range []string{"type", "properties", "required", "items", "enum", "anyOf", "allOf", "$ref", "additionalProperties", "prefixItems", "minItems", "description"} {
		if g.chance(0.3) {
			s[k] = bad[g.rnd.IntN(len(bad))]
		}
	}
}

func (g *schemaGen) docs(s map[string]any) {
	if g.chance(0.3) {
		s["description"] = g.pick(genDocs)
	}
	if g.chance(0.1) {
		s["title"] = g.pick(genDocs)
	}
	if g.chance(0.1) {
		s["default"] = g.value(0)
	}
	if g.chance(0.1) {
		s["deprecated"] = true
	}
	if g.chance(0.1) {
		s["format"] = g.pick([]string{"date-time", "uri", "x*/y"})
	}
	if g.chance(0.1) {
		s["pattern"] = g.pick([]string{"^[a-z]+$", "a*/b", "line\nbreak"})
	}
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "maxLength", "multipleOf"} {
		if g.chance(0.03) {
			s[k] = g.rnd.IntN(100)
		}
	}
}

// value returns a JSON value for const, enum and default.
func (g *schemaGen) value(depth int) any {
	switch g.rnd.IntN(9) {
	case 0:
		return nil
	case 1:
		return g.chance(0.5)
	case 2:
		return g.rnd.IntN(2000) - 1000
	case 3:
		return json.Number(g.pick([]string{"1.5", "-0", "1e999", "12345678901234567890", "-2.5e-3"}))
	case 4:
		if depth < 3 {
			vs := make([]any, g.rnd.IntN(3))
			for i := range vs {
				vs[i] = g.value(depth + 1)
			}
			return vs
		}
	case 5:
		if depth < 3 {
			return map[string]any{g.pick(genKeys): g.value(depth + 1)}
		}
	}
	return g.pick(genStrings)
}

// signature returns a random tool path whose segments need both dot and
// bracket access.
func (g *schemaGen) path() []string {
	segs := []string{"ns", "my-ns", "$codemode", "resolve-library-id", "2nd", "default", "with space", "quote\"d", "ok_1"}
	p := make([]string, 1+g.rnd.IntN(3))
	for i := range p {
		p[i] = g.pick(segs)
	}
	return p
}
