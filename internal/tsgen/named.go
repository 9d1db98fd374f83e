package tsgen

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// DefaultMaxSize is the bound, in bytes, on a rendered signature or
// declaration when Options.MaxSize is zero. It is about a thousand tokens:
// enough for a whole input object with its documentation, small enough
// that a catalog of hundreds of tools fits a prompt.
const DefaultMaxSize = 4000

// minMaxSize is the smallest bound honoured: below it a render could not
// even name its parts.
const minMaxSize = 200

// Options configure [Render] and [Declare].
type Options struct {
	// Named maps a $ref to the name of a declared type, which the render
	// then refers to instead of expanding it; ok false expands the
	// reference inline as [Signature] does. Nil expands every reference.
	Named func(ref string) (name string, ok bool)

	// MaxSize bounds the text in bytes. Past it, object types are cut
	// out, deepest first, into parts: named declarations the text refers
	// to by name. Zero means DefaultMaxSize; a negative value, no bound.
	MaxSize int

	// Parts is the prefix of the parts' names, followed by "_" and the
	// property path (Parts_Shipping_Address). Names from [TypeName] hold
	// no "_", so a part never takes a declared type's name.
	Parts string
}

// Rendered is a signature or declaration with the names it refers to.
type Rendered struct {
	// Text is the TypeScript.
	Text string
	// Uses lists the named types and parts Text refers to, sorted.
	Uses []string
	// Parts are the declarations cut out of Text to fit MaxSize, each
	// itself within it.
	Parts []Part
}

// Part is a named type declaration cut out of a render.
type Part struct {
	Name string
	Rendered
}

// Render renders the declaration of one tool, as [Signature] does, with
// references Options.Named knows shown by name and the text bounded by
// Options.MaxSize.
func Render(path []string, description string, tags []string, in, out json.RawMessage, opts Options) Rendered {
	inT, outT := tAnyInput, tUnknown
	inName := "input?: "
	if !absent(in) {
		if root, ok := parse(in); ok {
			r := newRenderer(root)
			r.named = opts.Named
			if t := r.schema(root, 0); !t.is(tUnknown) {
				inT, inName = t, "input: "
				if allOptional(t) {
					inName = "input?: "
				}
			}
		}
	}
	if !absent(out) {
		if root, ok := parse(out); ok {
			r := newRenderer(root)
			r.named = opts.Named
			outT = r.schema(root, 0)
		}
	}
	var doc []string
	doc = docText(plainText(description, maxToolDoc))
	if len(tags) > 0 && len(doc) > 0 {
		doc = append(doc, "")
	}
	doc = append(doc, tags...)
	head := AccessPath(path) + "("
	// The parameter and the result are one tree for cutting: a tuple
	// holds them, and the printer below spells them as a call.
	pair := &tnode{kind: kTuple, elems: []*tnode{inT, outT}, req: 2}
	c := newCutter(opts, len(head)+len(inName)+len("): Promise<>")+docSize(doc))
	c.labels = map[*tnode]string{inT: "Input", outT: "Output"}
	parts := c.cut(pair)
	var b strings.Builder
	writeDoc(&b, doc, 0)
	b.WriteString(head)
	b.WriteString(inName)
	b.WriteString(format(pair.elems[0], true))
	b.WriteString("): Promise<")
	b.WriteString(format(pair.elems[1], true))
	b.WriteString(">")
	return finish(b.String(), parts, pair)
}

// tAnyInput prints as the record a tool without an input schema takes.
var tAnyInput = &tnode{kind: kKeyword, text: "Record<string, unknown>"}

// Declare renders a type declaration, type Name = ..., with the
// description as JSDoc, references Options.Named knows shown by name, and
// the text bounded by Options.MaxSize.
func Declare(name, description string, schema json.RawMessage, opts Options) Rendered {
	t := tUnknown
	if root, ok := parse(schema); ok {
		r := newRenderer(root)
		r.named = opts.Named
		t = r.schema(root, 0)
		if description == "" {
			if o, ok := root.(*object); ok {
				description, _ = o.str("description")
			}
		}
	}
	doc := docText(plainText(description, maxToolDoc))
	head := "type " + name + " = "
	c := newCutter(opts, len(head)+1+docSize(doc))
	c.top = 2
	holder := &tnode{kind: kTuple, elems: []*tnode{t}, req: 1}
	parts := c.cut(holder)
	var b strings.Builder
	writeDoc(&b, doc, 0)
	b.WriteString(head)
	b.WriteString(format(holder.elems[0], true))
	b.WriteString(";")
	return finish(b.String(), parts, holder)
}

