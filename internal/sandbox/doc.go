// Package sandbox is the engine-neutral execution seam: it runs one
// untrusted JavaScript program against named binding namespaces (groups of
// async JSON functions supplied by the host) and returns its value, its
// console lines, and at most one failure of a fixed set of kinds.
//
// Every run gets a fresh engine instance with its own memory, clock and
// random seed; nothing a program does is visible to another run. The
// program has no filesystem, network, process, modules, timers outside
// its run, or code generation. The only authority it has is the bindings.
//
// The backend is QuickJS-NG compiled to WebAssembly and run by wazero (see
// [Sandbox.Language] and [Sandbox.Isolation]); no engine type appears in
// this package's API.
package sandbox
