// Package tsgen renders JSON Schema as TypeScript types, so that a
// language model writing a TypeScript program sees each host tool as a
// familiar signature:
//
//	tools.orders.lookup(input: { id: string; verbose?: boolean }): Promise<{ status: "open" | "closed" }>
//
// Schemas arrive as raw JSON from many sources (MCP servers, OpenAPI 3.0
// documents with nullable, schemas inferred from Go types), so the package
// takes bytes rather than a typed schema and accepts draft-07, 2020-12 and
// OpenAPI 3.0 keywords side by side.
//
// The output is a description for a reader, not a validator: whatever the
// schema says that TypeScript cannot express (patterns, numeric bounds,
// formats) goes into JSDoc in the pretty form, and whatever the package
// cannot follow (a remote $ref, a cycle, a malformed keyword, nesting past
// the depth cap) widens to unknown instead of failing. Every result is a
// well-formed TypeScript type that compiles under --strict; the tests hold
// it to that with the TypeScript compiler.
//
// [Signature] and [Type] expand references inline, so that a signature
// stands alone in a prompt. Expansion is bounded: a reference already
// being expanded becomes unknown (a cycle), and a render expands at most
// a fixed number of references and visits at most a fixed number of
// schemas, so any input renders in bounded time and size.
//
// [Render] and [Declare] are for schemas that share named types (an
// OpenAPI document's components): a reference Options.Named knows is
// shown by its name, declared once elsewhere, and the text is bounded in
// size by cutting object types out into named parts, deepest first.
package tsgen
