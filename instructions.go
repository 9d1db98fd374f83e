package codemode

import (
	"fmt"
	"strings"

	"github.com/codemode-go/codemode/store"
)

// Instructions returns the model-facing description of the execute tool:
// what a program is, how to work with the tools, the language, and the
// tools themselves — all of them when they fit Options.CatalogBudget, else
// as many as fit (namespaces in turn, cheapest first; none for a negative
// budget) with a note that tools.$codemode.search finds the rest.
func (rt *Runtime) Instructions() string { return rt.instructions(false) }

// REPLInstructions is Instructions for a host whose programs are the
// cells of REPL sessions (ExecuteREPL): it says what a cell is instead of
// what a program is.
func (rt *Runtime) REPLInstructions() string { return rt.instructions(true) }

func (rt *Runtime) instructions(repl bool) string {
	sel := selectCatalog(rt.catalogEntries(), rt.opts.CatalogBudget)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	guide := language.Guide()

	w("# Code mode\n\n")
	if repl {
		w("Write a program and run it with the `execute` tool. %s\n\n", guide.Cell)
	} else {
		w("Write a program and run it with the `execute` tool. %s\n\n", guide.Program)
	}
	w("%s\n\n", guide.Confinement)
	w("%s\n\n", guide.Environment)

	w("## Workflow\n\n")
	if sel.Complete() {
		w("1. Every available tool is listed under \"Available tools\" below: pick from that list.\n")
	} else {
		w("1. The list under \"Available tools\" is partial: search before you guess. %s\n", guide.Search)
	}
	w("2. %s\n", guide.Call)
	if repl {
		w("3. End a cell with only the fields you need; its value comes back into your context, and what you keep in variables stays available without coming back.\n\n")
	} else {
		w("3. Return only the fields you need; everything returned comes back into your context.\n\n")
	}

	w("## Rules\n\n")
	w("- %s\n", guide.Parallel)
	w("- Filter, join, count and aggregate in code rather than returning raw results.\n")
	w("- %s\n", guide.Unknown)
	w("- %s\n", guide.List)
	if !sel.Complete() {
		// Every tool is listed otherwise: a rule for finding more would
		// only send the model looking.
		w("- %s\n", guide.SearchAPI)
	}
	if usesTypes(rt.catalogEntries()) {
		w("- %s\n", guide.Types)
	}
	if rt.compensable() {
		w("- %s\n", guide.Transaction)
	}
	if rt.opts.Values != nil {
		w("- %s Keep it small: each value at most %d bytes.\n", guide.Store, store.MaxValueBytes)
	}
	w("- %s\n", guide.Failure)
	if rt.annotated() {
		w("- %s\n", guide.Annotations)
	}
	if rt.opts.RichContent {
		w("- %s\n", contentRule)
	}
	if limits := rt.limitsText(); limits != "" {
		w("- Limits: %s.\n", limits)
	}
	w("\n")

	w("## Language\n\n")
	for _, l := range guide.Language {
		w("- %s\n", l)
	}
	w("\n")

	w("## Available tools\n\n")
	if sel.Total == 0 {
		w("No tools are available: programs can only compute.\n")
		return b.String()
	}
	w("%s\n", sel.Header())
	switch {
	case sel.Shown == 0:
		w("No signatures are listed here: use `tools.$codemode.search` to find tools and their signatures.\n")
	case !sel.Complete():
		w("Some tools are not listed below: use `tools.$codemode.search` to find them and their signatures.\n")
	}
	for _, g := range sel.Groups {
		w("\n### %s\n", g.Label())
		if len(g.Shown) > 0 {
			w("\n```%s\n%s\n```\n", guide.Fence, strings.Join(g.Shown, "\n\n"))
		}
	}
	return b.String()
}

// contentRule tells the model how a program shows content
// (Options.RichContent).
const contentRule = "To see an image, audio clip or resource a tool returned, return the object the tool gave (`{type: \"image\", mimeType, data}`, alone or inside your value): it reaches you as content, not as base64 text, and your value keeps `{type, mimeType, size, content: n}` in its place."

// usesTypes reports whether any signature names a type.
func usesTypes(entries []CatalogEntry) bool {
	for _, e := range entries {
		if len(e.Types) > 0 {
			return true
		}
	}
	return false
}

// compensable reports whether any tool can be undone.
func (rt *Runtime) compensable() bool {
	for _, e := range rt.tools {
		if e.tool.Compensate != nil {
			return true
		}
	}
	return false
}

// annotated reports whether any tool has annotations.
func (rt *Runtime) annotated() bool {
	for _, e := range rt.tools {
		if e.tool.Annotations != nil {
			return true
		}
	}
	return false
}

// limitsText describes the configured limits for the model.
func (rt *Runtime) limitsText() string {
	var parts []string
	if t := rt.opts.Timeout; t > 0 {
		parts = append(parts, fmt.Sprintf("a run may take %s", t))
	}
	switch n := rt.opts.MaxToolCalls; {
	case n < 0:
		parts = append(parts, "no tool calls are allowed")
	case n > 0:
		parts = append(parts, fmt.Sprintf("at most %d tool calls per run", n))
	}
	if b, limited := outputBudget(rt.opts.MaxOutputBytes); limited {
		parts = append(parts, fmt.Sprintf("the result and logs together are cut at %d bytes", b))
	}
	return strings.Join(parts, "; ")
}
