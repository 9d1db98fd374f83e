package openapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/pb33f/go-yaml"

	"github.com/codemode-go/codemode"
)

// Bounds of one converted schema. References are inlined, so without them
// a recursive or densely cross-referenced document (GitHub's embeds a full
// repository object in hundreds of places) would produce schemas of
// unbounded size. The walk is breadth-first, so when a bound is hit the
// outer shape survives and only the deepest parts are cut.
const (
	// maxRefRepeat is how often one reference may be expanded along a
	// single path: a recursive schema shows this many levels, then its
	// recursive slot becomes {} with a note.
	maxRefRepeat = 2
	// maxSchemaDepth is the deepest nesting kept. The runtime's data
	// boundary stops at 32 levels, so deeper structure is never usable.
	maxSchemaDepth = 24
	// maxSchemaNodes bounds the subschemas of one tool's input or output.
	maxSchemaNodes = 1500
	// maxRefHops bounds a chain of references to references.
	maxRefHops = 32
)

// Notes written into the description of a subschema that was cut.
const (
	noteRecursive  = "(recursive reference to %s, not expanded further)"
	noteTruncated  = "(schema truncated: too large or too deeply nested)"
	noteUnresolved = "(unresolved reference %s)"
)

// direction says which side of an exchange a schema describes: OpenAPI's
// readOnly properties are never sent and writeOnly ones never returned.
type direction int

const (
	forRequest direction = iota
	forResponse
	// forBoth is a named type's: one declaration serves requests and
	// responses, so readOnly and writeOnly properties stay, optional.
	forBoth
)

// converter turns schema nodes of one document into self-contained JSON
// Schemas (2020-12, as jsonschema.Schema models it). It reads the raw YAML
// nodes rather than libopenapi's schema model so that every keyword,
// reference siblings and recursion are under its own control.
type converter struct {
	root     *yaml.Node            // the document's top-level mapping
	oas30    bool                  // OpenAPI 3.0: nullable, boolean exclusive bounds, $ref siblings ignored
	pointers map[string]*yaml.Node // resolved local references; nil means unresolvable
	patterns map[string]bool       // whether a pattern compiles with Go's regexp
	// named: a reference to components/schemas below a schema's top
	// becomes a reference to the named type rather than a copy of it.
	named bool
}

func newConverter(root *yaml.Node, oas30 bool) *converter {
	return &converter{root: root, oas30: oas30, pointers: map[string]*yaml.Node{}, patterns: map[string]bool{}}
}

// schemasRef is where a document names its schemas.
const schemasRef = "#/components/schemas/"

