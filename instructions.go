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
func (rt *Runtime) Instructions() string {
	sel := selectCatalog(rt.catalogEntries(), rt.opts.CatalogBudget)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	w("# Code mode\n\n")
	w("Write a program and run it with the `execute` tool. A program is the body of an async function in real JavaScript; TypeScript syntax is accepted and its types are ignored. Use `await` at the top level and `return` the result.\n\n")
	w("The program runs confined: the global `tools` object is its only way to reach anything outside. Its return value (plain data) and its `console.log` lines come back to you; nothing else does.\n\n")
	w("It is not Node.js and not a browser: there is no `import`, `require`, `fetch`, file system, network or `process`. To act on the world, call tools.\n\n")

	w("## Workflow\n\n")
	if sel.Complete() {
		w("1. Every available tool is listed under \"Available tools\" below: pick from that list.\n")
	} else {
		w("1. The list under \"Available tools\" is partial: search before you guess. `await tools.$codemode.search({ query: \"<what you need>\" })` returns matching tools with their exact signatures.\n")
	}
	w("2. Call a tool by the exact path shown, with one object argument: `await tools.<namespace>.<tool>({ ... })`. A name that is not an identifier needs brackets: `tools.<namespace>[\"<tool-name>\"]({ ... })`.\n")
	w("3. Return only the fields you need; everything returned comes back into your context.\n\n")

	w("## Rules\n\n")
	w("- Run independent calls in parallel: `const [a, b] = await Promise.all([tools.<namespace>.<first>({ ... }), tools.<namespace>.<second>({ ... })])`.\n")
	w("- Filter, join, count and aggregate in code rather than returning raw results.\n")
	w("- A result typed `unknown` can be anything: check its shape (`typeof`, `Array.isArray`, `in`) before reading fields.\n")
	w("- `Object.keys(tools)` lists the namespaces and `Object.keys(tools.<namespace>)` the tools in one.\n")
	w("- `tools.$codemode.search({ query?, namespace?, limit?, offset? })` returns `{ items: [{ path, description, signature }], remaining, next }`; when `next` is not null, call it again with `{ ...request, ...next }` for more.\n")
	if rt.compensable() {
		w("- Changes that must happen together go in a transaction: `const { tx } = await tools.$codemode.begin({ touches: [\"<namespace>.<tool>\", ...] })`, the calls (only tools in `touches`), then `await tools.$codemode.commit({ tx })`. If the run fails first, or you call `tools.$codemode.rollback({ tx })`, the completed calls are undone in reverse order, and what could not be undone is reported.\n")
	}
	if rt.opts.Values != nil {
		w("- State that outlives the run: `await tools.$codemode.store({ key, value })` keeps a JSON value for later runs (`value: null` deletes it), `(await tools.$codemode.load({ key })).value` reads it (null when absent), and `(await tools.$codemode.keys()).keys` lists the keys. Keep it small: each value at most %d bytes.\n", store.MaxValueBytes)
	}
	w("- A failed call rejects with a `ToolError` (`e.message`, `e.kind`, `e.tool`): catch it to recover, or let it fail the run. Await every call.\n")
	if rt.annotated() {
		w("- Tools tagged `@readonly` only read. Tools tagged `@destructive` delete or overwrite data, and tools with neither tag may change things too: call those only when the task asks for the change, never to explore. `@idempotent` tools can be retried safely; `@openworld` tools reach systems outside this one.\n")
	}
	if limits := rt.limitsText(); limits != "" {
		w("- Limits: %s.\n", limits)
	}
	w("\n")

	w("## Language\n\n")
	w("- Available: modern JavaScript (async/await, classes, generators, destructuring, spread, optional chaining), TypeScript annotations, `Map`, `Set`, `RegExp`, `Date` (UTC), `JSON`, `Math`, `URL`, `URLSearchParams`, `console.log`, `setTimeout` while the program runs.\n")
	w("- Not available: `import`/`export`, `require`, `fetch`, `eval` and `Function`, timers after the program returns, `Intl` (no locale formatting).\n")
	w("- Data in and out is JSON: pass and return objects, arrays, strings, numbers, booleans and null (undefined becomes null; Dates become ISO strings; Maps and Sets become {}); no functions, BigInts or cycles, at most 32 levels deep, and await promises first.\n\n")

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
			w("\n```ts\n%s\n```\n", strings.Join(g.Shown, "\n\n"))
		}
	}
	return b.String()
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