func finish(text string, parts []Part, root *tnode) Rendered {
	names := map[string]bool{}
	refs(root, names)
	out := Rendered{Text: text, Parts: parts}
	for n := range names {
		out.Uses = append(out.Uses, n)
	}
	slices.Sort(out.Uses)
	return out
}

// refs adds the names a tree refers to: named types and parts.
func refs(n *tnode, names map[string]bool) {
	if n == nil {
		return
	}
	if n.kind == kRef {
		names[n.text] = true
		return
	}
	for _, e := range n.elems {
		refs(e, names)
	}
	refs(n.rest, names)
	refs(n.index, names)
	for _, p := range n.props {
		refs(p.typ, names)
	}
}

func docSize(doc []string) int {
	var b strings.Builder
	writeDoc(&b, doc, 0)
	return b.Len()
}

// cutter cuts parts out of one render.
type cutter struct {
	opts   Options
	max    int
	fixed  int // bytes of the text outside the tree
	labels map[*tnode]string
	taken  map[string]bool
	// top is the depth of the outermost object that may be cut: a
	// declaration's own object cannot be a part of itself.
	top int
}

func newCutter(opts Options, fixed int) *cutter {
	max := opts.MaxSize
	switch {
	case max == 0:
		max = DefaultMaxSize
	case max > 0 && max < minMaxSize:
		max = minMaxSize
	}
	prefix := opts.Parts
	if prefix == "" {
		prefix = "Part"
	}
	opts.Parts = prefix
	return &cutter{opts: opts, max: max, fixed: fixed, taken: map[string]bool{}, top: 1}
}

// candidate is an object type that can be cut out.
type candidate struct {
	n     *tnode
	depth int
	size  int // pretty-printed bytes, at the indentation it has
	name  []string
	up    *candidate // the nearest enclosing candidate
}

// cut replaces object types inside root by references to parts until the
// tree prints within the bound, deepest first and, at one depth, largest
// first: the outer shape a model reads first survives, and what is cut
// is one search away. Each part is cut in turn, with its name as the
// prefix of its own parts.
func (c *cutter) cut(root *tnode) []Part {
	if c.max < 0 {
		return nil
	}
	var cands []*candidate
	var walk func(n *tnode, depth int, name []string, up *candidate, seen map[*tnode]bool)
	walk = func(n *tnode, depth int, name []string, up *candidate, seen map[*tnode]bool) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		if l, ok := c.labels[n]; ok {
			name = []string{l}
		}
		if n.kind == kObject && (len(n.props) > 0 || n.index != nil) && depth >= c.top {
			cd := &candidate{n: n, depth: depth, name: name, up: up, size: len(format(n, true))}
			cands = append(cands, cd)
			up = cd
		}
		for i, e := range n.elems {
			sub := name
			switch n.kind {
			case kArray:
				sub = appendName(name, "Item")
			case kTuple:
				if n != root {
					sub = appendName(name, "Item"+strconv.Itoa(i+1))
				}
			case kUnion, kInter:
				sub = appendName(name, "Variant"+strconv.Itoa(i+1))
			}
			walk(e, depth+1, sub, up, seen)
		}
		walk(n.rest, depth+1, appendName(name, "Rest"), up, seen)
		walk(n.index, depth+1, appendName(name, "Value"), up, seen)
		for _, p := range n.props {
			walk(p.typ, depth+1, appendName(name, p.name), up, seen)
		}
	}
	walk(root, 0, nil, nil, map[*tnode]bool{})
	total := c.fixed + len(format(root, true))
	if total <= c.max {
		return nil
	}
	slices.SortStableFunc(cands, func(a, b *candidate) int {
		if a.depth != b.depth {
			return b.depth - a.depth
		}
		return b.size - a.size
	})
	var parts []Part
	done := map[*candidate]bool{}
	// Small objects are left inline while cutting big ones suffices (a
	// part per two-field object costs more names than it saves), and the
	// outermost object is cut only when nothing inside it is enough. The
	// sizes are estimates (indentation moves as objects are cut out), so
	// the text is measured again after each round.
	for pass := 0; pass < 3 && total > c.max; {
		progress := false
		for _, cd := range cands {
			if total <= c.max {
				break
			}
			if done[cd] || insideCut(cd, done) || (pass < 2 && cd.depth <= c.top) || (pass == 0 && cd.size < minPart) {
				continue
			}
			done[cd] = true
			progress = true
			parts = append(parts, c.take(cd, &total))
		}
		clearLines(root)
		total = c.fixed + len(format(root, true))
		if !progress {
			pass++
		}
	}
	clearLines(root)
	// Parts of parts are listed too, so a caller registers every name.
	var all []Part
	for _, p := range parts {
		all = append(all, p)
		all = append(all, p.Parts...)
	}
	for i := range all {
		all[i].Parts = nil
	}
	return all
}