// namedRef returns the name of the schema a reference names in
// components/schemas, when it resolves.
func (c *converter) namedRef(ref string) (string, bool) {
	if !c.named {
		return "", false
	}
	tok, ok := strings.CutPrefix(ref, schemasRef)
	if !ok {
		return "", false
	}
	if t, err := url.PathUnescape(tok); err == nil {
		tok = t
	}
	if tok == "" || strings.Contains(tok, "/") {
		return "", false
	}
	if c.resolve(ref) == nil {
		return "", false
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~"), true
}

// schemaNames lists the document's named schemas in order.
func (c *converter) schemaNames() []string {
	schemas := mapValue(mapValue(deAlias(c.root), "components"), "schemas")
	if schemas = deAlias(schemas); schemas.Kind != yaml.MappingNode {
		return nil
	}
	var names []string
	for i := 0; i+1 < len(schemas.Content); i += 2 {
		names = append(names, schemas.Content[i].Value)
	}
	return names
}

// types makes the document's named schemas the tools' named types,
// converted on demand: the converter is shared, so conversions take
// turns.
func (c *converter) types() *codemode.Types {
	names := c.schemaNames()
	if len(names) == 0 {
		// Still a Types: it is what bounds the signatures, whose parts
		// tools.$codemode.types reads.
		c.named = false
		return &codemode.Types{}
	}
	var mu sync.Mutex
	done := map[string]*jsonschema.Schema{}
	return &codemode.Types{Names: names, Schema: func(name string) *jsonschema.Schema {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := done[name]; ok {
			return s
		}
		s := c.convertNamed(name)
		done[name] = s
		return s
	}}
}

// convertNamed converts the named schema name, or returns nil when the
// document has none by that name.
func (c *converter) convertNamed(name string) *jsonschema.Schema {
	schemas := mapValue(mapValue(deAlias(c.root), "components"), "schemas")
	n := mapValue(deAlias(schemas), name)
	if n == nil {
		return nil
	}
	return c.convert(n, forBoth)
}

// refChain is the list of references expanded on the path to a subschema.
type refChain struct {
	ref string
	up  *refChain
}

func (c *refChain) count(ref string) int {
	n := 0
	for ; c != nil; c = c.up {
		if c.ref == ref {
			n++
		}
	}
	return n
}

type task struct {
	node  *yaml.Node
	dst   *jsonschema.Schema
	refs  *refChain
	depth int
}

// walk is one breadth-first conversion.
type walk struct {
	c       *converter
	dir     direction
	nameTop bool // a reference at the top names its type too
	queue   []task
	budget  int
}

// convert returns the schema for node (nil means "any": an empty schema).
func (c *converter) convert(node *yaml.Node, dir direction) *jsonschema.Schema {
	root := &jsonschema.Schema{}
	if node == nil {
		return root
	}
	// A response that is a named schema reads best as that name; a
	// request's top is taken apart into the input's fields.
	w := &walk{c: c, dir: dir, budget: maxSchemaNodes, nameTop: dir == forResponse}
	w.queue = append(w.queue, task{node: node, dst: root})
	for i := 0; i < len(w.queue); i++ {
		t := w.queue[i]
		w.queue[i] = task{} // let the nodes go as the queue advances
		if w.budget <= 0 || t.depth > maxSchemaDepth {
			addNote(t.dst, noteTruncated)
			continue
		}
		w.budget--
		w.fill(t)
	}
	return root
}

// child queues node for conversion into a new schema and returns it.
func (w *walk) child(node *yaml.Node, t task) *jsonschema.Schema {
	s := &jsonschema.Schema{}
	w.queue = append(w.queue, task{node: node, dst: s, refs: t.refs, depth: t.depth + 1})
	return s
}

// nodeState carries keywords that only make sense together, resolved once
// all of a node's keywords (and its reference siblings) are read.
type nodeState struct {
	nullable         bool
	exclusiveMinimum bool // OpenAPI 3.0 boolean form
	exclusiveMaximum bool
	dropped          map[string]bool // properties left out for this direction
}

func (w *walk) fill(t task) {
	n := deAlias(t.node)
	var overlays []*yaml.Node
	for hops := 0; ; hops++ {
		ref, ok := refOf(n)
		if !ok {
			break
		}
		if hops >= maxRefHops {
			addNote(t.dst, noteTruncated)
			return
		}
		// OpenAPI 3.0 ignores a reference's siblings; 3.1 (JSON Schema
		// 2020-12) applies them too. They are laid over the target, which
		// is what documents mean by a description beside a $ref.
		if !w.c.oas30 && len(n.Content) > 2 {
			overlays = append(overlays, n)
		}
		if name, ok := w.c.namedRef(ref); ok && (t.depth > 0 || w.nameTop) {
			t.dst.Ref = codemode.TypeRef(name)
			return
		}
		if t.refs.count(ref) >= maxRefRepeat {
			addNote(t.dst, fmt.Sprintf(noteRecursive, refName(ref)))
			return
		}
		target := w.c.resolve(ref)
		if target == nil {
			addNote(t.dst, fmt.Sprintf(noteUnresolved, refName(ref)))
			return
		}
		t.refs = &refChain{ref: ref, up: t.refs}
		n = target
	}
	if n.Kind == yaml.ScalarNode {
		if b, ok := boolValue(n); ok && !b {
			t.dst.Not = &jsonschema.Schema{} // the schema false: nothing is valid
		}
		return
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	var st nodeState
	w.apply(t, n, &st)
	for i := len(overlays) - 1; i >= 0; i-- {
		w.apply(t, overlays[i], &st)
	}
	finish(t.dst, &st)
}

// apply reads the keywords of one mapping node into t.dst.
func (w *walk) apply(t task, n *yaml.Node, st *nodeState) {
	s := t.dst
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i].Value, deAlias(n.Content[i+1])
		switch key {
		case "type":
			s.Type, s.Types = "", nil
			for _, ty := range stringsOf(v) {
				if validType(ty) && !slices.Contains(s.Types, ty) {
					s.Types = append(s.Types, ty)
				}
			}
			if len(s.Types) == 1 {
				s.Type, s.Types = s.Types[0], nil
			}
		case "nullable":
			st.nullable, _ = boolValue(v)
		case "title":
			s.Title = strings.TrimSpace(v.Value)
		case "description":
			s.Description = strings.TrimSpace(v.Value)
		case "format":
			s.Format = v.Value
		case "pattern":
			if w.c.compiles(v.Value) {
				s.Pattern = v.Value
			} else {
				// JSON Schema patterns are ECMAScript; Go's RE2 lacks
				// lookaround and backreferences. Keep it for the reader.
				addNote(s, "Pattern: "+v.Value)
			}
		case "deprecated":
			s.Deprecated, _ = boolValue(v)
		case "readOnly":
			s.ReadOnly, _ = boolValue(v)
		case "writeOnly":
			s.WriteOnly, _ = boolValue(v)
		case "uniqueItems":
			s.UniqueItems, _ = boolValue(v)
		case "enum":
			if v.Kind == yaml.SequenceNode {
				s.Enum = make([]any, 0, len(v.Content))
				for _, e := range v.Content {
					s.Enum = append(s.Enum, yamlValue(e, 0))
				}
			}
		case "const":
			c := yamlValue(v, 0)
			s.Const = &c
		case "default":
			if b, err := json.Marshal(yamlValue(v, 0)); err == nil {
				s.Default = b
			}
		case "multipleOf":
			if f, ok := floatValue(v); ok && f > 0 {
				s.MultipleOf = &f
			}
		case "minimum":
			s.Minimum = floatPtr(v)
		case "maximum":
			s.Maximum = floatPtr(v)
		case "exclusiveMinimum":
			if b, ok := boolValue(v); ok {
				st.exclusiveMinimum = b
			} else {
				s.ExclusiveMinimum = floatPtr(v)
			}
		case "exclusiveMaximum":
			if b, ok := boolValue(v); ok {
				st.exclusiveMaximum = b
			} else {
				s.ExclusiveMaximum = floatPtr(v)
			}
		case "minLength":
			s.MinLength = intPtr(v)
		case "maxLength":
			s.MaxLength = intPtr(v)
		case "minItems":
			s.MinItems = intPtr(v)
		case "maxItems":
			s.MaxItems = intPtr(v)
		case "minProperties":
			s.MinProperties = intPtr(v)
		case "maxProperties":
			s.MaxProperties = intPtr(v)
		case "minContains":
			s.MinContains = intPtr(v)
		case "maxContains":
			s.MaxContains = intPtr(v)
		case "required":
			if v.Kind != yaml.SequenceNode {
				break // "required: true" on a property is a common 3.0 mistake
			}
			s.Required = nil
			for _, r := range stringsOf(v) {
				if !slices.Contains(s.Required, r) {
					s.Required = append(s.Required, r)
				}
			}
		case "properties":
			w.properties(t, v, st)
		case "patternProperties":
			if v.Kind == yaml.MappingNode {
				s.PatternProperties = map[string]*jsonschema.Schema{}
				for j := 0; j+1 < len(v.Content); j += 2 {
					if p := v.Content[j].Value; w.c.compiles(p) {
						s.PatternProperties[p] = w.child(v.Content[j+1], t)
					}
				}
			}
		case "additionalProperties":
			s.AdditionalProperties = w.schemaOrBool(v, t)
		case "unevaluatedProperties":
			s.UnevaluatedProperties = w.schemaOrBool(v, t)
		case "propertyNames":
			s.PropertyNames = w.child(v, t)
		case "items":
			if v.Kind == yaml.SequenceNode { // draft 4 tuples, not OpenAPI, but seen
				s.PrefixItems = w.children(v, t)
			} else {
				s.Items = w.schemaOrBool(v, t)
			}
		case "prefixItems":
			s.PrefixItems = w.children(v, t)
		case "unevaluatedItems":
			s.UnevaluatedItems = w.schemaOrBool(v, t)
		case "contains":
			s.Contains = w.child(v, t)
		case "allOf":
			s.AllOf = w.children(v, t)
		case "anyOf":
			s.AnyOf = w.children(v, t)
		case "oneOf":
			s.OneOf = w.children(v, t)
		case "not":
			s.Not = w.child(v, t)
		case "if":
			s.If = w.child(v, t)
		case "then":
			s.Then = w.child(v, t)
		case "else":
			s.Else = w.child(v, t)
		case "dependentRequired":
			if v.Kind == yaml.MappingNode {
				s.DependentRequired = map[string][]string{}
				for j := 0; j+1 < len(v.Content); j += 2 {
					if r := deAlias(v.Content[j+1]); r.Kind == yaml.SequenceNode {
						s.DependentRequired[v.Content[j].Value] = stringsOf(r)
					}
				}
			}
		case "dependentSchemas":
			if v.Kind == yaml.MappingNode {
				s.DependentSchemas = map[string]*jsonschema.Schema{}
				for j := 0; j+1 < len(v.Content); j += 2 {
					s.DependentSchemas[v.Content[j].Value] = w.child(v.Content[j+1], t)
				}
			}
		case "contentEncoding":
			s.ContentEncoding = v.Value
		case "contentMediaType":
			s.ContentMediaType = v.Value
		case "$dynamicRef", "$recursiveRef":
			addNote(s, fmt.Sprintf(noteUnresolved, v.Value))
		}
		// Everything else ($id, $defs, examples, discriminator, xml,
		// extensions, ...) is dropped: the result must stand alone, and
		// examples would only add weight to every signature.
	}
}

