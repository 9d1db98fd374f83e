// Package enginebin finds the QuickJS-NG engine binary (quickjs.wasm from the
// npm package quickjs-wasi) and checks it against the pinned build.
//
// The binary is a third-party build the repository does not contain, so a
// module download lacks it and nothing may need it at compile time.
// [Resolve] finds it at run time, in a fixed order: bytes the host
// supplies, the copy a codemode_embed build carries, the file
// $CODEMODE_ENGINE_WASM names, the per-user cache keyed by the hash, and
// finally npm pack of the pinned version. Every source is checked against
// [SHA256]; when none has the engine the error ends with the command that
// installs it.
//
// This package only delivers bytes; internal/quickjs compiles and runs
// them, and is the only package that knows WebAssembly. Hence the name:
// the engine binary, as a file to find and check, not the engine that
// runs it (in wazero's vocabulary an engine is the compiler).
package enginebin
