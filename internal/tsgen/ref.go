package tsgen

import (
	"net/url"
	"strconv"
	"strings"
)

// ref expands a $ref inline. A reference into a schema that is already
// being expanded is a cycle and renders as unknown, as does one past the
// expansion budget or one that does not resolve.
func (r *renderer) ref(ref string, depth int) *tnode {
	if r.named != nil {
		if name, ok := r.named(ref); ok {
			return &tnode{kind: kRef, text: name}
		}
	}
	target, ok := resolve(r.root, ref)
	if !ok {
		return tUnknown
	}
	if o, ok := target.(*object); ok {
		for _, s := range r.stack {
			if s == o {
				return tUnknown
			}
		}
		if r.expansions >= maxExpansions {
			return tUnknown
		}
		r.expansions++
		r.stack = append(r.stack, o)
		defer func() { r.stack = r.stack[:len(r.stack)-1] }()
	}
	return r.schema(target, depth)
}

// resolve follows a same-document reference: "#" and a JSON pointer in
// the URI fragment, percent-decoded first (RFC 3986) and then unescaped
// token by token (~1 is /, ~0 is ~; RFC 6901). It never fetches: any other
// reference does not resolve.
func resolve(root any, ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, false
	}
	if frag == "" {
		return root, true
	}
	if frag[0] != '/' {
		return nil, false // a plain-name fragment ($anchor) is not followed
	}
	cur := root
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case *object:
			v, ok := c.vals[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) || strconv.Itoa(i) != tok {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// follow returns the schema a pure reference points to, for reading its
// documentation; hops bounds chains of references to references.
func (r *renderer) follow(o *object) *object {
	for hops := 0; hops < 8; hops++ {
		ref, ok := o.str("$ref")
		if !ok {
			return nil
		}
		if r.named != nil {
			// A named type's documentation is in its declaration.
			if _, named := r.named(ref); named {
				return nil
			}
		}
		t, ok := resolve(r.root, ref)
		if !ok {
			return nil
		}
		next, ok := t.(*object)
		if !ok {
			return nil
		}
		if _, more := next.vals["$ref"]; !more {
			return next
		}
		o = next
	}
	return nil
}