// properties reads a properties mapping, leaving out the properties that
// cannot appear in this direction (readOnly in requests, writeOnly in
// responses).
func (w *walk) properties(t task, v *yaml.Node, st *nodeState) {
	if v.Kind != yaml.MappingNode {
		return
	}
	s := t.dst
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{}
	}
	for j := 0; j+1 < len(v.Content); j += 2 {
		name, pn := v.Content[j].Value, v.Content[j+1]
		if w.dir == forBoth {
			if w.c.hiddenIn(pn, forRequest) || w.c.hiddenIn(pn, forResponse) {
				if st.dropped == nil {
					st.dropped = map[string]bool{}
				}
				st.dropped[name] = true // optional, since one side lacks it
			}
		} else if w.c.hiddenIn(pn, w.dir) {
			if st.dropped == nil {
				st.dropped = map[string]bool{}
			}
			st.dropped[name] = true
			continue
		}
		if _, dup := s.Properties[name]; !dup {
			s.PropertyOrder = append(s.PropertyOrder, name)
		}
		s.Properties[name] = w.child(pn, t)
	}
}

func (w *walk) children(v *yaml.Node, t task) []*jsonschema.Schema {
	if v.Kind != yaml.SequenceNode {
		return nil
	}
	out := make([]*jsonschema.Schema, 0, len(v.Content))
	for _, e := range v.Content {
		out = append(out, w.child(e, t))
	}
	return out
}

