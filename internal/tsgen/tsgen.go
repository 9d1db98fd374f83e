package tsgen

import (
	"encoding/json"
	"strings"
)

// Limits that keep every render bounded whatever the input.
const (
	// maxDepth is how many levels of object and array structure render;
	// deeper ones become unknown. Deep types cost a model's context and
	// rarely help it write a call.
	maxDepth = 8
	// maxExpansions caps how many $refs one render expands inline, since
	// a diamond of references can otherwise grow the output exponentially.
	maxExpansions = 200
	// maxVisits caps how many schemas one render visits, bounding output
	// size even when each expansion is itself large.
	maxVisits = 20000
	// maxNesting caps recursion through keywords that add no structure
	// (allOf inside anyOf inside allOf...).
	maxNesting = 64
	// maxIndexWidth is the largest widened index signature, in type nodes,
	// kept before it is replaced by unknown.
	maxIndexWidth = 16
)

// Type renders a JSON Schema, given as raw JSON in any draft (2020-12,
// draft-07, OpenAPI 3.0 with nullable), as a TypeScript type. The one-line
// form (pretty false) has no comments; the pretty form puts one field per
// line, indented by two spaces per level, with a JSDoc comment above each
// property that has a description or constraints. Malformed input renders
// as unknown.
func Type(schema json.RawMessage, pretty bool) string {
	root, ok := parse(schema)
	if !ok {
		return "unknown"
	}
	return format(newRenderer(root).schema(root, 0), pretty)
}

// Signature renders the declaration a model sees for one tool:
//
//	tools.ns.tool(input: In): Promise<Out>
//
// Path segments that are JavaScript identifiers use dot access and the
// others bracket access with a quoted key (tools.context7["resolve-id"]).
// An absent input schema gives input?: Record<string, unknown>, and an
// object input whose properties are all optional makes input optional. An
// absent output schema gives Promise<unknown>. The pretty form puts the
// description in a JSDoc comment above the signature, followed by tags
// (such as "@readonly"), each on a line of its own.
func Signature(path []string, description string, tags []string, in, out json.RawMessage, pretty bool) string {
	var b strings.Builder
	if pretty {
		doc := docText(description)
		if len(tags) > 0 && len(doc) > 0 {
			doc = append(doc, "")
		}
		writeDoc(&b, append(doc, tags...), 0)
	}
	b.WriteString(AccessPath(path))
	b.WriteString("(")
	b.WriteString(inputParam(in, pretty))
	b.WriteString("): Promise<")
	b.WriteString(outputType(out, pretty))
	b.WriteString(">")
	return b.String()
}

// AccessPath spells the expression that reaches a tool from the tools
// object: tools.ns.tool, or tools.ns["odd-name"] for segments that are not
// identifiers.
func AccessPath(path []string) string {
	var b strings.Builder
	b.WriteString("tools")
	for _, seg := range path {
		if isIdentifier(seg) {
			b.WriteString(".")
			b.WriteString(seg)
		} else {
			b.WriteString("[")
			b.WriteString(quote(seg))
			b.WriteString("]")
		}
	}
	return b.String()
}

const anyInput = "input?: Record<string, unknown>"

func inputParam(in json.RawMessage, pretty bool) string {
	if absent(in) {
		return anyInput
	}
	root, ok := parse(in)
	if !ok {
		return anyInput
	}
	t := newRenderer(root).schema(root, 0)
	// Tool inputs are objects; a schema that says nothing useful reads
	// better as a record than as unknown.
	if t.is(tUnknown) {
		return anyInput
	}
	name := "input: "
	if allOptional(t) {
		name = "input?: "
	}
	return name + format(t, pretty)
}

func allOptional(t *tnode) bool {
	if t.kind != kObject {
		return false
	}
	for _, p := range t.props {
		if !p.optional {
			return false
		}
	}
	return true
}

func outputType(out json.RawMessage, pretty bool) string {
	if absent(out) {
		return "unknown"
	}
	return Type(out, pretty)
}

