package codemode

import (
	"encoding/json"
	"sync"

	"github.com/codemode-go/codemode/internal/discovery"
	"github.com/codemode-go/codemode/internal/guest"
)

// CatalogEntry describes one tool for the model.
type CatalogEntry struct {
	// Path is the tool's dot-joined path, as in the tool-call audit
	// (orders.refund), in Catalog. In search results it is the call site
	// a program writes (tools.orders.refund, tools.ns["odd-name"]), as
	// tools.$codemode.search gives it; a search for either spelling finds
	// the tool.
	Path        string `json:"path"`
	Description string `json:"description"`
	// Signature is the TypeScript declaration of the call, with the
	// description and parameter documentation as JSDoc.
	Signature string `json:"signature"`
	// Annotations are the tool's, when it has them.
	Annotations *Annotations `json:"annotations,omitempty"`
	// Segments is the path as its segments (names may contain dots).
	Segments []string `json:"-"`
}

// catalog is computed once per Runtime, on first use: rendering a
// thousand signatures takes a noticeable fraction of a second.
type catalog struct {
	once    sync.Once
	entries []CatalogEntry
}

// Catalog lists every tool with its signature, in path order. The
// built-in tools.$codemode.search is not included; Instructions describes
// it.
func (rt *Runtime) Catalog() []CatalogEntry {
	entries := rt.catalogEntries()
	out := make([]CatalogEntry, len(entries))
	copy(out, entries)
	return out
}

func (rt *Runtime) catalogEntries() []CatalogEntry {
	rt.cat.once.Do(func() {
		rt.cat.entries = make([]CatalogEntry, len(rt.tools))
		for i, e := range rt.tools {
			in, out := schemaJSON(e.tool.Input), schemaJSON(e.tool.Output)
			rt.cat.entries[i] = CatalogEntry{
				Path:        e.name,
				Description: e.tool.Description,
				Signature:   language.Signature(guest.Tool{Path: e.path, Description: e.tool.Description, Tags: e.tool.Annotations.tags(), Input: in, Output: out}),
				Annotations: e.tool.Annotations,
				Segments:    e.path,
			}
		}
	})
	return rt.cat.entries
}

func schemaJSON(s any) json.RawMessage {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}

// selectCatalog chooses the signatures the instructions inline within the
// budget (see discovery.Select). They are the complete signatures, JSDoc
// included, that search returns: a model that calls a tool straight from
// the list needs its fields' meanings and constraints as much as one that
// searched (RATIONALE.md, "Why complete signatures in the instructions?").
func selectCatalog(entries []CatalogEntry, budget int) discovery.Selection {
	in := make([]discovery.Entry, len(entries))
	for i, e := range entries {
		in[i] = discovery.Entry{Namespace: e.Segments[0], Path: e.Path, Text: e.Signature}
	}
	return discovery.Select(in, budget)
}