// schemaOrBool converts a keyword that takes a schema or a boolean.
func (w *walk) schemaOrBool(v *yaml.Node, t task) *jsonschema.Schema {
	if b, ok := boolValue(v); ok {
		if b {
			return &jsonschema.Schema{}
		}
		return &jsonschema.Schema{Not: &jsonschema.Schema{}}
	}
	return w.child(v, t)
}

// finish settles the keywords that depend on each other.
func finish(s *jsonschema.Schema, st *nodeState) {
	if st.nullable {
		switch {
		case s.Type != "":
			s.Types, s.Type = []string{s.Type, "null"}, ""
		case len(s.Types) > 0 && !slices.Contains(s.Types, "null"):
			s.Types = append(s.Types, "null")
		}
		if s.Enum != nil && !slices.Contains(s.Enum, any(nil)) {
			s.Enum = append(s.Enum, nil)
		}
	}
	if st.exclusiveMinimum && s.Minimum != nil {
		s.ExclusiveMinimum, s.Minimum = s.Minimum, nil
	}
	if st.exclusiveMaximum && s.Maximum != nil {
		s.ExclusiveMaximum, s.Maximum = s.Maximum, nil
	}
	if len(st.dropped) > 0 {
		s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return st.dropped[r] })
	}
}

// hiddenIn reports whether a property schema is readOnly (for requests)
// or writeOnly (for responses), looking through references.
func (c *converter) hiddenIn(n *yaml.Node, dir direction) bool {
	key := "readOnly"
	if dir == forResponse {
		key = "writeOnly"
	}
	for hops := 0; hops < maxRefHops; hops++ {
		n = deAlias(n)
		if v := mapValue(n, key); v != nil {
			b, _ := boolValue(deAlias(v))
			return b
		}
		ref, ok := refOf(n)
		if !ok {
			return false
		}
		if n = c.resolve(ref); n == nil {
			return false
		}
	}
	return false
}

