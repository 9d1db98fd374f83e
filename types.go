package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/codemode-go/codemode/internal/guest"
	"github.com/google/jsonschema-go/jsonschema"
)

// Types are named JSON Schemas that the tools of one source share (an
// OpenAPI document's components/schemas), so that each is described once
// rather than at every use. A tool whose Types is set refers to one from
// its Input or Output as {"$ref": "#/$defs/<name>"} (the name escaped as
// a JSON pointer token, then as a URI fragment) without defining it in
// $defs. Its signature then names the type (Customer) instead of spelling
// it out, the catalog lists the names a signature uses, and a program
// reads a declaration with tools.$codemode.types (the host with
// [Runtime.Types]).
type Types struct {
	// Names lists the types, in the order the source gives them.
	Names []string

	// Schema returns the schema of a name in Names, or nil when there is
	// none. It is called when the type is first needed (a declaration, or
	// the first validation of an input that uses it), once per name and
	// Runtime, and must be safe for concurrent use.
	Schema func(name string) *jsonschema.Schema
}

// defsRef is the reference prefix a tool uses for a named type.
const defsRef = "#/$defs/"

// TypeRef returns the reference a schema uses for the named type name of
// a [Types]: "#/$defs/" and the name escaped.
func TypeRef(name string) string {
	tok := strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
	return defsRef + url.PathEscape(tok)
}

