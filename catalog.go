package codemode

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/codemode-go/codemode/internal/tsgen"
)

// CatalogEntry describes one tool for the model.
type CatalogEntry struct {
	// Path is the tool's dot-joined path, as in the tool-call audit.
	Path        string `json:"path"`
	Description string `json:"description"`
	// Signature is the TypeScript declaration of the call, with the
	// description and parameter documentation as JSDoc.
	Signature string `json:"signature"`
	// Segments is the path as its segments (names may contain dots).
	Segments []string `json:"-"`

	line string // one-line form for the instructions' tool list
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
				Signature:   tsgen.Signature(e.path, e.tool.Description, in, out, true),
				Segments:    e.path,
				line:        catalogLine(tsgen.Signature(e.path, "", in, out, false), e.tool.Description),
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

// maxSummary bounds the description text on a catalog line.
const maxSummary = 120

// catalogLine is a tool's entry in the instructions: its one-line
// signature and the first line of its description.
func catalogLine(signature, description string) string {
	summary := strings.TrimSpace(description)
	if i := strings.IndexAny(summary, "\r\n"); i >= 0 {
		summary = strings.TrimSpace(summary[:i])
	}
	if r := []rune(summary); len(r) > maxSummary {
		summary = strings.TrimSpace(string(r[:maxSummary-1])) + "…"
	}
	if summary == "" {
		return signature
	}
	return signature + " // " + summary
}

// estimateTokens is the budget's unit: characters / 4, rounded up.
func estimateTokens(s string) int { return (len([]rune(s)) + 3) / 4 }

// selection is what the instructions show of the catalog.
type selection struct {
	namespaces []nsSelection
	shown      int
	total      int
}

type nsSelection struct {
	name  string
	total int
	lines []string // shown entries, in path order
}

// selectCatalog chooses the lines the instructions inline within the
// budget (estimated tokens). Namespaces take turns in name order, each
// offering its next cheapest line; a namespace whose next line does not
// fit drops out while the others continue.
func selectCatalog(entries []CatalogEntry, budget int) selection {
	type cand struct {
		line string
		cost int
		path string
	}
	byNS := map[string][]cand{}
	var names []string
	for _, e := range entries {
		ns := e.Segments[0]
		if _, ok := byNS[ns]; !ok {
			names = append(names, ns)
		}
		byNS[ns] = append(byNS[ns], cand{e.line, estimateTokens(e.line), e.Path})
	}
	sort.Strings(names)
	for _, ns := range names {
		c := byNS[ns]
		sort.SliceStable(c, func(i, j int) bool {
			if c[i].cost != c[j].cost {
				return c[i].cost < c[j].cost
			}
			return c[i].path < c[j].path
		})
	}
	next := map[string]int{}
	active := append([]string(nil), names...)
	picked := map[string][]cand{}
	left := budget
	for len(active) > 0 {
		var still []string
		for _, ns := range active {
			i := next[ns]
			if i >= len(byNS[ns]) {
				continue
			}
			c := byNS[ns][i]
			if c.cost > left {
				continue // this namespace drops out
			}
			left -= c.cost
			picked[ns] = append(picked[ns], c)
			next[ns] = i + 1
			still = append(still, ns)
		}
		active = still
	}
	sel := selection{total: len(entries)}
	for _, ns := range names {
		p := picked[ns]
		sort.SliceStable(p, func(i, j int) bool { return p[i].path < p[j].path })
		s := nsSelection{name: ns, total: len(byNS[ns])}
		for _, c := range p {
			s.lines = append(s.lines, c.line)
		}
		sel.shown += len(p)
		sel.namespaces = append(sel.namespaces, s)
	}
	return sel
}

func (s selection) complete() bool { return s.shown == s.total }

// header is the first line of the tool list.
func (s selection) header() string {
	if s.complete() {
		return "COMPLETE"
	}
	return fmt.Sprintf("PARTIAL - %d of %d shown", s.shown, s.total)
}

// label names a namespace with its counts: "alpha (2 tools, 1 shown)".
func (n nsSelection) label() string {
	tools := "tools"
	if n.total == 1 {
		tools = "tool"
	}
	switch {
	case len(n.lines) == n.total:
		return fmt.Sprintf("%s (%d %s)", n.name, n.total, tools)
	case len(n.lines) == 0:
		return fmt.Sprintf("%s (%d %s, none shown)", n.name, n.total, tools)
	}
	return fmt.Sprintf("%s (%d %s, %d shown)", n.name, n.total, tools, len(n.lines))
}