// insideCut reports a candidate in a part already cut out, whose text
// is already rendered.
func insideCut(cd *candidate, done map[*candidate]bool) bool {
	for u := cd.up; u != nil; u = u.up {
		if done[u] {
			return true
		}
	}
	return false
}

// minPart is the size below which an object is cut only when cutting
// the bigger ones was not enough.
const minPart = 160

// take cuts one candidate out into a part, updating the estimated total
// and the sizes of the candidates around it.
func (c *cutter) take(cd *candidate, total *int) Part {
	name := c.name(cd.name)
	part := *cd.n
	*cd.n = tnode{kind: kRef, text: name}
	saved := cd.size - len(name)
	*total -= saved
	for u := cd.up; u != nil; u = u.up {
		u.size -= saved
	}
	sub := &cutter{opts: c.opts, max: c.max, fixed: len("type " + name + " = ;"), taken: c.taken, top: 2}
	sub.opts.Parts = name
	holder := &tnode{kind: kTuple, elems: []*tnode{&part}, req: 1}
	clearLines(holder)
	subParts := sub.cut(holder)
	return Part{Name: name, Rendered: finish("type "+name+" = "+format(holder.elems[0], true)+";", subParts, holder)}
}

func appendName(name []string, seg string) []string {
	return append(name[:len(name):len(name)], seg)
}

func (c *cutter) name(path []string) string {
	var b strings.Builder
	b.WriteString(c.opts.Parts)
	for _, seg := range path {
		if w := TypeName(seg); w != "" {
			b.WriteString("_")
			b.WriteString(w)
		}
	}
	base := b.String()
	name := base
	for i := 2; c.taken[name]; i++ {
		name = base + strconv.Itoa(i)
	}
	c.taken[name] = true
	return name
}

// clearLines drops the memoized one-line forms of a tree whose nodes were
// cut out.
func clearLines(n *tnode) {
	if n == nil || n.kind == kKeyword || n.kind == kLiteral || n.kind == kRef {
		return
	}
	n.line = ""
	for _, e := range n.elems {
		clearLines(e)
	}
	clearLines(n.rest)
	clearLines(n.index)
	for _, p := range n.props {
		clearLines(p.typ)
	}
}

// TypeName makes a TypeScript type name of a schema's name in a document
// (components/schemas/issue-event → IssueEvent): words of letters and
// digits, each capitalized, joined without separators; a leading digit
// gets a "T" before it, a name of TypeScript's standard library (Error,
// Date, Record) gets "Type" after it, and a name without letters or
// digits becomes "Type". The result never holds "_".
func TypeName(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r)) || r > unicode.MaxASCII {
			up = true
			continue
		}
		if b.Len() == 0 && unicode.IsDigit(r) {
			b.WriteString("T")
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	name := b.String()
	if name == "" {
		return "Type"
	}
	if libNames[name] {
		name += "Type"
	}
	return name
}

// libNames are the global types of TypeScript's es2022 library a
// declaration must not redeclare, and the keywords a type name cannot be.
var libNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`Array ArrayBuffer ArrayBufferLike ArrayBufferView ArrayLike AsyncGenerator
		AsyncIterable AsyncIterator Atomics Awaited BigInt BigInt64Array BigUint64Array Boolean
		Capitalize ConcatArray ConstructorParameters DataView Date DateConstructor Error ErrorConstructor
		EvalError Exclude Extract FinalizationRegistry Float32Array Float64Array Function Generator
		IArguments ImportMeta InstanceType Int16Array Int32Array Int8Array Intl Iterable IterableIterator
		Iterator JSON Lowercase Map Math NaN NoInfer NonNullable Number Object Omit OmitThisParameter
		Parameters Partial Pick Promise PromiseLike PropertyDescriptor PropertyKey Proxy RangeError
		Readonly ReadonlyArray ReadonlyMap ReadonlySet Record ReferenceError Reflect RegExp Required
		ReturnType Set SharedArrayBuffer String Symbol SyntaxError TemplateStringsArray ThisParameterType
		ThisType TypeError TypedPropertyDescriptor URIError Uint16Array Uint32Array Uint8Array
		Uint8ClampedArray Uncapitalize Uppercase WeakMap WeakRef WeakSet Infinity Console`) {
		m[n] = true
	}
	return m
}()
