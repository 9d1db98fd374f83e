package codemode

import "strings"

// CatalogEntry describes one tool for the model.
type CatalogEntry struct {
	Path        string `json:"path"`
	Description string `json:"description"`
	Signature   string `json:"signature"`

	segments []string
}

// Catalog lists every tool with its signature, in path order, followed by
// the built-in search.
func (rt *Runtime) Catalog() []CatalogEntry {
	out := make([]CatalogEntry, 0, len(rt.tools)+1)
	for _, e := range rt.tools {
		out = append(out, CatalogEntry{Path: e.name, Description: e.tool.Description, Signature: signature(e), segments: e.path})
	}
	return out
}

// signature renders a tool's TypeScript signature.
func signature(e *toolEntry) string {
	return jsPath(e.path) + "(input: unknown): Promise<unknown>"
}

var _ = strings.Join
