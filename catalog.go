package codemode

import (
	"encoding/json"
	"runtime"
	"strings"
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
	// Types are the named types the signature refers to, sorted: read
	// their declarations with tools.$codemode.types (Runtime.Types).
	Types []string `json:"types,omitempty"`
	// Annotations are the tool's, when it has them.
	Annotations *Annotations `json:"annotations,omitempty"`
	// Segments is the path as its segments (names may contain dots).
	Segments []string `json:"-"`
}

// catalog is computed once per Runtime, on first use; each entry is
// rendered on its own first use (a search renders only what it returns).
type catalog struct {
	once    sync.Once
	entries []CatalogEntry
}

// Catalog lists every tool with its signature, in path order. The
// built-in tools are not included; Instructions describes them.
func (rt *Runtime) Catalog() []CatalogEntry {
	entries := rt.catalogEntries()
	out := make([]CatalogEntry, len(entries))
	copy(out, entries)
	return out
}

func (rt *Runtime) catalogEntries() []CatalogEntry {
	rt.cat.once.Do(func() {
		rt.cat.entries = make([]CatalogEntry, len(rt.tools))
		// Signatures render independently: use the cores there are.
		var wg sync.WaitGroup
		next := make(chan int)
		for range max(1, min(runtime.GOMAXPROCS(0), 8)) {
			wg.Go(func() {
				for i := range next {
					rt.cat.entries[i] = rt.entry(i)
				}
			})
		}
		for i := range rt.tools {
			next <- i
		}
		close(next)
		wg.Wait()
	})
	return rt.cat.entries
}

// entry renders the catalog entry of rt.tools[i], once.
func (rt *Runtime) entry(i int) CatalogEntry {
	e := rt.tools[i]
	e.sigOnce.Do(func() {
		in, out := schemaJSON(e.tool.Input), schemaJSON(e.tool.Output)
		t := guest.Tool{Path: e.path, Description: e.tool.Description, Tags: e.tool.Annotations.tags(), Input: in, Output: out, MaxSize: -1}
		switch {
		case e.tool.Types != nil:
			// Parts are readable through tools.$codemode.types, which
			// only a Runtime with named types (or large schemas) offers.
			t.Named, t.Parts, t.MaxSize = rt.types.named(e.tool.Types), partsPrefix(e.path), 0
		case rt.types.plainParts:
			t.Parts, t.MaxSize = partsPrefix(e.path), 0
		}
		r := language.Signature(t)
		rt.types.addParts(r.Parts)
		e.sig = CatalogEntry{
			Path:        e.name,
			Description: e.tool.Description,
			Signature:   r.Text,
			Types:       r.Uses,
			Annotations: e.tool.Annotations,
			Segments:    e.path,
		}
	})
	return e.sig
}

// partsPrefix names the parts of a tool's signature after its path:
// tools.stripe.PostCustomers → StripePostCustomers_Input_Address.
func partsPrefix(path []string) string {
	var b strings.Builder
	for _, seg := range path {
		b.WriteString(language.TypeName(seg))
	}
	return b.String()
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
