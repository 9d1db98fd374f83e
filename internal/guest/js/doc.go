// Package js is the JavaScript guest language's front end, behind
// [guest.Language]: a program is the body of an async function in
// JavaScript or TypeScript. internal/typescript checks its structure,
// wraps it as written, strips TypeScript with esbuild when the runner
// cannot compile it as written, and maps positions back; internal/tsgen
// declares each tool as a TypeScript signature; the guide (guide.go) is
// the JavaScript phrasing of the instructions.
//
// The runner is internal/sandbox, which runs what this package prepares on
// QuickJS-NG, with its own JavaScript half (the prelude, the URL shim).
package js
