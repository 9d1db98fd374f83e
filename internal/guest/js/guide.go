package js

import "github.com/codemode-go/codemode/internal/guest"

// guide is how the instructions speak of JavaScript. The examples use the
// names the runtime binds (tools, ToolError, tools.$codemode).
var guide = guest.Guide{
	Program:     "A program is the body of an async function in real JavaScript; TypeScript syntax is accepted and its types are ignored. Use `await` at the top level and `return` the result.",
	Cell:        "Programs are the cells of one session, as in a notebook: a cell is a script in real JavaScript (TypeScript syntax is accepted and its types are ignored) whose top-level `const`, `let`, `function` and `class` declarations stay defined for the cells after it, so keep results in variables and build on them. Use `await` at the top level. There is no `return`: the value of the cell's last expression statement is its result (end with `total;` or `({ a, b });`). Declaring a name an earlier cell declared is a SyntaxError: assign to it, or pick a new name. A cell that fails by throwing keeps what it declared before the throw; one that times out keeps nothing.",
	Confinement: "The program runs confined: the global `tools` object is its only way to reach anything outside. Its return value (plain data) and its `console.log` lines come back to you; nothing else does.",
	Environment: "It is not Node.js and not a browser: there is no `import`, `require`, `fetch`, file system, network or `process`. To act on the world, call tools.",

	Search: "`await tools.$codemode.search({ query: \"<what you need>\" })` returns matching tools with their exact signatures.",
	Call:   "Call a tool by the exact path shown, with one object argument: `await tools.<namespace>.<tool>({ ... })`. A name that is not an identifier needs brackets: `tools.<namespace>[\"<tool-name>\"]({ ... })`.",

	Parallel:    "Run independent calls in parallel: `const [a, b] = await Promise.all([tools.<namespace>.<first>({ ... }), tools.<namespace>.<second>({ ... })])`.",
	Unknown:     "A result typed `unknown` can be anything: check its shape (`typeof`, `Array.isArray`, `in`) before reading fields.",
	List:        "`Object.keys(tools)` lists the namespaces and `Object.keys(tools.<namespace>)` the tools in one.",
	SearchAPI:   "`tools.$codemode.search({ query?, namespace?, limit?, offset? })` returns `{ items: [{ path, description, signature }], remaining, next }`; when `next` is not null, call it again with `{ ...request, ...next }` for more.",
	Types:       "Signatures name some types (`Customer`, `StripePostCustomers_Input_Address`) instead of spelling them out; when you need one's fields, `(await tools.$codemode.types({ names: [\"Customer\"] })).items` holds the declarations.",
	Transaction: "Changes that must happen together go in a transaction: `const { tx } = await tools.$codemode.begin({ touches: [\"<namespace>.<tool>\", ...] })`, the calls (only tools in `touches`), then `await tools.$codemode.commit({ tx })`. If the run fails first, or you call `tools.$codemode.rollback({ tx })`, the completed calls are undone in reverse order, and what could not be undone is reported.",
	Store:       "State that outlives the run: `await tools.$codemode.store({ key, value })` keeps a JSON value for later runs (`value: null` deletes it), `(await tools.$codemode.load({ key })).value` reads it (null when absent), and `(await tools.$codemode.keys()).keys` lists the keys.",
	Failure:     "A failed call rejects with a `ToolError` (`e.message`, `e.kind`, `e.tool`): catch it to recover, or let it fail the run. Await every call.",
	Annotations: "Tools tagged `@readonly` only read. Tools tagged `@destructive` delete or overwrite data, and tools with neither tag may change things too: call those only when the task asks for the change, never to explore. `@idempotent` tools can be retried safely; `@openworld` tools reach systems outside this one.",

	Language: []string{
		"Available: modern JavaScript (async/await, classes, generators, destructuring, spread, optional chaining), TypeScript annotations, `Map`, `Set`, `RegExp`, `Date` (UTC), `JSON`, `Math`, `URL`, `URLSearchParams`, `console.log`, `setTimeout` while the program runs.",
		"Not available: `import`/`export`, `require`, `fetch`, `eval` and `Function`, timers after the program returns, `Intl` (no locale formatting).",
		"Data in and out is JSON: pass and return objects, arrays, strings, numbers, booleans and null (undefined becomes null; Dates become ISO strings; Maps and Sets become {}); no functions, BigInts or cycles, at most 32 levels deep, and await promises first.",
	},
	Fence: "ts",
}