// resolve finds a local reference ("#/components/schemas/Pet") in the
// document. Other references (other files, URLs, $id-based) resolve to nil:
// the converter never reads anything but the document it was given.
func (c *converter) resolve(ref string) *yaml.Node {
	if n, ok := c.pointers[ref]; ok {
		return n
	}
	var n *yaml.Node
	if frag, ok := strings.CutPrefix(ref, "#"); ok && (frag == "" || strings.HasPrefix(frag, "/")) {
		if f, err := url.PathUnescape(frag); err == nil {
			frag = f
		}
		n = c.root
		if frag != "" {
			for _, tok := range strings.Split(frag[1:], "/") {
				tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
				n = child(n, tok)
				if n == nil {
					break
				}
			}
		}
	}
	c.pointers[ref] = n
	return n
}

// child steps a JSON pointer token into a mapping or sequence node.
func child(n *yaml.Node, tok string) *yaml.Node {
	n = deAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		return mapValue(n, tok)
	case yaml.SequenceNode:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(n.Content) {
			return nil
		}
		return n.Content[i]
	}
	return nil
}

func (c *converter) compiles(pattern string) bool {
	ok, seen := c.patterns[pattern]
	if !seen {
		_, err := regexp.Compile(pattern)
		ok = err == nil
		c.patterns[pattern] = ok
	}
	return ok
}

// --- YAML helpers ---

func deAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind == yaml.AliasNode {
		return &yaml.Node{}
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return deAlias(n.Content[0])
	}
	return n
}

// mapValue returns the value of key in a mapping node, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// refOf returns the $ref of a mapping node.
func refOf(n *yaml.Node) (string, bool) {
	v := mapValue(n, "$ref")
	if v == nil {
		return "", false
	}
	v = deAlias(v)
	return v.Value, v.Kind == yaml.ScalarNode
}

// refName is the readable tail of a reference, for notes.
func refName(ref string) string {
	if i := strings.LastIndex(ref, "/"); i >= 0 && i < len(ref)-1 {
		return ref[i+1:]
	}
	return ref
}

func boolValue(n *yaml.Node) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		return false, false
	}
	b, err := strconv.ParseBool(strings.ToLower(n.Value))
	return b, err == nil
}

func floatValue(n *yaml.Node) (float64, bool) {
	if n.Kind != yaml.ScalarNode {
		return 0, false
	}
	if t := n.ShortTag(); t != "!!int" && t != "!!float" {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func floatPtr(n *yaml.Node) *float64 {
	if f, ok := floatValue(n); ok {
		return &f
	}
	return nil
}

func intPtr(n *yaml.Node) *int {
	f, ok := floatValue(n)
	if !ok || f < 0 || f > math.MaxInt32 || f != math.Trunc(f) {
		return nil
	}
	i := int(f)
	return &i
}

func stringsOf(n *yaml.Node) []string {
	switch n.Kind {
	case yaml.ScalarNode:
		return []string{n.Value}
	case yaml.SequenceNode:
		out := make([]string, 0, len(n.Content))
		for _, e := range n.Content {
			if e = deAlias(e); e.Kind == yaml.ScalarNode {
				out = append(out, e.Value)
			}
		}
		return out
	}
	return nil
}

func validType(t string) bool {
	switch t {
	case "string", "number", "integer", "boolean", "array", "object", "null":
		return true
	}
	return false
}

// yamlValue decodes a node into a JSON-compatible value (float64 numbers,
// map[string]any objects). Depth is bounded because aliases can nest.
func yamlValue(n *yaml.Node, depth int) any {
	n = deAlias(n)
	if depth > 32 {
		return nil
	}
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			b, _ := boolValue(n)
			return b
		case "!!int", "!!float":
			if f, ok := floatValue(n); ok {
				return f
			}
		}
		return n.Value
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			out = append(out, yamlValue(e, depth+1))
		}
		return out
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			out[n.Content[i].Value] = yamlValue(n.Content[i+1], depth+1)
		}
		return out
	}
	return nil
}

// addNote appends a note to a schema's description.
func addNote(s *jsonschema.Schema, note string) {
	if s.Description == "" {
		s.Description = note
	} else if !strings.Contains(s.Description, note) {
		s.Description += " " + note
	}
}