// typeOfRef is TypeRef's inverse.
func typeOfRef(ref string) (string, bool) {
	tok, ok := strings.CutPrefix(ref, defsRef)
	if !ok {
		return "", false
	}
	tok, err := url.PathUnescape(tok)
	if err != nil || strings.Contains(tok, "/") {
		return "", false
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~"), true
}

// TypeEntry is the declaration of one named type.
type TypeEntry struct {
	// Name is the type's name in signatures.
	Name string `json:"name"`
	// Declaration is its TypeScript declaration, with JSDoc.
	Declaration string `json:"declaration"`
	// Types are the named types the declaration refers to in turn.
	Types []string `json:"types,omitempty"`
}

// TypesResult is what tools.$codemode.types returns.
type TypesResult struct {
	Items []TypeEntry `json:"items"`
	// Unknown lists the names asked for that no type has.
	Unknown []string `json:"unknown,omitempty"`
}

// maxTypesPerCall bounds the names one tools.$codemode.types call takes.
const maxTypesPerCall = 20

// namedType is one type of one Types, under the name signatures use.
type namedType struct {
	set  *Types
	key  string // its name in set
	name string // its name in signatures

	once   sync.Once
	schema json.RawMessage
	decl   guest.Rendered
}

// typeRegistry names the types of every Types a Runtime's tools use, and
// holds the declarations rendered so far. Names are settled when the
// Runtime is made, from the names alone; schemas are converted and
// rendered on demand.
type typeRegistry struct {
	byName map[string]*namedType
	bySet  map[*Types]map[string]*namedType

	// plainParts: some tool without named types has schemas so large
	// that its signature may pass the size bound; such tools' signatures
	// are then bounded too, their deepest parts cut out and named.
	plainParts bool

	mu    sync.Mutex
	parts map[string]guest.Part // parts cut out of signatures and declarations
}

// plainBoundAt is the size of a plain tool's schemas (input and output,
// as JSON) past which its signature may need cutting to fit the bound
// (4,000 bytes): a signature is about as long as its schemas, and smaller
// trees keep the view peers have of them, with no types built-in.
const plainBoundAt = 2000

// newTypeRegistry names the types in tool order, so that names are
// stable: a source's name made an identifier (issue-event → IssueEvent),
// with a number after it when it is taken.
func newTypeRegistry(entries []*toolEntry) *typeRegistry {
	reg := &typeRegistry{byName: map[string]*namedType{}, bySet: map[*Types]map[string]*namedType{}, parts: map[string]guest.Part{}}
	for _, e := range entries {
		set := e.tool.Types
		if set == nil && len(schemaJSON(e.tool.Input))+len(schemaJSON(e.tool.Output)) > plainBoundAt {
			reg.plainParts = true
		}
		if set == nil || reg.bySet[set] != nil {
			continue
		}
		m := map[string]*namedType{}
		reg.bySet[set] = m
		for _, key := range set.Names {
			if m[key] != nil {
				continue
			}
			base := language.TypeName(key)
			name := base
			for i := 2; reg.byName[name] != nil; i++ {
				name = fmt.Sprintf("%s%d", base, i)
			}
			t := &namedType{set: set, key: key, name: name}
			m[key] = t
			reg.byName[name] = t
		}
	}
	return reg
}

// named returns the Named function of a tool's or type's renders.
func (reg *typeRegistry) named(set *Types) func(string) (string, bool) {
	m := reg.bySet[set]
	if m == nil {
		return nil
	}
	return func(ref string) (string, bool) {
		key, ok := typeOfRef(ref)
		if !ok {
			return "", false
		}
		t := m[key]
		if t == nil {
			return "", false
		}
		return t.name, true
	}
}

// load converts a type's schema, once.
func (t *namedType) load(reg *typeRegistry) {
	t.once.Do(func() {
		var s *jsonschema.Schema
		if t.set.Schema != nil {
			s = t.set.Schema(t.key)
		}
		t.schema = schemaJSON(s)
		description := ""
		if s != nil {
			description = s.Description
		}
		t.decl = language.Declare(guest.Type{Name: t.name, Description: description, Schema: t.schema, Named: reg.named(t.set)})
		reg.addParts(t.decl.Parts)
	})
}

func (reg *typeRegistry) addParts(parts []guest.Part) {
	if len(parts) == 0 {
		return
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for _, p := range parts {
		if _, dup := reg.parts[p.Name]; !dup {
			reg.parts[p.Name] = p
		}
	}
}

func (reg *typeRegistry) part(name string) (guest.Part, bool) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	p, ok := reg.parts[name]
	return p, ok
}

// Types returns the declarations of named types: the types of the tools'
// [Types], and the parts a signature or declaration too large for its
// bound was cut into. A name no type has is listed in Unknown.
func (rt *Runtime) Types(names ...string) TypesResult {
	res := TypesResult{Items: []TypeEntry{}}
	for _, name := range names {
		if e, ok := rt.typeEntry(name, true); ok {
			res.Items = append(res.Items, e)
		} else {
			res.Unknown = append(res.Unknown, name)
		}
	}
	return res
}

// typeEntry finds a declaration by name. exhaustive renders what a part
// may have been cut from when the part is not known yet.
func (rt *Runtime) typeEntry(name string, exhaustive bool) (TypeEntry, bool) {
	reg := rt.types
	if t := reg.byName[name]; t != nil {
		t.load(reg)
		return TypeEntry{Name: t.name, Declaration: t.decl.Text, Types: t.decl.Uses}, true
	}
	if !strings.Contains(name, "_") {
		return TypeEntry{}, false
	}
	p, ok := reg.part(name)
	if !ok && exhaustive {
		// A part is known once what it was cut from is rendered; a fresh
		// process may be asked for one it has not rendered yet.
		rt.catalogEntries()
		for _, t := range reg.byName {
			if strings.HasPrefix(name, t.name+"_") {
				t.load(reg)
			}
		}
		p, ok = reg.part(name)
	}
	if !ok {
		return TypeEntry{}, false
	}
	return TypeEntry{Name: p.Name, Declaration: p.Text, Types: p.Uses}, true
}

// validateTypes checks the input of tools.$codemode.types.
func validateTypes(raw json.RawMessage) error {
	var in struct {
		Names []string `json:"names"`
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return errors.New(`the input must be an object { names: string[] }`)
	}
	for k := range m {
		if k != "names" {
			return fmt.Errorf("unknown property %q (expected names)", k)
		}
	}
	if json.Unmarshal(raw, &in) != nil || len(in.Names) == 0 {
		return errors.New("names must be a non-empty array of type names")
	}
	if len(in.Names) > maxTypesPerCall {
		return fmt.Errorf("names may hold at most %d names", maxTypesPerCall)
	}
	return nil
}

// typesTool serves tools.$codemode.types.
func (rt *Runtime) typesTool(_ context.Context, raw json.RawMessage) (any, error) {
	var in struct {
		Names []string `json:"names"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, ToolError("invalid types input")
	}
	return rt.Types(in.Names...), nil
}

// refPattern finds the named types a converted schema refers to.
var refPattern = regexp.MustCompile(`"\$ref":"(#/\$defs/[^"]*)"`)

// typeClosure returns the schemas of the named types a tool's schema
// uses, directly or through each other, keyed as its references spell
// them, so that the schema can be resolved for validation.
func (rt *Runtime) typeClosure(set *Types, s *jsonschema.Schema) map[string]*jsonschema.Schema {
	m := rt.types.bySet[set]
	defs := map[string]*jsonschema.Schema{}
	queue := []json.RawMessage{schemaJSON(s)}
	for len(queue) > 0 {
		raw := queue[0]
		queue = queue[1:]
		for _, sub := range refPattern.FindAllSubmatch(raw, -1) {
			key, ok := typeOfRef(string(sub[1]))
			if !ok {
				continue
			}
			if _, done := defs[key]; done {
				continue
			}
			t := m[key]
			if t == nil {
				continue
			}
			t.load(rt.types)
			var ts jsonschema.Schema
			if json.Unmarshal(t.schema, &ts) != nil {
				continue
			}
			defs[key] = &ts
			queue = append(queue, t.schema)
		}
	}
	return defs
}

// resolveWithTypes resolves a schema that refers to named types, with
// their schemas as its $defs.
func (rt *Runtime) resolveWithTypes(set *Types, s *jsonschema.Schema) (*jsonschema.Resolved, error) {
	defs := rt.typeClosure(set, s)
	cp := *s
	if len(defs) > 0 {
		cp.Defs = defs
		if len(s.Defs) > 0 {
			for k, v := range s.Defs {
				if _, ok := cp.Defs[k]; !ok {
					cp.Defs[k] = v
				}
			}
		}
	}
	return cp.Resolve(nil)
}