// renderer holds the state of one render: the document that references
// resolve against and the budgets that keep the render bounded.
type renderer struct {
	root       any
	named      func(ref string) (string, bool) // see Options.Named
	stack      []*object                       // schemas being expanded through $ref, for cycles
	expansions int
	visits     int
	nesting    int
}

func newRenderer(root any) *renderer {
	r := &renderer{root: root}
	// A reference to the whole document from inside it is a cycle too.
	if o, ok := root.(*object); ok {
		r.stack = append(r.stack, o)
	}
	return r
}

// schema renders one schema. depth counts the object and array levels
// around it.
func (r *renderer) schema(s any, depth int) *tnode {
	var o *object
	switch v := s.(type) {
	case bool:
		if v {
			return tUnknown
		}
		return tNever
	case *object:
		o = v
	default:
		return tUnknown
	}
	if r.visits >= maxVisits || r.nesting >= maxNesting {
		return tUnknown
	}
	r.visits++
	r.nesting++
	defer func() { r.nesting-- }()

	base, bare := r.base(o, depth)
	parts := []*tnode{base}
	if ref, ok := o.str("$ref"); ok {
		parts = append(parts, r.ref(ref, depth))
	}
	if all, ok := o.vals["allOf"].([]any); ok {
		for _, m := range all {
			parts = append(parts, r.schema(m, depth))
		}
	}
	for _, k := range [...]string{"anyOf", "oneOf"} {
		if alts, ok := o.vals[k].([]any); ok {
			ms := make([]*tnode, len(alts))
			for i, m := range alts {
				ms[i] = r.schema(m, depth)
			}
			parts = append(parts, union(ms...))
		}
	}
	// "type": "object" alone next to a composition only repeats what the
	// composed object types say; as { [key: string]: unknown } it would
	// add noise to every intersection.
	if bare && anyObjectish(parts[1:], nil) {
		parts = parts[1:]
	}
	t := inter(parts...)
	if o.isTrue("nullable") || o.isTrue("x-nullable") {
		t = union(t, tNull)
	}
	return t
}

// base renders the keywords that describe a value directly (type, const,
// enum and the structure keywords), ignoring composition. bare reports an
// object type that came from "type": "object" with nothing else to say.
func (r *renderer) base(o *object, depth int) (t *tnode, bare bool) {
	if c, ok := o.get("const"); ok {
		return literal(c), false
	}
	if e, ok := o.vals["enum"].([]any); ok {
		ms := make([]*tnode, len(e))
		for i, v := range e {
			ms[i] = literal(v)
		}
		return union(ms...), false
	}
	var types []string
	switch v := o.vals["type"].(type) {
	case string:
		types = []string{v}
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
	default:
		// Without a type, structure keywords still say what is meant.
		switch {
		case hasAny(o, "properties", "additionalProperties", "patternProperties"):
			types = []string{"object"}
		case hasAny(o, "items", "prefixItems", "additionalItems"):
			types = []string{"array"}
		default:
			return tUnknown, false
		}
	}
	ms := make([]*tnode, 0, len(types))
	for _, ty := range types {
		switch ty {
		case "string":
			ms = append(ms, tString)
		case "number", "integer":
			ms = append(ms, tNumber)
		case "boolean":
			ms = append(ms, tBoolean)
		case "null":
			ms = append(ms, tNull)
		case "object":
			obj := r.object(o, depth)
			bare = len(types) == 1 && !hasAny(o, "properties", "additionalProperties", "patternProperties", "unevaluatedProperties")
			ms = append(ms, obj)
		case "array":
			ms = append(ms, r.array(o, depth))
		default:
			ms = append(ms, tUnknown)
		}
	}
	if len(ms) == 0 {
		// "type": [] or a list of non-strings: malformed, so say nothing.
		return tUnknown, false
	}
	return union(ms...), bare
}

func hasAny(o *object, keys ...string) bool {
	for _, k := range keys {
		if _, ok := o.vals[k]; ok {
			return true
		}
	}
	return false
}
