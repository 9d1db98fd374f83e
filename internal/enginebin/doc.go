// Package enginebin holds the QuickJS-NG engine binary (quickjs.wasm from
// the npm package quickjs-wasi) and checks engine bytes against the
// pinned build.
//
// The binary is committed beside this file with its licence and a
// PROVENANCE file, and embedded in every build, so a module download has
// it and nothing is fetched at run time. [Resolve] returns it, or the
// bytes that replace it: those a host supplies, then the file
// $CODEMODE_ENGINE_WASM names. Every source is checked against [SHA256].
//
// This package only delivers bytes; internal/quickjs compiles and runs
// them, and is the only package that knows WebAssembly. Hence the name:
// the engine binary, as a file to check, not the engine that runs it (in
// wazero's vocabulary an engine is the compiler).
package enginebin
